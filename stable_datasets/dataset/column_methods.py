"""Column operations on a dataset (`select_columns`, `rename_column`, `cast_column`, `sort`, ...), a mixin of
`StableDataset`; the work is dataset/columns.py's: views where the stored data does not change, a rewrite of the
columns that do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stable_datasets.dataset import columns

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


class ColumnMethods:
    """`StableDataset`'s column operations."""

    def select_columns(self, column_names: str | Sequence[str]) -> StableDataset:
        """Only `column_names`, in that order (a view: nothing is rewritten)."""
        return columns.select_columns(self, column_names)

    def remove_columns(self, column_names: str | Sequence[str]) -> StableDataset:
        return columns.remove_columns(self, column_names)

    def rename_column(self, original_column_name: str, new_column_name: str) -> StableDataset:
        return columns.rename_columns(self, {original_column_name: new_column_name})

    def rename_columns(self, column_mapping: dict[str, str]) -> StableDataset:
        return columns.rename_columns(self, column_mapping)

    def cast_column(self, column: str, feature: Any) -> StableDataset:
        """`column` as `feature`: a view when the storage stays the same, else that column rewritten."""
        return columns.cast_column(self, column, feature)

    def add_column(self, name: str, column: Any, feature: Any = None) -> StableDataset:
        return columns.add_column(self, name, column, feature)

    def class_encode_column(self, column: str, include_nulls: bool = False) -> StableDataset:
        return columns.class_encode_column(self, column, include_nulls)

    def sort(self, column_names: str | Sequence[str], reverse: bool | Sequence[bool] = False,
             null_placement: str = "at_end") -> StableDataset:
        """Rows ordered by `column_names` (stable), as a view of the same files."""
        return columns.sort(self, column_names, reverse, null_placement)

    def unique(self, column: str) -> list[Any]:
        """Distinct stored values of `column`, in order of first appearance."""
        return columns.unique(self, column)
