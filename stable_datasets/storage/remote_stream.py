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
  from its local data file through the mapped-blob path (layouts.lance.blobs), one Lance call for
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
- The stream is opened with lanes (streaming.order.Lanes): each rank x worker serves one contiguous
  stretch of the epoch order, so a node downloads about its own share of the shards (shard affinity),
  plus the ones where lanes meet. The schema comes from a shard already open, never from another one.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import table_rows
from stable_datasets.arrow.tables import ordered_gather
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.cache.shard_list import shard_rows
from stable_datasets.errors import CacheError
from stable_datasets.layouts import layout_module
from stable_datasets.layouts.base import LayoutBackend, StreamUnits
from stable_datasets.layouts.open import open_backend
from stable_datasets.storage import shard_cache
from stable_datasets.storage.publish import RemoteSplit
from stable_datasets.storage.remote_cache import open_remote_split, write_local_metadata

OPEN_SHARDS = 2
FETCH_TRIES = 3


class RemoteShards(LayoutBackend):
    """The rows of one published remote split, downloaded a shard at a time (see the module docstring).

    A backend like the layouts' own (so `dataset.open` serves it as a `StableDataset`), whose shards are
    backends of the cache's layout opened on their downloaded files.
    """

    batched_reads = True

    def __init__(self, split: RemoteSplit, metadata: CacheMetadata, units: StreamUnits,
                 read_options: dict[str, Any] | None = None, rows: tuple[int, int] | None = None):
        """`rows`: (start, stop) of a partial split ("train[10%:30%]"): only the shards covering it are read."""
        # LayoutBackend.__init__ is not called: nothing is pinned (the shard cache may trim what was read)
        self.split, self.metadata, self.units = split, metadata, units
        self.options = dict(read_options or {})
        self.directory = shard_cache.attempt_dir(split.store, split.key(metadata.attempt))
        self.block_rows = units.block_rows
        counts = shard_rows(units.units)  # a cache's `_shards.arrow` as one column (no ShardInfo each)
        self._shard_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        total = int(self._shard_starts[-1])
        start, stop = (0, total) if rows is None else (int(rows[0]), int(rows[1]))
        if not 0 <= start <= stop <= total:
            raise ValueError(f"rows {start}:{stop} are not inside the {total} rows of {split.url}")
        self._start, self._stop = start, stop
        self._open_shards: OrderedDict[int, LayoutBackend] = OrderedDict()
        self._pin = None
        self.downloads = 0  # shards fetched by this process (a fetch of a present copy counts too)
        self._stream_pin = self._hold_pin()  # against rm/prune of this node, not eviction (module docstring)

    def _hold_pin(self) -> shard_cache.StreamPin:
        local = shard_cache.attempt_dir(self.split.store, self.split.key(self.metadata.attempt))
        local.mkdir(parents=True, exist_ok=True)
        return shard_cache.StreamPin(local)

    @property
    def num_rows(self) -> int:
        return self._stop - self._start

    @property
    def is_whole(self) -> bool:
        return (self._start, self._stop) == (0, int(self._shard_starts[-1]))

    def view_identity(self) -> Any | None:
        return None if self.is_whole else [self._start, self._stop]

    def __getstate__(self) -> dict[str, Any]:  # a DataLoader worker opens its own shards, and pins the attempt
        return {**self.__dict__, "_open_shards": OrderedDict(), "_stream_pin": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stream_pin = self._hold_pin()

    def _open(self) -> None:
        pass

    def ensure_open(self) -> None:
        pass

    @property
    def schema(self) -> pa.Schema:
        """The shards' schema (every shard of a cache has the same): from a shard open already, so a node that reads
        only its own lane's shards downloads no other one to learn it."""
        for backend in self._open_shards.values():
            return backend.schema
        return self._shard(self._first_shard()).schema

    def stored_column_order(self) -> list[str] | None:
        return None  # known without a download: the metadata's order

    def stored_row_counts(self) -> tuple[int, int]:
        counted = sum(self._shard(i).stored_row_counts()[0] for i in range(len(self.units.units)))
        return counted, self.metadata.num_rows

    def rows_in_place(self) -> bool:
        return False

    def block_bounds(self) -> np.ndarray:
        """Each shard cut every `block_rows` rows (of the whole split), clipped to the rows read."""
        pieces = [np.arange(lo, hi, self.block_rows) for lo, hi in zip(self._shard_starts[:-1].tolist(),
                                                                    self._shard_starts[1:].tolist()) if hi > lo]
        bounds = np.concatenate([*pieces, self._shard_starts[-1:]]).astype(np.int64)
        inside = bounds[(bounds > self._start) & (bounds < self._stop)]
        return np.concatenate([[self._start], inside, [self._stop]]).astype(np.int64) - self._start

    def shard_bounds(self) -> np.ndarray | None:
        """Where the shards begin (rows of this source), then its length: the groups of a shard window."""
        inside = self._shard_starts[(self._shard_starts > self._start) & (self._shard_starts < self._stop)]
        return np.concatenate([[self._start], inside, [self._stop]]).astype(np.int64) - self._start

    def _first_shard(self) -> int:
        return int(np.searchsorted(self._shard_starts, self._start, side="right") - 1) if len(self.units.units) else 0

    def _shard(self, index: int) -> LayoutBackend:
        """Shard `index` as a backend of the cache's layout (downloaded and opened on first use)."""
        backend = self._open_shards.get(index)
        if backend is not None:
            self._open_shards.move_to_end(index)
            return backend
        item = self.units.units[index]
        store, attempt_key = self.split.store, self.split.key(self.metadata.attempt)
        local = self.directory
        one = dataclasses.replace(self.metadata, shards=[item], num_rows=item.num_rows, extra_files=[])
        for attempt in range(FETCH_TRIES):
            for shared in self.units.shared:  # e.g. a Lance dataset's own small files, beside the data file
                shard_cache.fetch(store, f"{attempt_key}/{shared.path}", local / shared.path, shared)
            shard_cache.fetch(store, f"{attempt_key}/{item.path}", local / item.path, item)
            self.downloads += 1
            try:
                backend = open_backend(local, one, self.options, unit=item)
                backend.slice(0, min(1, item.num_rows))  # maps the file now, before eviction can remove it
                break
            except (FileNotFoundError, CacheError):
                # evicted by another process between the fetch and the open: fetch again; else a real error
                if attempt == FETCH_TRIES - 1 or all((local / f.path).is_file() for f in [item, *self.units.shared]):
                    raise
        backend.release_pin()  # eviction may take the file: the open map keeps serving it
        self._open_shards[index] = backend
        while len(self._open_shards) > OPEN_SHARDS:
            self._open_shards.popitem(last=False)
        shard_cache.evict()
        return backend

    def _gather(self, positions: np.ndarray) -> pa.Table:
        """Rows at split positions (not offset by the range)."""
        return ordered_gather(positions, self._shard_starts[:-1], lambda s, local: self._shard(s).take(local), None)

    def take(self, indices: np.ndarray) -> pa.Table:
        return self._gather(np.asarray(indices, dtype=np.int64) + self._start)

    def row(self, index: int) -> dict[str, Any]:
        return table_rows(self.take(np.asarray([index], dtype=np.int64)))[0]

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        return table_rows(self.take(np.asarray(indices, dtype=np.int64)))

    def slice(self, start: int, stop: int) -> pa.Table:
        start, stop = start + self._start, stop + self._start
        shard = int(np.searchsorted(self._shard_starts, start, side="right") - 1)
        base = int(self._shard_starts[min(shard, len(self._shard_starts) - 2)]) if len(self.units.units) else 0
        if len(self.units.units) and stop <= self._shard_starts[shard + 1]:
            return self._shard(shard).slice(start - base, stop - base)
        return self._gather(np.arange(start, stop, dtype=np.int64))

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        position = start
        while position < stop:
            absolute = position + self._start
            shard = int(np.searchsorted(self._shard_starts, absolute, side="right") - 1)
            end = min(stop, int(self._shard_starts[shard + 1]) - self._start)
            base = int(self._shard_starts[shard]) - self._start
            yield from self._shard(shard).iter_batches(position - base, end - base, batch_rows)
            position = end

    def __repr__(self) -> str:
        rows = "" if self.is_whole else f" [{self._start}:{self._stop}]"
        return f"RemoteShards({self.split.url}{rows}, {self.num_rows} rows in {len(self.units.units)} shards)"


def open_remote_shards(url: str, storage_options: dict[str, Any] | None = None,
                       rows: Callable[[int], tuple[int, int]] | None = None
                       ) -> tuple[RemoteShards, CacheMetadata] | None:
    """The backend reading the remote split at `url` a shard at a time, with its metadata; None for caches that
    cannot be streamed that way (the layout has no `stream_units`: video frames, caches with media files,
    Lance caches without `fragment_files`, opened whole). `rows(num_rows)` gives the (start, stop) of a
    partial split."""
    split, metadata, text = open_remote_split(url, storage_options)
    try:
        units = layout_module(metadata.layout).Backend.stream_units(metadata)
    except CacheError as exc:
        raise CacheError(f"{split.url}: {exc}") from None
    if units is None:
        return None
    local = shard_cache.attempt_dir(split.store, split.key(metadata.attempt))
    local.mkdir(parents=True, exist_ok=True)
    write_local_metadata(local, text)  # marks the folder as an attempt's, so the shard cache can trim it
    return RemoteShards(split, metadata, units, rows=None if rows is None else rows(metadata.num_rows)), metadata
