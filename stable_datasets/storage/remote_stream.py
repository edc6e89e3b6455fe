"""Streaming a remote cache a shard at a time (`load_dataset(..., streaming=True)` on a bucket).

Opening a remote cache for random access downloads the whole split (storage.remote_cache; Lance is
read in place). A stream needs only the shards its order has reached, so `RemoteShardSource` serves
the `StreamingDataset` reader from `_metadata.json` alone, and downloads a shard (verified, into the
local shard cache) when the first block of it is read. A shard is an Arrow or Parquet shard file, or
a Lance fragment's data file (one GET for the whole file, as litdata fetches a chunk: a ranged GET
per block costs a request each, and some servers read the whole object to answer each range).
Rules:

- Blocks come from the metadata, not the files: each shard cut every `BLOCK_ROWS` rows (Lance: every
  `max_rows_per_group`, the blocks of the cache opened locally). So the order is known before
  anything is downloaded, and is the same on every rank and worker.
- A Lance cache's `_metadata.json` lists its fragments' data files in row order (`fragment_files`).
  Its manifest files (a few KB) are downloaded with the first fragment; a fragment is then read
  from its local data file through the mapped-blob path (layouts.lance_blobs), one Lance call for
  its blob descriptions and one for its other columns. Caches written before `fragment_files` are
  streamed in place by Lance, with ranged GETs.
- The stream pins its attempt while it lives (shard_cache.StreamPin), so `rm` or `prune` of this
  node leaves the objects it has yet to download (they mark the attempt superseded instead).
- At most `OPEN_SHARDS` shards are open per process; the least recently read is closed when
  another opens. Nothing pins the shards against eviction: after each download the shard cache is trimmed to
  `STABLE_DATASETS_LOCAL_CACHE_LIMIT`. A shard removed while it is mapped stays readable
  through the map; one removed before it is opened is downloaded again.
- The checks are the shard cache's: a shard that changed or vanished remotely is an error
  naming it, never wrong rows.
- In storage order the stream reads shard after shard, so the disk holds about one shard. The
  block shuffle reads windows of blocks from anywhere in the split unless it is given
  `window_shards=k` (streaming.order): then about k shards at a time, each downloaded once.
- A partial split (`rows=`) reads only the shards covering its rows.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.tables import ordered_gather
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.storage import shard_cache
from stable_datasets.storage.publish import RemoteSplit

STREAMED_LAYOUTS = ("arrow_shards", "parquet_shards", "lance_rows")
BLOCK_ROWS = 1024
LANCE_DATA = "data.lance/data/"  # where lance_rows keeps its fragments' data files
OPEN_SHARDS = 2
FETCH_TRIES = 3


class RemoteShardSource:
    """The rows of one published remote split, for `StreamingDataset` (see the module docstring)."""

    def __init__(self, split: RemoteSplit, metadata: CacheMetadata, layout_options: dict[str, Any] | None = None,
                 rows: tuple[int, int] | None = None):
        """`rows`: (start, stop) of a partial split ("train[10%:30%]"): only the shards covering it are read."""
        self.split, self.metadata = split, metadata
        self.layout_options = dict(layout_options or {})
        self._units, self._lance_files = stream_units(metadata, split.url)
        self.block_rows = BLOCK_ROWS if not self._lance_files else \
            int(metadata.layout_options.get("max_rows_per_group", BLOCK_ROWS))
        counts = [s.num_rows for s in self._units]
        self._shard_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        total = int(self._shard_starts[-1])
        start, stop = (0, total) if rows is None else (int(rows[0]), int(rows[1]))
        if not 0 <= start <= stop <= total:
            raise ValueError(f"rows {start}:{stop} are not inside the {total} rows of {split.url}")
        self._start, self._stop = start, stop
        whole = (start, stop) == (0, total)
        self.fingerprint = metadata.fingerprint if whole else f"{metadata.fingerprint}[{start}:{stop}]"
        self._open: OrderedDict[int, Any] = OrderedDict()
        self.downloads = 0  # shards fetched by this process (a fetch of a present copy counts too)
        self._pin = self._hold_pin()

    def _hold_pin(self) -> shard_cache.StreamPin:
        local = shard_cache.attempt_dir(self.split.store, self.split.key(self.metadata.attempt))
        local.mkdir(parents=True, exist_ok=True)
        return shard_cache.StreamPin(local)

    def __len__(self) -> int:
        return self._stop - self._start

    def __getstate__(self) -> dict[str, Any]:  # a DataLoader worker opens its own shards, and pins the attempt
        return {**self.__dict__, "_open": OrderedDict(), "_pin": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pin = self._hold_pin()

    def block_bounds(self) -> np.ndarray:
        """Each shard cut every `block_rows` rows (of the whole split), clipped to the rows read."""
        pieces = [np.arange(lo, hi, self.block_rows) for lo, hi in zip(self._shard_starts[:-1].tolist(),
                                                                    self._shard_starts[1:].tolist()) if hi > lo]
        bounds = np.concatenate([*pieces, self._shard_starts[-1:]]).astype(np.int64)
        inside = bounds[(bounds > self._start) & (bounds < self._stop)]
        return np.concatenate([[self._start], inside, [self._stop]]).astype(np.int64) - self._start

    def shard_bounds(self) -> np.ndarray:
        """Where the shards begin (rows of this source), then its length: the groups of a shard window."""
        inside = self._shard_starts[(self._shard_starts > self._start) & (self._shard_starts < self._stop)]
        return np.concatenate([[self._start], inside, [self._stop]]).astype(np.int64) - self._start

    def _shard(self, index: int) -> Any:
        """Shard `index` as a one-shard StableDataset (downloaded and opened on first use)."""
        dataset = self._open.get(index)
        if dataset is not None:
            self._open.move_to_end(index)
            return dataset
        from stable_datasets.dataset.open import dataset_from

        item = self._units[index]
        store, attempt_key = self.split.store, self.split.key(self.metadata.attempt)
        local = shard_cache.attempt_dir(store, attempt_key)
        one = dataclasses.replace(self.metadata, shards=[item], num_rows=item.num_rows, extra_files=[])
        fragment = item.path[len(LANCE_DATA):] if self._lance_files else None
        for attempt in range(FETCH_TRIES):
            for manifest in self._lance_files:  # the Lance dataset's own small files, beside the data file
                shard_cache.fetch(store, f"{attempt_key}/{manifest.path}", local / manifest.path, manifest)
            shard_cache.fetch(store, f"{attempt_key}/{item.path}", local / item.path, item)
            self.downloads += 1
            try:
                dataset = dataset_from(local, one, self.layout_options, lance_fragment=fragment)
                dataset.read_block(0, min(1, item.num_rows))  # maps the file now, before eviction can remove it
                break
            except (FileNotFoundError, CacheError):
                # evicted by another process between the fetch and the open: fetch again; else a real error
                if attempt == FETCH_TRIES - 1 or all((local / f.path).is_file() for f in [item, *self._lance_files]):
                    raise
        for backend in dataset._backends:
            backend.release_pin()  # eviction may take the file: the open map keeps serving it
        self._open[index] = dataset
        while len(self._open) > OPEN_SHARDS:
            self._open.popitem(last=False)
        shard_cache.evict()
        return dataset

    def read_block(self, start: int, stop: int) -> pa.Table:
        start, stop = start + self._start, stop + self._start
        shard = int(np.searchsorted(self._shard_starts, start, side="right") - 1)
        base = int(self._shard_starts[shard])
        if stop <= self._shard_starts[shard + 1]:
            return self._shard(shard).read_block(start - base, stop - base)
        return self._gather(np.arange(start, stop, dtype=np.int64))

    def read_rows(self, positions: np.ndarray) -> pa.Table:
        return self._gather(np.asarray(positions, dtype=np.int64) + self._start)

    def _gather(self, positions: np.ndarray) -> pa.Table:
        """Rows at split positions (not offset by the range)."""
        return ordered_gather(positions, self._shard_starts[:-1],
                              lambda s, local: self._shard(s).read_rows(local), None)

    def _formatter(self) -> Any:
        if not self._open:
            self._shard(int(np.searchsorted(self._shard_starts, self._start, side="right") - 1))
        return next(reversed(self._open.values()))

    def rows_from_arrow(self, table: pa.Table) -> list[Any]:
        return self._formatter().rows_from_arrow(table)

    def batch_from_arrow(self, table: pa.Table) -> Any:
        return self._formatter().batch_from_arrow(table)

    def __repr__(self) -> str:
        rows = "" if (self._start, self._stop) == (0, int(self._shard_starts[-1])) else \
            f" [{self._start}:{self._stop}]"
        return f"RemoteShardSource({self.split.url}{rows}, {len(self)} rows in {len(self._units)} shards)"


def stream_units(metadata: CacheMetadata, url: str) -> tuple[list[ShardInfo], list[ShardInfo]]:
    """(the files a stream downloads one at a time, in row order; the files every one of them needs beside it):
    shard files, none; or a Lance cache's data files in fragment order, and its manifest files."""
    if metadata.layout != "lance_rows":
        return list(metadata.shards), []
    names = metadata.extra.get("fragment_files")
    by_path = {s.path: s for s in metadata.shards}
    units = [by_path.get(f"{LANCE_DATA}{name}") for name in names] if isinstance(names, list) else None
    if units is None or None in units or sum(u.num_rows for u in units) != metadata.num_rows:
        raise CacheError(f"{url}: invalid cache metadata: fragment_files {names!r} do not name the Lance data files "
                         f"{METADATA_FILE} lists, holding its {metadata.num_rows} rows")
    others = [s for s in metadata.shards if s.path.startswith("data.lance/") and not s.path.startswith(LANCE_DATA)]
    return units, others  # type: ignore[return-value]


