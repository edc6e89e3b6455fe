"""`InterleavedParquetReader`: interleaved rows from Parquet, projected, aligned, batched by bytes."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from loguru import logger

from stable_datasets.interleaved.batch import InterleavedBatch
from stable_datasets.interleaved.schema import RESERVED_COLUMNS, align_table, reconcile_schema, target_schema
from stable_datasets.interleaved.webdataset_reader import _expand


class InterleavedParquetReader:
    """Column projection is pushed down to Parquet; passthrough columns missing from a file are
    filled with nulls (a requested field no file has too, with a warning); `max_batch_bytes`
    splits batches at sample boundaries only. A `schema=` or `schema_overrides=` the user
    declares is cast to with checked casts. An empty list of paths reads as an empty batch."""

    def __init__(self, paths: str | os.PathLike | Sequence[str | os.PathLike], *, fields: Sequence[str] | None = None,
                 max_batch_bytes: int | None = None, schema: pa.Schema | None = None,
                 schema_overrides: Mapping[str, pa.DataType] | None = None,
                 storage_options: dict[str, Any] | None = None):
        self.paths = _expand(paths, (".parquet",), storage_options)
        self.max_batch_bytes = max_batch_bytes
        observed = reconcile_schema(pq.read_schema(p) for p in self.paths)
        target = target_schema(observed, schema, schema_overrides)
        if fields is not None:
            unknown = [f for f in dict.fromkeys(fields) if f not in target.names]
            if unknown:
                logger.warning("requested fields {} are in none of the {} files (filling with null); columns are {}",
                               unknown, len(self.paths), target.names)
            target = pa.schema([*(f for f in target if f.name in RESERVED_COLUMNS or f.name in fields),
                                *(pa.field(name, pa.null()) for name in unknown)])
        self.schema = target

    def _file_batches(self, path: str) -> Iterator[pa.Table]:
        handle = pq.ParquetFile(path)
        present = [n for n in self.schema.names if n in handle.schema_arrow.names]
        for batch in handle.iter_batches(columns=present):
            yield align_table(pa.Table.from_batches([batch]), self.schema)

    def __iter__(self) -> Iterator[InterleavedBatch]:
        pending: list[pa.Table] = []
        files: list[str] = []
        for path in self.paths:
            for table in self._file_batches(path):
                pending.append(table)
                if table.num_rows and (not files or files[-1] != path):  # only the files rows came from
                    files.append(path)
                if self.max_batch_bytes is None:
                    continue
                held = sum(t.nbytes for t in pending)
                if held < self.max_batch_bytes:
                    continue
                joined = pa.concat_tables(pending)
                ids = joined.column("sample_id")
                last = ids[joined.num_rows - 1].as_py()
                cut = joined.num_rows
                while cut > 0 and ids[cut - 1].as_py() == last:  # the last sample may go on in the next batch
                    cut -= 1
                if cut == 0:
                    pending = [joined]
                    continue
                yield InterleavedBatch(joined.slice(0, cut), tuple(files))
                pending, files = [joined.slice(cut)], [path]
            # a document does not go on into the next file: a full batch ends with its file (as NeMo Curator's)
            if pending and (self.max_batch_bytes is None or sum(t.nbytes for t in pending) >= self.max_batch_bytes):
                yield InterleavedBatch(pa.concat_tables(pending), tuple(files))
                pending, files = [], []
        if pending and sum(t.num_rows for t in pending):
            yield InterleavedBatch(pa.concat_tables(pending), tuple(files))

    def read(self) -> InterleavedBatch:
        tables = [b.table for b in self]
        table = pa.concat_tables(tables) if tables else self.schema.empty_table()
        return InterleavedBatch(table, tuple(self.paths))
