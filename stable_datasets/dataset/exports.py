"""A dataset's exports: its rows as Arrow, Python, pandas, polars, Hugging Face and Ray objects, and as files
(Parquet, CSV, JSON Lines, a folder `load_from_disk` opens).

`Exports` is a mixin of `StableDataset` (one job per module: the class keeps rows, formats and views); every
export gives the stored values of the view's rows, in view order, whatever the output format.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import pyarrow as pa

from stable_datasets.dataset import hf_interop, hf_methods
from stable_datasets.dataset.saving import save_dataset
from stable_datasets.errors import missing_extra
from stable_datasets.write.engines import import_ray

#: rows per batch of `to_dict` / `to_pandas` / `to_polars(batched=True)` without a batch_size (as Hugging Face)
EXPORT_BATCH_ROWS = 1000


class Exports:
    """`StableDataset`'s `to_*` methods and `save_to_disk` (they read its rows through `_all_rows_table` and
    `_iter_arrow`)."""

    def save_to_disk(self, path: str | os.PathLike) -> Path:
        """The rows this view serves, in its order, as a standalone folder (`sds.load_from_disk` opens it
        without the source); see dataset.saving."""
        return save_dataset(self, path)

    def to_parquet(self, path_or_buf: Any, batch_size: int | None = None,
                   storage_options: dict[str, Any] | None = None, **parquet_writer_kwargs: Any) -> int:
        """The stored values as a Parquet file; returns the Arrow bytes written, as Hugging Face does."""
        return hf_methods.to_parquet(self, path_or_buf, batch_size, storage_options, **parquet_writer_kwargs)

    def to_csv(self, path_or_buf: Any, batch_size: int | None = None, num_proc: int | None = None,
               storage_options: dict[str, Any] | None = None, **to_csv_kwargs: Any) -> int:
        """The stored values as CSV (no index); returns the bytes written."""
        return hf_methods.to_csv(self, path_or_buf, batch_size, num_proc, storage_options, **to_csv_kwargs)

    def to_json(self, path_or_buf: Any, batch_size: int | None = None, num_proc: int | None = None,
                storage_options: dict[str, Any] | None = None, **to_json_kwargs: Any) -> int:
        """The stored values as JSON Lines records (pandas' to_json options); returns the bytes written."""
        return hf_methods.to_json(self, path_or_buf, batch_size, num_proc, storage_options, **to_json_kwargs)

    def to_arrow(self) -> pa.Table:
        """Every row of this view as stored (images as encoded bytes), its columns in declared order;
        the schema carries the features, so `from_arrow` gives them back."""
        table = self._all_rows_table().select(list(self._features))
        return table.replace_schema_metadata(self._features.arrow_schema.metadata)

    def _export_batches(self, batch_size: int | None) -> Iterator[pa.Table]:
        """`to_arrow`'s table, `batch_size` rows at a time (Hugging Face's default: 1,000)."""
        metadata = self._features.arrow_schema.metadata
        for table in self._iter_arrow(batch_size or EXPORT_BATCH_ROWS):
            yield table.select(list(self._features)).replace_schema_metadata(metadata)

    @overload
    def to_dict(self, batch_size: int | None = None, batched: Literal[False] = False) -> dict[str, list[Any]]: ...

    @overload
    def to_dict(self, batch_size: int | None = None, *,
                batched: Literal[True]) -> Iterator[dict[str, list[Any]]]: ...

    def to_dict(self, batch_size: int | None = None,
                batched: bool = False) -> dict[str, list[Any]] | Iterator[dict[str, list[Any]]]:
        """Columns of stored values (as `to_arrow`), as Python lists; with `batched=True`, a generator of
        such dicts of `batch_size` rows, as in Hugging Face."""
        if batched:
            return (table.to_pydict() for table in self._export_batches(batch_size))
        return self.to_arrow().to_pydict()

    def to_list(self) -> list[dict[str, Any]]:
        """Rows of stored values (as `to_arrow`), as Python dicts."""
        return self.to_arrow().to_pylist()

    def to_pandas(self, batch_size: int | None = None, batched: bool = False) -> Any:
        """A pandas DataFrame of the stored values (as `to_arrow`); needs pandas. With `batched=True`,
        a generator of DataFrames of `batch_size` rows."""
        if batched:
            return (_pandas_frame(table) for table in self._export_batches(batch_size))
        return _pandas_frame(self.to_arrow())

    def to_polars(self, batch_size: int | None = None, batched: bool = False) -> Any:
        """A polars DataFrame of the stored values (as `to_arrow`); needs polars. With `batched=True`,
        a generator of DataFrames of `batch_size` rows."""
        try:
            import polars
        except ImportError:
            raise missing_extra("to_polars", "polars", "polars") from None
        if batched:
            return (polars.from_arrow(table) for table in self._export_batches(batch_size))
        return polars.from_arrow(self.to_arrow())

    def to_hf(self) -> Any:
        """A Hugging Face `datasets.Dataset` of these rows with the features mapped (see dataset/hf_interop.py)."""
        return hf_interop.to_hf(self)

    def to_ray(self, *, ray_address: str | None = None, override_num_blocks: int | None = None) -> Any:
        """A Ray Data `Dataset` of the stored columns, read by Ray's workers (needs the `ray` extra)."""
        import_ray()  # says how to install Ray when it is missing
        from stable_datasets.dataset.ray_data import to_ray  # local: it imports Ray Data (and pandas): ~1 s

        return to_ray(self, ray_address=ray_address, override_num_blocks=override_num_blocks)


def _pandas_frame(table: pa.Table) -> Any:
    try:
        import pandas  # noqa: F401  (pyarrow's own error would not say which extra installs it)
    except ImportError:
        raise missing_extra("to_pandas", "pandas", "pandas") from None
    frame = table.to_pandas()
    for field, column in zip(table.schema, table.columns):
        # pyarrow gives float64 cells (NaN in the null row's slots) to a column with a null row: keep the dtype
        if pa.types.is_fixed_size_list(field.type) and column.null_count:
            frame[field.name] = _fixed_size_cells(column.combine_chunks())
    return frame


def _fixed_size_cells(array: pa.FixedSizeListArray) -> np.ndarray:
    """An object array: one numpy row per cell (views of one buffer, in the stored dtype), None for a null."""
    size = array.type.list_size
    values = array.values.slice(array.offset * size, len(array) * size)
    values = values.fill_null(0).to_numpy(zero_copy_only=False)  # null cells' slots are unread: no NaNs
    rows = values.reshape(len(array), size)
    cells = np.empty(len(array), dtype=object)
    for i in np.flatnonzero(array.is_valid().to_numpy(zero_copy_only=False)):
        cells[i] = rows[i]
    return cells
