"""`arrow_shards`: Arrow IPC files, memory-mapped for zero-copy reads.

Write: record batches are appended to `shard-NNNNN.arrow`, rotating when a shard passes
`max_shard_size` bytes; uncompressed by default so reads are views of the page cache.
Read: every record batch of every shard is mapped once per process; a row is located with
one bisect over batch offsets and read through per-batch cell getters.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.dataset.cells import CellGetter, cell_getter
from stable_datasets.layouts.base import LayoutBackend, LayoutWriter
from stable_datasets.tables import ordered_gather

NAME = "arrow_shards"
DEFAULT_OPTIONS: dict[str, Any] = {"max_shard_size": 512 << 20, "compression": None}


class Writer(LayoutWriter):
    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        super().__init__(directory, schema, {**DEFAULT_OPTIONS, **options})
        compression = self.options["compression"]
        self._ipc_options = pa.ipc.IpcWriteOptions(compression=compression) if compression else None
        self._shards: list[ShardInfo] = []
        self._sink: pa.NativeFile | None = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._rows = 0

    def _start_shard(self) -> None:
        path = self.directory / f"shard-{len(self._shards):05d}.arrow"
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._sink, self.schema, options=self._ipc_options)
        self._rows = 0
        self._shards.append(ShardInfo(path=path.name, num_rows=0, num_bytes=0, sha256=""))

    def _finish_shard(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._sink.close()
        shard = self._shards[-1]
        path = self.directory / shard.path
        shard.num_rows = self._rows
        shard.num_bytes = path.stat().st_size
        shard.sha256 = file_sha256(path)
        self._writer = self._sink = None

    def write(self, batch: pa.RecordBatch) -> None:
        """Append rows, splitting the batch where a shard would pass `max_shard_size`."""
        limit = self.options["max_shard_size"]
        row_bytes = max(batch.nbytes / max(batch.num_rows, 1), 1.0)
        start = 0
        while start < batch.num_rows:
            if self._writer is None:
                self._start_shard()
            room = limit - self._sink.tell()
            rows = max(1, min(batch.num_rows - start, int(room // row_bytes)))
            self._writer.write_batch(batch.slice(start, rows))
            self._rows += rows
            start += rows
            if self._sink.tell() >= limit:
                self._finish_shard()

    def close(self) -> list[ShardInfo]:
        if not self._shards:  # zero rows still publish one readable, empty shard
            self._start_shard()
        self._finish_shard()
        return self._shards


class Backend(LayoutBackend):
    def _open(self) -> None:
        self._batches: list[pa.RecordBatch] = []
        self._schema: pa.Schema | None = None
        for shard in self.metadata.shards:
            reader = pa.ipc.open_file(pa.memory_map(str(self.directory / shard.path), "r"))
            self._schema = self._schema or reader.schema
            self._batches.extend(reader.get_batch(i) for i in range(reader.num_record_batches))
        self._batches = [b for b in self._batches if b.num_rows]
        sizes = [b.num_rows for b in self._batches]
        self._starts: list[int] = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        self._names = self._schema.names if self._schema is not None else []
        self._getters: dict[int, list[CellGetter]] = {}

    @property
    def schema(self) -> pa.Schema:
        self.ensure_open()
        return self._schema

    @property
    def record_batches(self) -> list[pa.RecordBatch]:
        self.ensure_open()
        return self._batches

    def _batch_getters(self, b: int) -> list[CellGetter]:
        getters = self._getters.get(b)
        if getters is None:
            batch = self._batches[b]
            getters = self._getters[b] = [cell_getter(batch.column(j)) for j in range(batch.num_columns)]
        return getters

    def row(self, index: int) -> dict[str, Any]:
        if self._pid is None:
            self.ensure_open()
        b = bisect.bisect_right(self._starts, index) - 1
        k = index - self._starts[b]
        return {name: get(k) for name, get in zip(self._names, self._batch_getters(b))}

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        batches = self._batches
        return ordered_gather(indices, np.asarray(self._starts[:-1], dtype=np.int64),
                              lambda b, local: pa.Table.from_batches([batches[b].take(pa.array(local))]),
                              self._schema)

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        self.ensure_open()
        b = max(bisect.bisect_right(self._starts, start) - 1, 0)
        while start < stop and b < len(self._batches):
            lo = start - self._starts[b]
            hi = min(stop, self._starts[b + 1]) - self._starts[b]
            batch = self._batches[b]
            for off in range(lo, hi, batch_rows):
                yield batch.slice(off, min(batch_rows, hi - off))
            start = self._starts[b + 1]
            b += 1

