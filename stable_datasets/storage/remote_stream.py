"""Streaming a remote Arrow/Parquet cache a shard at a time (`load_dataset(..., streaming=True)` on a bucket).

Opening a remote cache for random access downloads the whole split (storage.remote_cache). A
stream needs only the shards its order has reached, so `RemoteShardSource` serves the
`StreamingDataset` reader from `_metadata.json` alone, and downloads a shard (verified, into the
local shard cache) when the first block of it is read. Rules:

- Blocks come from the metadata, not the files: each shard cut every `BLOCK_ROWS` rows. So the
  order is known before anything is downloaded, and is the same on every rank and worker.
- At most `OPEN_SHARDS` shards are open per process; the least recently read is closed when
  another opens. Nothing pins the shards: after each download the shard cache is trimmed to
  `STABLE_DATASETS_LOCAL_CACHE_LIMIT`. A shard removed while it is mapped stays readable
  through the map; one removed before it is opened is downloaded again.
- The checks are the shard cache's: a shard that changed or vanished remotely is an error
  naming it, never wrong rows.
- In storage order the stream reads shard after shard, so the disk holds about one shard. The
  block shuffle reads windows of blocks from anywhere in the split: it needs the split's
  shards for the whole epoch, so give it a cache limit that holds the split (or expect
  re-downloads).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.tables import ordered_gather
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.storage import shard_cache
from stable_datasets.storage.publish import RemoteSplit

STREAMED_LAYOUTS = ("arrow_shards", "parquet_shards")
BLOCK_ROWS = 1024
OPEN_SHARDS = 2
FETCH_TRIES = 3


class RemoteShardSource:
    """The rows of one published remote split, for `StreamingDataset` (see the module docstring)."""

    def __init__(self, split: RemoteSplit, metadata: CacheMetadata, layout_options: dict[str, Any] | None = None):
        self.split, self.metadata = split, metadata
        self.layout_options = dict(layout_options or {})
        self.fingerprint = metadata.fingerprint
        counts = [s.num_rows for s in metadata.shards]
        self._shard_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._open: OrderedDict[int, Any] = OrderedDict()
        self.downloads = 0  # shards fetched by this process (a fetch of a present copy counts too)

    def __len__(self) -> int:
        return int(self._shard_starts[-1])

    def __getstate__(self) -> dict[str, Any]:  # a DataLoader worker opens its own shards
        return {**self.__dict__, "_open": OrderedDict()}

    def block_bounds(self) -> np.ndarray:
        pieces = [np.arange(lo, hi, BLOCK_ROWS) for lo, hi in zip(self._shard_starts[:-1].tolist(),
                                                                    self._shard_starts[1:].tolist()) if hi > lo]
        return np.concatenate([*pieces, self._shard_starts[-1:]]).astype(np.int64)

    def _shard(self, index: int) -> Any:
        """Shard `index` as a one-shard StableDataset (downloaded and opened on first use)."""
        dataset = self._open.get(index)
        if dataset is not None:
            self._open.move_to_end(index)
            return dataset
        from stable_datasets.dataset.open import dataset_from

        item = self.metadata.shards[index]
        store, attempt_key = self.split.store, self.split.key(self.metadata.attempt)
        local = shard_cache.attempt_dir(store, attempt_key)
        one = dataclasses.replace(self.metadata, shards=[item], num_rows=item.num_rows, extra_files=[])
        for attempt in range(FETCH_TRIES):
            shard_cache.fetch(store, f"{attempt_key}/{item.path}", local / item.path, item)
            self.downloads += 1
            try:
                dataset = dataset_from(local, one, self.layout_options)
                dataset.read_block(0, min(1, item.num_rows))  # maps the file now, before eviction can remove it
                break
            except FileNotFoundError:  # evicted by another process between the fetch and the open
                if attempt == FETCH_TRIES - 1:
                    raise
        for backend in dataset._backends:
            backend.release_pin()  # eviction may take the file: the open map keeps serving it
        self._open[index] = dataset
        while len(self._open) > OPEN_SHARDS:
            self._open.popitem(last=False)
        shard_cache.evict()
        return dataset

    def read_block(self, start: int, stop: int) -> pa.Table:
        shard = int(np.searchsorted(self._shard_starts, start, side="right") - 1)
        base = int(self._shard_starts[shard])
        if stop <= self._shard_starts[shard + 1]:
            return self._shard(shard).read_block(start - base, stop - base)
        return self.read_rows(np.arange(start, stop, dtype=np.int64))

    def read_rows(self, positions: np.ndarray) -> pa.Table:
        return ordered_gather(np.asarray(positions, dtype=np.int64), self._shard_starts[:-1],
                              lambda s, local: self._shard(s).read_rows(local), None)

    def _formatter(self) -> Any:
        if not self._open:
            self._shard(0)
        return next(reversed(self._open.values()))

    def rows_from_arrow(self, table: pa.Table) -> list[Any]:
        return self._formatter().rows_from_arrow(table)

    def batch_from_arrow(self, table: pa.Table) -> Any:
        return self._formatter().batch_from_arrow(table)

    def __repr__(self) -> str:
        return f"RemoteShardSource({self.split.url}, {len(self)} rows in {len(self.metadata.shards)} shards)"


def open_remote_stream(url: str, storage_options: dict[str, Any] | None = None) -> Any | None:
    """A `StreamingDataset` reading the remote split at `url` a shard at a time; None for layouts it cannot
    stream that way (Lance is read in place, caches with media files are opened whole)."""
    from stable_datasets.storage.remote_cache import _write_local_metadata, open_remote_split
    from stable_datasets.streaming.iterable import StreamingDataset

    split, metadata, text = open_remote_split(url, storage_options)
    if metadata.layout not in STREAMED_LAYOUTS or metadata.extra_files or not metadata.shards:
        return None
    local = shard_cache.attempt_dir(split.store, split.key(metadata.attempt))
    local.mkdir(parents=True, exist_ok=True)
    _write_local_metadata(local, text)  # marks the folder as an attempt's, so the shard cache can trim it
    return StreamingDataset(RemoteShardSource(split, metadata))
