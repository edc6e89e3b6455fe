"""`DatasetDict`: split name -> StableDataset, with the per-split methods broadcast."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


class DatasetDict(dict[str, "StableDataset"]):
    def _apply(self, method: str, *args: Any, **kwargs: Any) -> DatasetDict:
        return DatasetDict({name: getattr(ds, method)(*args, **kwargs) for name, ds in self.items()})

    def with_format(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("with_format", *args, **kwargs)

    def map(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("map", *args, **kwargs)

    def filter(self, *args: Any, **kwargs: Any) -> DatasetDict:
        return self._apply("filter", *args, **kwargs)

    def shuffle(self, seed: int | None = None) -> DatasetDict:
        return self._apply("shuffle", seed=seed)

    def select_columns(self, columns: list[str]) -> DatasetDict:
        return self._apply("select_columns", columns)

    @property
    def num_rows(self) -> dict[str, int]:
        return {name: len(ds) for name, ds in self.items()}

    @property
    def column_names(self) -> dict[str, list[str]]:
        return {name: ds.column_names for name, ds in self.items()}

    def __repr__(self) -> str:
        inner = ",\n".join(f"  {name!r}: {ds!r}" for name, ds in self.items())
        return f"DatasetDict({{\n{inner}\n}})"