def streams_shard_by_shard(metadata: CacheMetadata) -> bool:
    """Whether a stream of this remote cache downloads it a shard at a time (else it is opened as a whole)."""
    if metadata.layout not in STREAMED_LAYOUTS or metadata.extra_files or not metadata.shards:
        return False
    return metadata.layout != "lance_rows" or "fragment_files" in metadata.extra  # older Lance caches: in place


def open_remote_stream(url: str, storage_options: dict[str, Any] | None = None,
                       rows: Callable[[int], tuple[int, int]] | None = None) -> Any | None:
    """A `StreamingDataset` reading the remote split at `url` a shard at a time; None for caches it cannot
    stream that way (video frames, caches with media files, Lance caches without `fragment_files`: opened
    whole, Lance read in place). `rows(num_rows)` gives the (start, stop) of a partial split."""
    from stable_datasets.storage.remote_cache import _write_local_metadata, open_remote_split
    from stable_datasets.streaming.iterable import StreamingDataset

    split, metadata, text = open_remote_split(url, storage_options)
    if not streams_shard_by_shard(metadata):
        return None
    local = shard_cache.attempt_dir(split.store, split.key(metadata.attempt))
    local.mkdir(parents=True, exist_ok=True)
    _write_local_metadata(local, text)  # marks the folder as an attempt's, so the shard cache can trim it
    return StreamingDataset(RemoteShardSource(split, metadata, rows=None if rows is None else rows(metadata.num_rows)))
