"""`parquet_shards`: zstd Parquet files with row groups sized in bytes.

Write: shards `shard-NNNNN.idx.parquet` rotate at `max_shard_size`; each row group holds
about `row_group_bytes` (1 MiB by default) of uncompressed data, so a random read decodes
about 1 MiB, not a thousand rows. Plain Parquet: DuckDB, pandas, Spark and Megatron-Bridge's
reader open it directly.

Read: `ParquetRowGroups` maps global rows to (file, row group) and keeps an LRU of decoded
row groups. Decoded list columns are held as numpy offsets plus values, so a row of a
packed sequence is a numpy slice with no per-token Python objects. It serves this layout's
Backend and `stable_datasets.sft.PackedSFTDataset` (which also reads Megatron-Bridge files).
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stable_datasets.arrow.cells import CellGetter, cell_getter
from stable_datasets.arrow.tables import ordered_gather
from stable_datasets.errors import CacheError
from stable_datasets.layouts.base import LayoutBackend, require_choice, require_positive_ints
from stable_datasets.layouts.sharded import ShardedFileWriter, merge_numbered_shards

NAME = "parquet_shards"
DEFAULT_OPTIONS: dict[str, Any] = {"max_shard_size": 512 << 20, "row_group_bytes": 1 << 20,
                                   "compression": "zstd", "compression_level": 3}
READ_OPTIONS: dict[str, Any] = {"cache_row_groups": 16}


def check_options(options: dict[str, Any]) -> None:
    require_positive_ints(options, "max_shard_size", "row_group_bytes")
    require_choice(options, "compression", (None, "none", "snappy", "gzip", "brotli", "lz4", "zstd"))
    level = options["compression_level"]
    if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
        raise ValueError(f"layout option compression_level must be an int or None, got {level!r}")


#: parallel parts' shards, moved into the cache and renumbered in order
merge_parts = merge_numbered_shards


class Writer(ShardedFileWriter):
    suffix = ".idx.parquet"

    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        super().__init__(directory, schema, {**DEFAULT_OPTIONS, **options})

    def _open_file(self, sink: pa.NativeFile) -> pq.ParquetWriter:
        return pq.ParquetWriter(sink, self.schema, compression=self.options["compression"],
                                compression_level=self.options["compression_level"])

    def _max_rows_per_write(self, row_bytes: float) -> int:
        return max(1, int(self.options["row_group_bytes"] // row_bytes))

    def _write_slice(self, file: pq.ParquetWriter, batch: pa.RecordBatch) -> None:
        file.write_batch(batch, row_group_size=batch.num_rows)  # one write is one row group

    def _close_file(self, file: pq.ParquetWriter) -> None:
        file.close()


class ParquetRowGroups:
    """Random access to rows of Parquet files through an LRU of decoded row groups."""

    def __init__(self, paths: Sequence[str | os.PathLike], columns: Sequence[str] | None = None,
                 cache_row_groups: int = READ_OPTIONS["cache_row_groups"]):
        self.paths = [str(p) for p in paths]
        self.columns = list(columns) if columns else None
        self.capacity = max(1, int(cache_row_groups))
        self._files: list[pq.ParquetFile] = []
        groups: list[tuple[int, int]] = []
        sizes: list[int] = []
        for f, path in enumerate(self.paths):
            try:
                handle = pq.ParquetFile(path)
            except (pa.ArrowException, OSError) as exc:
                raise CacheError(f"{path}: cannot read this Parquet file ({type(exc).__name__}: {exc})") from None
            self._files.append(handle)
            for g in range(handle.metadata.num_row_groups):
                rows = handle.metadata.row_group(g).num_rows
                if rows:
                    groups.append((f, g))
                    sizes.append(rows)
        self._groups = groups
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._starts_list = self.starts.tolist()
        schema = self._files[0].schema_arrow if self._files else pa.schema([])
        self.schema = pa.schema([schema.field(c) for c in self.columns]) if self.columns else schema
        self._cache: OrderedDict[int, tuple[pa.RecordBatch, list[CellGetter]]] = OrderedDict()
        self.hits = self.misses = 0

    @property
    def num_rows(self) -> int:
        return int(self.starts[-1])

    def file_rows(self) -> list[int]:
        """Rows of each file, as its footer records them."""
        return [f.metadata.num_rows for f in self._files]

    def group(self, index: int) -> tuple[pa.RecordBatch, list[CellGetter]]:
        """Decoded row group `index` (global numbering) and its cell getters."""
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            self.hits += 1
            return cached
        self.misses += 1
        batch = self._read(index)
        getters = [cell_getter(batch.column(j)) for j in range(batch.num_columns)]
        self._cache[index] = (batch, getters)
        if len(self._cache) > self.capacity:
            self._cache.popitem(last=False)
        return batch, getters

    def _read(self, index: int) -> pa.RecordBatch:
        """Decode row group `index`; a damaged file (bad page, bad compression) raises CacheError."""
        f, g = self._groups[index]
        try:
            table = self._files[f].read_row_group(g, columns=self.columns)
        except (pa.ArrowException, OSError) as exc:
            raise CacheError(f"{self.paths[f]}: row group {g} cannot be decoded ({type(exc).__name__}: {exc}); "
                             "the file is damaged") from None
        return table.combine_chunks().to_batches()[0] if table.num_rows else self.schema.empty_table()

    def locate(self, row: int) -> tuple[int, int]:
        g = bisect.bisect_right(self._starts_list, row) - 1
        return g, row - self._starts_list[g]

    def row(self, row: int) -> dict[str, Any]:
        g, k = self.locate(row)
        batch, getters = self.group(g)
        return {name: get(k) for name, get in zip(batch.schema.names, getters)}

    def take(self, rows: np.ndarray) -> pa.Table:
        return ordered_gather(rows, self.starts[:-1],
                              lambda g, local: pa.Table.from_batches([self.group(g)[0].take(pa.array(local))]),
                              self.schema)

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        g = max(bisect.bisect_right(self._starts_list, start) - 1, 0)
        while start < stop and g < len(self._groups):
            lo = start - self._starts_list[g]
            hi = min(stop, self._starts_list[g + 1]) - self._starts_list[g]
            batch = self._read(g)
            for off in range(lo, hi, batch_rows):
                yield batch.slice(off, min(batch_rows, hi - off))
            start = self._starts_list[g + 1]
            g += 1


class Backend(LayoutBackend):
    READ_OPTIONS = READ_OPTIONS
    read_options_name = "Parquet read"

    def _open(self) -> None:
        shards = [s for s in self.metadata.shards if s.path.endswith(".parquet")]
        self._groups = ParquetRowGroups([self.directory / s.path for s in shards],
                                        cache_row_groups=self.options["cache_row_groups"])
        for shard, rows in zip(shards, self._groups.file_rows()):
            self.check_rows(self.directory / shard.path, rows, shard.num_rows)

    def stored_row_counts(self) -> tuple[int, int]:
        return sum(self.row_groups.file_rows()), self.metadata.num_rows

    @property
    def row_groups(self) -> ParquetRowGroups:
        self.ensure_open()
        return self._groups

    @property
    def schema(self) -> pa.Schema:
        return self.row_groups.schema

    def row(self, index: int) -> dict[str, Any]:
        self.ensure_open()
        return self._groups.row(index)

    def take(self, indices: np.ndarray) -> pa.Table:
        return self.row_groups.take(np.asarray(indices, dtype=np.int64))

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        yield from self.row_groups.iter_batches(start, stop, batch_rows)
