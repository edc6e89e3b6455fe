"""Hugging Face `datasets`' everyday names that are not a method of their own elsewhere: `split_dataset_by_node`,
`flatten`, `cleanup_cache_files`, and the check that `concatenate_datasets` was given our datasets.

Each keeps Hugging Face's call shape and result so code written for it runs unchanged; where the meaning
has to differ (our caches are shared, immutable builds, not a dataset's private files) the docstring says so.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stable_datasets.cache.builds import build_base, published_path, remove_superseded, superseded_builds
from stable_datasets.dataset.in_memory import from_columns
from stable_datasets.features.columnar import table_columns
from stable_datasets.features.features import Features

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


def split_dataset_by_node(dataset: Any, rank: int, world_size: int) -> Any:
    """The part of `dataset` node `rank` of `world_size` reads, as Hugging Face's
    `datasets.distributed.split_dataset_by_node`: a dataset's contiguous `shard(world_size, rank)` (sizes differ
    by at most one row, the first ranks taking the extra rows), a stream's rank split (`rank=`/`world_size=` of
    `to_iterable`, which keeps exact resume)."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"split_dataset_by_node: world_size must be a positive int, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"split_dataset_by_node: rank must be an int in [0, {world_size}), got {rank!r}")
    streaming = sys.modules.get("stable_datasets.streaming.iterable")  # a stream's class is imported if one exists
    if streaming is not None and isinstance(dataset, streaming.StreamingDataset):
        return dataset._with(rank=rank, world_size=world_size)
    if hasattr(dataset, "shard") and hasattr(dataset, "select"):
        return dataset.shard(num_shards=world_size, index=rank, contiguous=True)
    raise TypeError(f"split_dataset_by_node takes a StableDataset or a stream of one, got {type(dataset).__name__}")


def _flat_features(features: Features, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, feature in features.items():
        if isinstance(feature, Features):
            flat.update(_flat_features(feature, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = feature
    return flat


def flatten(ds: StableDataset) -> StableDataset:
    """Struct columns as one column per field, named `column.field` (nested structs all the way down), as
    Hugging Face's `flatten`; a dataset without struct columns is returned as it is. The flat rows are
    written once to a cache named by their content (like `from_arrow`), in the view's row order."""
    if not any(isinstance(f, Features) for f in ds.features.values()):
        return ds
    table = ds.to_arrow()
    while any(pa.types.is_struct(field.type) for field in table.schema):  # Arrow's flatten goes one level
        table = table.flatten()
    features = Features(_flat_features(ds.features))
    return from_columns(table_columns(table), "flatten", features=features, storage_format="arrow",
                        cache_dir=None, split=str(ds.split or "train"),
                        info={"description": ds.info.description or ""})


def cleanup_cache_files(ds: StableDataset) -> int:
    """Hugging Face's `cleanup_cache_files`: remove cache files this dataset does not use, and return how many.
    Here: the superseded builds (older builds of the same caches, left while a reader held them) that no
    process reads any more; the builds this dataset reads, and caches in object storage, are kept (an object
    store is pruned with `stable-datasets prune`)."""
    removed = 0
    for directory in ds.cache_dirs:
        directory = Path(directory)
        if build_base(directory) is None:  # not a local build folder (a remote or a saved cache)
            continue
        final = published_path(directory)
        before = superseded_builds(final)
        removed += len(before) - len(remove_superseded(final))
    return removed


def check_concatenable(datasets: Sequence[Any], ours: type) -> None:
    """A clear error for what `concatenate_datasets` cannot join: a Hugging Face `datasets.Dataset` (with how
    to convert it) or anything else that is not one of ours (`ours`: the StableDataset class)."""
    if isinstance(datasets, (str, bytes)) or not isinstance(datasets, Sequence):
        raise TypeError(f"concatenate_datasets takes a list of datasets, got {type(datasets).__name__}")
    for position, dataset in enumerate(datasets):
        if isinstance(dataset, ours):
            continue
        kind = type(dataset)
        if kind.__module__.split(".")[0] == "datasets":
            raise TypeError(f"concatenate_datasets: dataset {position} is a Hugging Face datasets.{kind.__name__}, "
                            "not a StableDataset; convert it with sds.StableDataset.from_hf(it) (one split; or ours "
                            "to Hugging Face's with .to_hf())")
        raise TypeError(f"concatenate_datasets: dataset {position} is a {kind.__name__}, not a StableDataset")
