"""`arrow_shards`: Arrow IPC files, memory-mapped for zero-copy reads.

Write: record batches are appended to `shard-NNNNN.arrow`, rotating when a shard passes
`max_shard_size` bytes; uncompressed by default so reads are views of the page cache.
Read: a shard is mapped when first read, and at most `STABLE_DATASETS_MAX_OPEN_SHARDS` stay
mapped per opened cache (each map is one of the kernel's `vm.max_map_count`); the rows each
shard holds come from `_metadata.json`, so a cache of any number of shards opens in bounded
time and memory. A row is located with a bisect over shard starts, then one over the shard's
batch offsets, and read through per-batch cell getters. A batch of random rows is read a
shard at a time and a column at a time through numpy gathers (`_Shard`): numeric columns
straight from the map, string offsets through copies held under GATHER_MEMORY per cache.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import os
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
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
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.errors import CacheError
from stable_datasets.layouts.base import LayoutBackend, StreamUnits, require_choice, require_positive_ints
from stable_datasets.layouts.mapped_files import MappedFiles, map_limit_error, map_refused
from stable_datasets.layouts.sharded import (
    ShardedFileWriter,
    merge_numbered_shards,
    seal_sharded_part,
    shard_file_bounds,
    shard_file_units,
)

NAME = "arrow_shards"
DEFAULT_OPTIONS: dict[str, Any] = {"max_shard_size": 512 << 20, "compression": None}
# Bytes of private copies (string offsets; numeric values of compressed shards) one opened cache may hold for
# reading batches of rows a column at a time (_Shard): enough for one string column of 60M rows; past it the
# least recently used shards' copies are dropped, and a column too big alone is read a record batch at a time.
GATHER_MEMORY = 256 << 20


def check_options(options: dict[str, Any]) -> None:
    require_positive_ints(options, "max_shard_size")
    require_choice(options, "compression", (None, "lz4", "zstd"))


#: parallel parts' shards, moved into the cache (or copied on the store) and renumbered in order
merge_parts = merge_numbered_shards
#: what a merge on the store needs of a part: its record alone
seal_part = seal_sharded_part


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


def map_shard(path: str | Path, validate: bool = True) -> tuple[pa.Buffer, pa.Schema, list[pa.RecordBatch]]:
    """(the mapped file, its schema, its non-empty record batches), each batch validated in full.

    The readers here dereference offsets and lengths straight from the file (numpy views,
    `take` over a virtual array), so a flipped byte in an offset would read outside the map and
    crash the interpreter. `RecordBatch.validate(full=True)` checks every offset, length, child
    size and UTF-8 string once, when the shard is first mapped; a row read then costs nothing
    extra. A damaged shard raises `CacheError` naming the file.
    """
    try:
        whole = pa.memory_map(str(path), "r").read_buffer()
    except OSError as exc:
        if map_refused(exc):  # not damaged: the kernel has no map left for this process, or no address space
            raise map_limit_error(path) from None
        raise _unreadable(path, exc) from None
    try:
        reader = pa.ipc.open_file(whole)
        batches = []
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            if validate:
                batch.validate(full=True)
            if batch.num_rows:
                batches.append(batch)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None
    return whole, reader.schema, batches


def _unreadable(path: str | Path, exc: BaseException) -> CacheError:
    if isinstance(exc, PermissionError):  # not damaged: another user's file, without read access for this one
        return CacheError(f"{path}: this user may not read it ({os.strerror(exc.errno or errno.EACCES)}); its owner "
                          "can make it group-readable (see docs/shared-cache-on-a-cluster.md)")
    return CacheError(f"{path}: corrupt Arrow shard ({type(exc).__name__}: {exc}); `stable-datasets verify` "
                      "checks every shard, download_mode='force_rebuild' builds the cache again")


class _Shard:
    """One shard file mapped in this process: its record batches, their cell getters and gather plans.

    A gather plan says how one column of many random rows is read at once, a numpy gather instead of a
    lookup per row, so that the rows' cache misses overlap:
    - "map": a null-free numeric column whose values lie in the map (an uncompressed shard) is gathered
      straight from the map through a numpy view of the whole file; it holds one index per record batch.
    - "copy": the same column of a compressed shard (its batches are decompressed), values concatenated.
    - "str"/"bytes" (rows) and "virtual" (take): a null-free string or binary column, its offsets
      concatenated over the record batches (4 or 8 bytes a row).
    - otherwise, or when the copy does not fit the budget: a record batch at a time.
    The copies ("copy", "str", "bytes", "virtual") are private memory of this process: each is charged to
    the `_OpenShards` budget (GATHER_MEMORY bytes per opened cache), which drops the copies made longest ago
    to make room, so a worker gathering from a billion-row cache holds a bounded amount.
    """

    def __init__(self, index: int, path: str, whole: pa.Buffer, schema: pa.Schema, batches: list[pa.RecordBatch],
                 budget: _OpenShards):
        self.index, self.path, self.whole, self.schema, self.batches = index, path, whole, schema, batches
        self._budget = weakref.ref(budget)  # not a reference: the pool holds the shards, and closes them when dropped
        self.starts_list: list[int] = list(itertools.accumulate((b.num_rows for b in batches), initial=0))
        self.starts = np.asarray(self.starts_list, dtype=np.int64)
        self.num_rows = self.starts_list[-1]
        self.getters: list[list[CellGetter] | None] = [None] * len(batches)
        self.plans: dict[tuple[str, int], tuple[str, Any] | None] = {}
        self.held = 0  # bytes of the copies the plans hold
        self.used = False  # read since the pool last looked (see _OpenShards._evict)
        self.pooled = True  # False once closed by the pool: a reader holding it must ask the pool again

    def drop_plans(self) -> int:
        """Forget the gather plans; the bytes their copies held."""
        held, self.held = self.held, 0
        self.plans.clear()
        return held

    def batch_getters(self, b: int) -> list[CellGetter]:
        batch = self.batches[b]
        getters = self.getters[b] = [cell_getter(batch.column(j)) for j in range(batch.num_columns)]
        return getters

    def row(self, local: int, build: Any) -> dict[str, Any]:
        b = bisect.bisect_right(self.starts_list, local) - 1
        return build(self.getters[b] or self.batch_getters(b), local - self.starts_list[b])

    def _inside(self, buffer: pa.Buffer | None) -> bool:
        base = self.whole.address
        return buffer is not None and base <= buffer.address and buffer.address + buffer.size <= base + self.whole.size

    def _plan(self, kind: str, j: int, make: Any) -> tuple[str, Any] | None:
        key = (kind, j)
        if key not in self.plans:
            self.plans[key] = make(j)
        return self.plans[key]

    def _affordable(self, nbytes: int) -> bool:
        budget = self._budget()
        if budget is None or not budget.reserve(self, nbytes):
            return False
        self.held += nbytes
        return True

    def _make_numeric(self, j: int) -> tuple[str, Any] | None:
        field_type = self.schema.field(j).type
        chunks = [b.column(j) for b in self.batches]
        if (not chunks or not (pa.types.is_integer(field_type) or pa.types.is_floating(field_type))
                or any(c.null_count for c in chunks)):
            return None
        dtype = np.dtype(field_type.to_pandas_dtype())
        data = [c.buffers()[1] for c in chunks]
        base = self.whole.address
        if all(self._inside(d) and (d.address - base) % dtype.itemsize == 0 for d in data):
            whole = np.frombuffer(self.whole, dtype=dtype, count=self.whole.size // dtype.itemsize)
            first = np.fromiter(((d.address - base) // dtype.itemsize + c.offset for d, c in zip(data, chunks)),
                                dtype=np.int64, count=len(chunks))
            return "map", (whole, first - self.starts[:-1])  # value of shard row r (in batch b): whole[base[b] + r]
        if self._affordable(self.num_rows * dtype.itemsize):
            return "copy", np.concatenate([primitive_view(c) for c in chunks])
        return None

    def _make_offsets(self, j: int) -> tuple[str, Any] | None:
        chunks = [b.column(j) for b in self.batches]
        field_type = self.schema.field(j).type
        text = pa.types.is_string(field_type) or pa.types.is_large_string(field_type)
        if (not chunks or any(c.null_count for c in chunks)
                or not (text or pa.types.is_binary(field_type) or pa.types.is_large_binary(field_type))):
            return None
        parts = [offsets_and_data(c) for c in chunks]  # each batch's offsets index its own data buffer
        if not self._affordable((self.num_rows + len(parts)) * parts[0][0].itemsize):
            return None
        return ("str" if text else "bytes"), (np.concatenate([o for o, _ in parts]), [d for _, d in parts])

    def _make_virtual(self, j: int) -> tuple[str, Any] | None:
        """A virtual large_binary/large_string array over the whole map: its offsets are absolute file positions,
        with one dummy element spanning the bytes between consecutive record batches."""
        field_type = self.schema.field(j).type
        chunks = [b.column(j) for b in self.batches]
        if (not chunks or any(c.null_count for c in chunks)
                or not (pa.types.is_binary(field_type) or pa.types.is_string(field_type))):
            return None
        buffers = [c.buffers() for c in chunks]
        if not all(self._inside(b[2]) or len(c) == 0 for b, c in zip(buffers, chunks)):
            return None
        if not self._affordable((self.num_rows + len(chunks)) * 8):
            return None
        base = self.whole.address
        offsets = np.concatenate([np.zeros(1, np.int64)] + [
            np.frombuffer(b[1], np.int32)[c.offset:c.offset + len(c) + 1].astype(np.int64)
            + ((b[2].address - base) if b[2] is not None else 0)
            for b, c in zip(buffers, chunks)])[1:]
        large = pa.large_string() if pa.types.is_string(field_type) else pa.large_binary()
        return "virtual", pa.Array.from_buffers(large, len(offsets) - 1, [None, pa.py_buffer(offsets), self.whole])

    def _numbers(self, j: int, local: np.ndarray, batch: np.ndarray) -> np.ndarray | None:
        plan = self._plan("numeric", j, self._make_numeric)
        if plan is None:
            return None
        kind, data = plan
        if kind == "map":
            whole, base = data
            return whole[base[batch] + local]
        return data[local]

    def columns(self, local: np.ndarray) -> list[list[Any]]:
        """The cells of rows `local` (of this shard), a column at a time."""
        batch = np.searchsorted(self.starts, local, side="right") - 1
        within = local - self.starts[batch]
        out = []
        for j in range(len(self.schema)):
            numbers = self._numbers(j, local, batch)
            if numbers is not None:
                out.append(numbers.tolist())
                continue
            plan = self._plan("offsets", j, self._make_offsets)
            if plan is None:
                out.append([(self.getters[b] or self.batch_getters(b))[j](k)
                            for b, k in zip(batch.tolist(), within.tolist())])
                continue
            kind, (offsets, views) = plan
            position = local + batch  # each record batch adds one offset entry before the next one's
            bounds = zip(batch.tolist(), offsets[position].tolist(), offsets[position + 1].tolist())
            if kind == "str":
                out.append([str(views[b][lo:hi], "utf-8") for b, lo, hi in bounds])
            else:
                out.append([views[b][lo:hi].tobytes() for b, lo, hi in bounds])
        return out

    def take(self, local: np.ndarray) -> pa.Table:
        """Rows `local` (of this shard) as a table: one C++ `take` or numpy gather per column, not one per batch."""
        batch = np.searchsorted(self.starts, local, side="right") - 1
        arrays = []
        for j, field in enumerate(self.schema):
            numbers = self._numbers(j, local, batch)
            if numbers is not None:
                arrays.append(index_array(numbers, field.type))
                continue
            plan = self._plan("virtual", j, self._make_virtual)
            if plan is not None:
                arrays.append(plan[1].take(index_array(local + batch)).cast(field.type))
                continue
            chunks = [b.column(j) for b in self.batches]
            arrays.append(ordered_gather(
                local, self.starts[:-1],
                lambda b, loc, col=chunks: pa.Table.from_arrays([col[b].take(index_array(loc))], ["c"]),
                pa.schema([pa.field("c", field.type)])).column(0).combine_chunks())
        return pa.Table.from_arrays(arrays, schema=self.schema)


class _OpenShards(MappedFiles[_Shard]):
    """The shard files of one opened cache that are mapped in this process (at most `env.max_open_shards()`, see
    layouts.mapped_files), and the budget of their gather copies.

    A file is validated the first time this cache maps it, not again when it comes back. The gather copies of all
    open shards together hold at most GATHER_MEMORY bytes (`held`); to make room for a new one, the copies made
    longest ago are dropped.
    """

    def __init__(self) -> None:
        super().__init__()
        self.holders: OrderedDict[int, _Shard] = OrderedDict()  # the open shards holding copies, least recent first
        self.validated: set[int] = set()
        self.held = 0

    def get(self, index: int, path: str) -> tuple[_Shard, bool]:
        """Shard `index` (at `path`), mapped now if it is not open; (the shard, True when just mapped)."""
        return self.acquire(index, lambda: self._map(index, path))

    def _map(self, index: int, path: str) -> _Shard:
        validate = VALIDATE_ON_OPEN and index not in self.validated
        whole, schema, batches = map_shard(path, validate)
        if validate:
            self.validated.add(index)
        return _Shard(index, path, whole, schema, batches, self)

    def closed(self, shard: _Shard) -> None:
        """Free the copies of a shard leaving the pool."""
        self.holders.pop(shard.index, None)
        self.held -= shard.drop_plans()

    def reserve(self, shard: _Shard, nbytes: int) -> bool:
        """Charge a gather copy of `shard` to the budget, dropping other shards' copies to make room; False: no room."""
        with self.lock:
            if not shard.pooled or nbytes > GATHER_MEMORY:
                return False
            for other in list(self.holders.values()):  # least recently used first
                if self.held + nbytes <= GATHER_MEMORY:
                    break
                if other is not shard:
                    del self.holders[other.index]
                    self.held -= other.drop_plans()
            if self.held + nbytes > GATHER_MEMORY:
                return False
            self.held += nbytes
            self.holders[shard.index] = shard
            self.holders.move_to_end(shard.index)
            return True


