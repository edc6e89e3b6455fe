"""`arrow_shards`: Arrow IPC files, memory-mapped for zero-copy reads.

Write: record batches are appended to `shard-NNNNN.arrow`, rotating when a shard passes
`max_shard_size` bytes; uncompressed by default so reads are views of the page cache.
Read: every record batch of every shard is mapped once per process; a row is located with
one bisect over batch offsets and read through per-batch cell getters. A batch of random
rows is read a column at a time through numpy gathers (`_ColumnGather`).
"""

from __future__ import annotations

import bisect
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import (
    CellGetter,
    cell_getter,
    compile_row_builder,
    compile_rows_builder,
    offsets_and_data,
    primitive_view,
)
from stable_datasets.arrow.tables import index_array, ordered_gather
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.errors import CacheError
from stable_datasets.layouts.base import LayoutBackend, StreamUnits, require_choice, require_positive_ints
from stable_datasets.layouts.sharded import (
    ShardedFileWriter,
    merge_numbered_shards,
    shard_file_bounds,
    shard_file_units,
)

NAME = "arrow_shards"
DEFAULT_OPTIONS: dict[str, Any] = {"max_shard_size": 512 << 20, "compression": None}
# Index arrays one opened cache may build for reading batches a column at a time (_ColumnGather):
# enough for one string column of 60M rows; columns past it are read row by row instead.
GATHER_MEMORY = 256 << 20


def check_options(options: dict[str, Any]) -> None:
    require_positive_ints(options, "max_shard_size")
    require_choice(options, "compression", (None, "lz4", "zstd"))


#: parallel parts' shards, moved into the cache and renumbered in order
merge_parts = merge_numbered_shards


class Writer(ShardedFileWriter):
    suffix = ".arrow"

    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        super().__init__(directory, schema, {**DEFAULT_OPTIONS, **options})
        compression = self.options["compression"]
        self._ipc_options = pa.ipc.IpcWriteOptions(compression=compression) if compression else None

    def _open_file(self, sink: pa.NativeFile) -> pa.ipc.RecordBatchFileWriter:
        return pa.ipc.new_file(sink, self.schema, options=self._ipc_options)

    def _write_slice(self, file: pa.ipc.RecordBatchFileWriter, batch: pa.RecordBatch) -> None:
        file.write_batch(batch)

    def _close_file(self, file: pa.ipc.RecordBatchFileWriter) -> None:
        file.close()


class _ShardGather:
    """Gathers rows of one shard with one C++ `take` per column instead of one per record batch.

    A variable-width column becomes a virtual large_binary/large_string array over the whole
    memory-mapped shard: its offsets are absolute file positions, with one dummy element
    spanning the bytes between consecutive record batches. Small fixed-width numeric columns
    are concatenated once. Anything else (nulls, compression, nested types) takes per batch.
    """

    def __init__(self, whole: pa.Buffer, batches: list[pa.RecordBatch], schema: pa.Schema):
        self.whole, self.batches, self.schema = whole, batches, schema
        self.starts = np.cumsum([0] + [b.num_rows for b in batches]).astype(np.int64)
        self._columns: dict[int, tuple[str, Any]] = {}

    def _inside(self, buffer: pa.Buffer | None) -> bool:
        base = self.whole.address
        return buffer is not None and base <= buffer.address and buffer.address + buffer.size <= base + self.whole.size

    def _column(self, j: int) -> tuple[str, Any]:
        if j in self._columns:
            return self._columns[j]
        field_type = self.schema.field(j).type
        chunks = [b.column(j) for b in self.batches]
        plan: tuple[str, Any] = ("chunks", chunks)
        if not any(c.null_count for c in chunks):
            if pa.types.is_binary(field_type) or pa.types.is_string(field_type):
                buffers = [c.buffers() for c in chunks]
                if all(self._inside(b[2]) or len(c) == 0 for b, c in zip(buffers, chunks)):
                    base = self.whole.address
                    offsets = np.concatenate([np.zeros(1, np.int64)] + [
                        np.frombuffer(b[1], np.int32)[c.offset:c.offset + len(c) + 1].astype(np.int64)
                        + ((b[2].address - base) if b[2] is not None else 0)
                        for b, c in zip(buffers, chunks)])[1:]
                    large = pa.large_string() if pa.types.is_string(field_type) else pa.large_binary()
                    virtual = pa.Array.from_buffers(large, len(offsets) - 1, [None, pa.py_buffer(offsets), self.whole])
                    plan = ("virtual", virtual)
            elif (pa.types.is_integer(field_type) or pa.types.is_floating(field_type)) and chunks:
                plan = ("numpy", np.concatenate([primitive_view(c) for c in chunks]))
        self._columns[j] = plan
        return plan

    def take(self, local: np.ndarray) -> pa.Table:
        batch_ids = np.searchsorted(self.starts, local, side="right") - 1
        arrays = []
        for j, field in enumerate(self.schema):
            kind, data = self._column(j)
            if kind == "virtual":
                arrays.append(data.take(index_array(local + batch_ids)).cast(field.type))
            elif kind == "numpy":
                arrays.append(index_array(data[local], field.type))
            else:
                arrays.append(ordered_gather(
                    local, self.starts[:-1],
                    lambda b, loc, col=data: pa.Table.from_arrays([col[b].take(index_array(loc))], ["c"]),
                    pa.schema([pa.field("c", field.type)])).column(0).combine_chunks())
        return pa.Table.from_arrays(arrays, schema=self.schema)


