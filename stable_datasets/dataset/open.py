"""`open_cache`: a published cache opened from its `_metadata.json` alone, through its layout's Backend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stable_datasets.builder.info import DatasetInfo
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.features.features import Features
from stable_datasets.layouts import layout_module


def open_cache(cache_dir: str | os.PathLike, **layout_options: Any) -> StableDataset:
    """Open a published cache from its `_metadata.json` alone: no builder needed.

    `layout_options` are read-time options of the cache's layout (e.g. `window_length` for
    video frame caches).
    """
    metadata = CacheMetadata.read(cache_dir)
    directory = Path(cache_dir)
    metadata.check_shard_sizes(directory)
    backend = layout_module(metadata.layout).Backend(directory, metadata, **layout_options)
    stored = Features.from_dict(metadata.features)
    features = backend.dataset_features(stored)
    return StableDataset([backend], features=features, info=DatasetInfo.from_metadata(stored, metadata.info),
                         split=metadata.split or None)