#: shard files mapped (and validated) when a cache is opened; the others when a read first needs them
MAP_AT_OPEN = 1024
#: up to this many shards, a row's shard is found in Python lists of the shard starts, else in numpy arrays
LIST_SHARDS = 65_536
#: validate every record batch on first open (see map_shard); off only to measure what it costs.
VALIDATE_ON_OPEN = True


class Backend(LayoutBackend):
    """Rows of an Arrow shard cache. Shards are mapped on first read, at most `max_open_shards()` at once (see
    `_OpenShards`); the rows of each come from `_metadata.json` (checked against the file when it is mapped), so
    opening costs no more for 70,000 shards than for one, past the first MAP_AT_OPEN mapped at open."""

    def rows_in_place(self) -> bool:
        """Uncompressed shards are mapped: a gather of any rows is one `take` per column over the map."""
        return not self.metadata.layout_options.get("compression")

    def _open(self) -> None:
        self._pool = _OpenShards()
        self._folder = str(self.directory)  # str: a Path per shard costs 70,000 of them
        # whole columns, not a ShardInfo per shard: a cache of many shards maps them from `_shards.arrow`
        self._rows = self.metadata.shard_rows()
        self._sizes = self.metadata.shard_bytes()
        self._filled = np.flatnonzero(self._rows)  # the shards holding rows, in order: the ones reads visit
        self._shard_starts = np.concatenate([[0], np.cumsum(self._rows[self._filled])]).astype(np.int64)
        # Python lists look up a row's shard fastest (bisect); past LIST_SHARDS they would cost 36 bytes a shard
        # in every process, and the arrays serve (bisect reads them too)
        few = len(self._filled) <= LIST_SHARDS
        self._filled_list: Sequence[int] = self._filled.tolist() if few else self._filled
        self._shard_starts_list: Sequence[int] = self._shard_starts.tolist() if few else self._shard_starts
        self._last: tuple[int, _Shard | None] = (-1, None)
        self._blocks: np.ndarray | None = None
        self._schema = None
        # a damaged shard among the first ones is reported at open, as when every shard was mapped at open
        for s in range(min(len(self._rows), self._pool.capacity, MAP_AT_OPEN)):
            self._shard(s)
        self._names = self._schema.names if self._schema is not None else []
        self._build_row = compile_row_builder(self._names)
        self._build_rows = compile_rows_builder(self._names) if self._names else None

    def _shard(self, s: int) -> _Shard:
        """Shard file `s` (in `_metadata.json` order), mapped now if it is not; checked the first time."""
        path = f"{self._folder}/{self.metadata.shard_path(s)}"
        shard, fresh = self._pool.get(s, path)
        if fresh:
            try:
                if self._schema is None:
                    self._schema = shard.schema
                elif not shard.schema.equals(self._schema):
                    raise CacheError(f"{path}: corrupt Arrow shard (its schema differs from the first "
                                     "shard's)")
                self.check_rows(path, shard.num_rows, int(self._rows[s]))
                if shard.whole.size != self._sizes[s]:  # a cache of many shards checks sizes here, not at open
                    raise CacheError(f"{path}: shard is {shard.whole.size} bytes but {METADATA_FILE} records "
                                     f"{self._sizes[s]}; the cache is truncated or corrupt (rebuild it with "
                                     "download_mode='force_rebuild')")
            except CacheError:
                self._pool.close(s)  # asked again, it is checked again
                raise
        return shard

    def _filled_shard(self, k: int) -> _Shard:
        """The k-th shard holding rows; the last one asked for is kept at hand (row after row of one shard)."""
        last, shard = self._last
        if last != k or shard is None or not shard.pooled:
            shard = self._shard(int(self._filled_list[k]))
            self._last = (k, shard)
        return shard

    def open_shards(self) -> tuple[int, int, int]:
        """(shard files mapped now, shard files mapped since open, bytes the gather copies hold): for tests and
        benchmarks, which show the bounds hold."""
        self.ensure_open()
        return len(self._pool.open), self._pool.maps_opened, self._pool.held

    def row(self, index: int) -> dict[str, Any]:
        self.ensure_open()
        k = bisect.bisect_right(self._shard_starts_list, index) - 1
        return self._filled_shard(k).row(index - int(self._shard_starts_list[k]), self._build_row)

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        """Many rows: a shard at a time, a column at a time (see _Shard.columns), else row by row."""
        self.ensure_open()
        if len(indices) < 16 or self._build_rows is None:
            return [self.row(i) for i in indices]
        rows = np.asarray(indices, dtype=np.int64)
        which = np.searchsorted(self._shard_starts, rows, side="right") - 1
        if which[0] == which[-1] and not np.any(which != which[0]):
            k = int(which[0])
            return self._build_rows(self._filled_shard(k).columns(rows - self._shard_starts[k]))
        # a shard at a time: a column gather pays ~10 numpy calls per shard, so a shard's few rows (a shuffled
        # batch over many shards has one or two in each) are read row by row, through its cell getters
        order = np.argsort(which, kind="stable")
        which = which[order]
        local = rows[order] - self._shard_starts[which]
        bounds = [0, *(np.flatnonzero(np.diff(which)) + 1).tolist(), len(rows)]
        positions, local_list, which_list = order.tolist(), local.tolist(), which.tolist()
        out: list[Any] = [None] * len(rows)
        build_row, build_rows = self._build_row, self._build_rows
        for lo, hi in itertools.pairwise(bounds):
            shard = self._filled_shard(which_list[lo])
            if hi - lo >= 16:
                found = build_rows(shard.columns(local[lo:hi]))
            else:
                found = [shard.row(r, build_row) for r in local_list[lo:hi]]
            for position, row in zip(positions[lo:hi], found):
                out[position] = row
        return out

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        return ordered_gather(indices, self._shard_starts[:-1], lambda k, local: self._filled_shard(k).take(local),
                              self._schema)

    def stored_row_counts(self) -> tuple[int, int]:
        """Every shard is mapped in turn (at most `max_open_shards()` at once) and its rows counted."""
        self.ensure_open()
        return sum(self._shard(s).num_rows for s in range(len(self._rows))), self.metadata.num_rows

    def shard_bounds(self) -> np.ndarray | None:
        return shard_file_bounds(self.metadata)

    @classmethod
    def stream_units(cls, metadata: CacheMetadata) -> StreamUnits | None:
        return shard_file_units(metadata)

    def block_bounds(self) -> np.ndarray:
        """Record batches are the blocks (the write path writes about 1,000 rows per batch): every shard is
        mapped once in turn to read them, then they are kept (8 bytes a block)."""
        self.ensure_open()
        if self._blocks is None:
            starts = [self._filled_shard(k).starts[:-1] + self._shard_starts[k] for k in range(len(self._filled))]
            self._blocks = np.concatenate([*starts, self._shard_starts[-1:]]).astype(np.int64)
        return self._blocks.copy()

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        self.ensure_open()
        k = max(bisect.bisect_right(self._shard_starts_list, start) - 1, 0)
        while start < stop and k < len(self._filled):
            shard, offset = self._filled_shard(k), int(self._shard_starts_list[k])
            b = max(bisect.bisect_right(shard.starts_list, start - offset) - 1, 0)
            while start < stop and b < len(shard.batches):
                lo = start - offset - shard.starts_list[b]
                hi = min(stop - offset, shard.starts_list[b + 1]) - shard.starts_list[b]
                batch = shard.batches[b]
                for off in range(lo, hi, batch_rows):
                    yield batch.slice(off, min(batch_rows, hi - off))
                start = offset + shard.starts_list[b + 1]
                b += 1
            k += 1