class _ColumnGather:
    """The cells of many random rows, one column at a time.

    Reading row after row in Python, each row waits for its own cache misses (offsets, then
    bytes). Here a column's offsets for the whole batch of rows come from one numpy gather over
    an array spanning every record batch, so those misses overlap; only the copies of the cells
    remain per row. Built per column on first use: a binary or string column costs 4 bytes a
    row (its offsets, with one extra entry per record batch; 8 for large types), a numeric
    column a copy of its values. Past GATHER_MEMORY bytes per cache, and for other columns
    (nulls, nested types), cells come through the per-batch cell getters instead.
    """

    def __init__(self, batches: list[pa.RecordBatch], getters: Any):
        self.batches, self.getters = batches, getters
        self._plans: dict[int, tuple[str, Any]] = {}
        self._spent = 0

    def _affordable(self, nbytes: int) -> bool:
        if self._spent + nbytes > GATHER_MEMORY:
            return False
        self._spent += nbytes
        return True

    def _plan(self, j: int) -> tuple[str, Any]:
        if j in self._plans:
            return self._plans[j]
        chunks = [b.column(j) for b in self.batches]
        plan: tuple[str, Any] = ("cells", None)
        if chunks and not any(c.null_count for c in chunks):
            field_type, rows = chunks[0].type, sum(len(c) for c in chunks)
            text = pa.types.is_string(field_type) or pa.types.is_large_string(field_type)
            if text or pa.types.is_binary(field_type) or pa.types.is_large_binary(field_type):
                parts = [offsets_and_data(c) for c in chunks]  # each batch's offsets index its own data buffer
                if self._affordable((rows + len(parts)) * parts[0][0].itemsize):
                    plan = ("str" if text else "bytes", (np.concatenate([o for o, _ in parts]), [d for _, d in parts]))
            else:
                values = [primitive_view(c) for c in chunks]
                if all(v is not None for v in values) and self._affordable(rows * values[0].itemsize):
                    plan = ("numpy", np.concatenate(values))
        self._plans[j] = plan
        return plan

    def column(self, j: int, rows: np.ndarray, batch: np.ndarray, within: np.ndarray) -> list[Any]:
        kind, data = self._plan(j)
        if kind == "numpy":
            return data[rows].tolist()
        if kind == "cells":
            getters = self.getters
            return [getters(b)[j](k) for b, k in zip(batch.tolist(), within.tolist())]
        offsets, views = data
        position = rows + batch  # each record batch adds one offset entry before the next one's
        bounds = zip(batch.tolist(), offsets[position].tolist(), offsets[position + 1].tolist())
        if kind == "str":
            return [str(views[b][lo:hi], "utf-8") for b, lo, hi in bounds]
        return [views[b][lo:hi].tobytes() for b, lo, hi in bounds]


