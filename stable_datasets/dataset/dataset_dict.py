"""`DatasetDict`: split name -> StableDataset, with the per-split methods broadcast."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stable_datasets.dataset.columns import class_encode_column
from stable_datasets.dataset.saving import save_dataset_dict

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


class DatasetDict(dict[str, "StableDataset"]):
    def __missing__(self, split: str) -> StableDataset:
        raise KeyError(f"no split {split!r}; splits are {list(self)}")

    def _apply(self, method: str, *args: Any, **kwargs: Any) -> DatasetDict:
        return DatasetDict({name: getattr(ds, method)(*args, **kwargs) for name, ds in self.items()})

    def save_to_disk(self, path: str | os.PathLike) -> Path:
        """Every split as a saved dataset under `path` (see dataset.saving); `sds.load_from_disk` reopens it."""

        return save_dataset_dict(self, path)

    def _repr_html_(self) -> str:
        """A notebook's view: each split's rows, features and first rows."""
        return "".join(f"<h4>{escape(str(name))}</h4>{ds._repr_html_()}" for name, ds in self.items())

    def with_format(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("with_format", *args, **kwargs)

    def map(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("map", *args, **kwargs)

    def filter(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("filter", *args, **kwargs)

    def shuffle(self, seeds: int | dict[str, int | None] | None = None, seed: int | None = None,
                generators: dict[str, Any] | None = None, **kwargs: Any) -> DatasetDict:
        """Every split shuffled, as Hugging Face's: `seeds` one seed for all or a seed per split name
        (`seed` is its other name); `generators` a numpy Generator per split name."""
        if seed is not None and seeds is not None:
            raise ValueError("DatasetDict.shuffle takes `seeds` or `seed`, not both")
        seeds = seed if seeds is None else seeds
        for given in (seeds, generators):
            unknown = sorted(set(given) - set(self)) if isinstance(given, dict) else []
            if unknown:
                raise KeyError(f"DatasetDict.shuffle: no split(s) {unknown}; splits are {list(self)}")
        return DatasetDict({name: ds.shuffle(seed=seeds.get(name) if isinstance(seeds, dict) else seeds,
                                             generator=(generators or {}).get(name), **kwargs)
                            for name, ds in self.items()})

    def select_columns(self, column_names: str | list[str]) -> DatasetDict:
        return self._apply("select_columns", column_names)

    def remove_columns(self, column_names: str | list[str]) -> DatasetDict:
        return self._apply("remove_columns", column_names)

    def rename_column(self, original_column_name: str, new_column_name: str) -> DatasetDict:
        return self._apply("rename_column", original_column_name, new_column_name)

    def rename_columns(self, column_mapping: dict[str, str]) -> DatasetDict:
        return self._apply("rename_columns", column_mapping)

    def cast_column(self, column: str, feature: Any) -> DatasetDict:
        return self._apply("cast_column", column, feature)

    def class_encode_column(self, column: str, include_nulls: bool = False) -> DatasetDict:
        """Every split encoded with one ClassLabel: the names are the distinct values of all splits,
        as Hugging Face does (each split's own values would give each its own ids)."""

        names = sorted({str(v) for ds in self.values() for v in ds.unique(column) if include_nulls or v is not None})
        return DatasetDict({name: class_encode_column(ds, column, include_nulls, names=names)
                            for name, ds in self.items()})

    def sort(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("sort", *args, **kwargs)

    def unique(self, column: str) -> dict[str, list[Any]]:
        return {name: ds.unique(column) for name, ds in self.items()}

    def with_transform(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("with_transform", *args, **kwargs)

    def set_transform(self, *args: Any, **kwargs: Any) -> None:
        for ds in self.values():
            ds.set_transform(*args, **kwargs)

    def set_format(self, *args: Any, **kwargs: Any) -> None:
        for ds in self.values():
            ds.set_format(*args, **kwargs)

    def reset_format(self) -> None:
        for ds in self.values():
            ds.reset_format()

    @property
    def num_rows(self) -> dict[str, int]:
        return {name: len(ds) for name, ds in self.items()}

    @property
    def column_names(self) -> dict[str, list[str]]:
        return {name: ds.column_names for name, ds in self.items()}

    def __repr__(self) -> str:
        inner = ",\n".join(f"  {name!r}: {ds!r}" for name, ds in self.items())
        return f"DatasetDict({{\n{inner}\n}})"

