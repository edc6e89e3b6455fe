"""`ColumnView`: some columns of a cache, maybe renamed, in a chosen order, read from the cache's
own files. `select_columns`, `remove_columns` and `rename_column(s)` make one instead of
rewriting data that did not change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.layouts.base import LayoutBackend


class ColumnView(LayoutBackend):
    """A backend serving `columns` (shown name -> stored name, in order) of another backend."""

    def __init__(self, inner: LayoutBackend, columns: dict[str, str]):
        # LayoutBackend.__init__ is not called: the inner backend holds the handles and the build's pin
        if isinstance(inner, ColumnView):  # a view of a view reads the stored columns directly
            columns = {shown: inner.columns[name] for shown, name in columns.items()}
            inner = inner.inner
        self.inner = inner
        self.columns = dict(columns)
        self.directory, self.metadata, self.options = inner.directory, inner.metadata, inner.options
        self.batched_reads = inner.batched_reads
        self._stored, self._shown = list(self.columns.values()), list(self.columns)

    def __reduce__(self) -> tuple[Any, ...]:  # pickles as the inner backend (by path) and the mapping
        return ColumnView, (self.inner, self.columns)

    def view_identity(self) -> list[list[str]]:
        """What this view changes about the rows it serves (part of a dataset's fingerprint)."""
        return [[shown, stored] for shown, stored in self.columns.items()]

    @property
    def num_rows(self) -> int:
        """The rows the inner backend serves (a frames cache serves windows, not its stored videos)."""
        return self.inner.num_rows

    def ensure_open(self) -> None:
        self.inner.ensure_open()

    def _open(self) -> None:
        self.inner.ensure_open()

    @property
    def schema(self) -> pa.Schema:
        inner = self.inner.schema
        return pa.schema([inner.field(stored).with_name(shown) for shown, stored in self.columns.items()])

    def _project_row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {shown: row[stored] for shown, stored in self.columns.items()}

    def _project(self, table: pa.Table | pa.RecordBatch) -> Any:
        arrays = [table.column(stored) for stored in self._stored]
        if isinstance(table, pa.RecordBatch):
            return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def row(self, index: int) -> dict[str, Any]:
        return self._project_row(self.inner.row(index))

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        return [self._project_row(r) for r in self.inner.rows(indices)]

    def take(self, indices: np.ndarray) -> pa.Table:
        return self._project(self.inner.take(indices))

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        for batch in self.inner.iter_batches(start, stop, batch_rows):
            yield self._project(batch)

    def stored_row_counts(self) -> tuple[int, int]:
        return self.inner.stored_row_counts()

    def block_bounds(self) -> np.ndarray:
        return self.inner.block_bounds()

    def shard_bounds(self) -> np.ndarray | None:
        return self.inner.shard_bounds()

    def open_before_fork(self) -> None:
        self.inner.open_before_fork()

    def rows_in_place(self) -> bool:
        return self.inner.rows_in_place()
