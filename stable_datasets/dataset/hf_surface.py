"""Hugging Face `Dataset`'s everyday names made of `StableDataset`'s own (`take`, `skip`, `cast`, `add_item`,
`flatten`, `shape`, `to_iterable_dataset`, ...), a mixin of `StableDataset`, so code written for Hugging Face runs
unchanged; the work is dataset/hf_methods.py's and dataset/hf_names.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stable_datasets.dataset import hf_methods, hf_names

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


class HuggingFaceNames:
    """`StableDataset`'s Hugging Face names that are made of its other methods."""

    def to_iterable_dataset(self, num_shards: int = 1) -> Any:
        """Hugging Face's name for `to_iterable()` (a stream of these rows); `num_shards` is accepted and unused:
        a stream here is split by rows, whatever the shards."""
        del num_shards
        return self.to_iterable()

    def flatten(self, new_fingerprint: str | None = None, max_depth: int = 16) -> StableDataset:
        """Struct columns as `column.field` columns, as Hugging Face's (dataset/hf_names.py)."""
        del new_fingerprint, max_depth
        return hf_names.flatten(self)

    def cleanup_cache_files(self) -> int:
        """Remove superseded builds of this dataset's caches no reader uses; how many (dataset/hf_names.py)."""
        return hf_names.cleanup_cache_files(self)

    def take(self, n: int) -> StableDataset:
        """The first `n` rows (all when there are fewer), as a view."""
        return hf_methods.take(self, n)

    def skip(self, n: int) -> StableDataset:
        """The rows after the first `n`, as a view."""
        return hf_methods.skip(self, n)

    def flatten_indices(self, num_proc: int | None = None) -> StableDataset:
        """A view's rows written as a cache of their own, in view order (a whole dataset is returned as is)."""
        return hf_methods.flatten_indices(self, num_proc)

    def cast(self, features: Any) -> StableDataset:
        """Every column cast to `features`, which names exactly the dataset's columns."""
        return hf_methods.cast(self, features)

    def add_item(self, item: dict[str, Any]) -> StableDataset:
        """The rows with `item` appended."""
        return hf_methods.add_item(self, item)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns), as Hugging Face's."""
        return len(self), len(self.column_names)

    @property
    def num_columns(self) -> int:
        return len(self.column_names)