def map_shard(path: Path, validate: bool = True) -> tuple[pa.Buffer, pa.Schema, list[pa.RecordBatch]]:
    """(the mapped file, its schema, its non-empty record batches), each batch validated in full.

    The readers here dereference offsets and lengths straight from the file (numpy views,
    `take` over a virtual array), so a flipped byte in an offset would read outside the map and
    crash the interpreter. `RecordBatch.validate(full=True)` checks every offset, length, child
    size and UTF-8 string once, when the shard is first mapped; a row read then costs nothing
    extra. A damaged shard raises `CacheError` naming the file.
    """
    try:
        whole = pa.memory_map(str(path), "r").read_buffer()
        reader = pa.ipc.open_file(whole)
        batches = []
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            if validate:
                batch.validate(full=True)
            if batch.num_rows:
                batches.append(batch)
    except PermissionError as exc:  # not damaged: another user's file, without read access for this one
        raise CacheError(f"{path}: this user may not read it ({os.strerror(exc.errno or errno.EACCES)}); its owner "
                         "can make it group-readable (see docs/shared-cache-on-a-cluster.md)") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CacheError(f"{path}: corrupt Arrow shard ({type(exc).__name__}: {exc}); `stable-datasets verify` "
                         "checks every shard, download_mode='force_rebuild' builds the cache again") from None
    return whole, reader.schema, batches


#: validate every record batch on first open (see map_shard); off only to measure what it costs.
VALIDATE_ON_OPEN = True


class Backend(LayoutBackend):
    def rows_in_place(self) -> bool:
        """Uncompressed shards are mapped: a gather of any rows is one `take` per column over the map."""
        return not self.metadata.layout_options.get("compression")

    def _open(self) -> None:
        self._batches: list[pa.RecordBatch] = []
        self._schema: pa.Schema | None = None
        self._shards: list[_ShardGather] = []
        for shard in self.metadata.shards:
            whole, schema, batches = map_shard(self.directory / shard.path, VALIDATE_ON_OPEN)
            if self._schema is not None and not schema.equals(self._schema):
                raise CacheError(f"{self.directory / shard.path}: corrupt Arrow shard (its schema differs from "
                                 "the first shard's)")
            self._schema = self._schema or schema
            self.check_rows(self.directory / shard.path, sum(b.num_rows for b in batches), shard.num_rows)
            self._batches.extend(batches)
            self._shards.append(_ShardGather(whole, batches, schema))
        sizes = [b.num_rows for b in self._batches]
        self._starts: list[int] = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        self._shard_starts = np.cumsum([0] + [int(s.starts[-1]) for s in self._shards]).astype(np.int64)
        self._names = self._schema.names if self._schema is not None else []
        self._getters: list[list[CellGetter] | None] = [None] * len(self._batches)
        self._build_row = compile_row_builder(self._names)
        self._batch_starts = np.asarray(self._starts, dtype=np.int64)
        self._columns = _ColumnGather(self._batches, lambda b: self._getters[b] or self._batch_getters(b))
        self._build_rows = compile_rows_builder(self._names) if self._names else None

    def _batch_getters(self, b: int) -> list[CellGetter]:
        batch = self._batches[b]
        getters = self._getters[b] = [cell_getter(batch.column(j)) for j in range(batch.num_columns)]
        return getters

    def row(self, index: int) -> dict[str, Any]:
        self.ensure_open()
        b = bisect.bisect_right(self._starts, index) - 1
        getters = self._getters[b] or self._batch_getters(b)
        return self._build_row(getters, index - self._starts[b])

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        """Many rows: a column at a time for batches (see _ColumnGather), else row by row."""
        self.ensure_open()
        if len(indices) >= 16 and self._build_rows is not None:
            rows = np.asarray(indices, dtype=np.int64)
            batch = np.searchsorted(self._batch_starts, rows, side="right") - 1
            within = rows - self._batch_starts[batch]
            return self._build_rows([self._columns.column(j, rows, batch, within) for j in range(len(self._names))])
        starts, all_getters, build = self._starts, self._getters, self._build_row
        find = bisect.bisect_right
        out = []
        for index in indices:
            b = find(starts, index) - 1
            out.append(build(all_getters[b] or self._batch_getters(b), index - starts[b]))
        return out

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        return ordered_gather(indices, self._shard_starts[:-1], lambda s, local: self._shards[s].take(local),
                              self._schema)

    def stored_row_counts(self) -> tuple[int, int]:
        self.ensure_open()
        return self._starts[-1], self.metadata.num_rows

    def shard_bounds(self) -> np.ndarray | None:
        return shard_file_bounds(self.metadata)

    @classmethod
    def stream_units(cls, metadata: CacheMetadata) -> StreamUnits | None:
        return shard_file_units(metadata)

    def block_bounds(self) -> np.ndarray:
        """Record batches are the blocks (the write path writes about 1,000 rows per batch)."""
        self.ensure_open()
        return self._batch_starts.copy()

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

