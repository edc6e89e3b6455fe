"""`open_cache`: a published cache opened from its `_metadata.json` alone, through its layout's Backend.

The one place a backend becomes a `StableDataset`: the floors below open backends (a cache root's
`open` and `open_stream`, roots.CacheRoot; verify, migration, the inventory) and hand them up here.
"""

from __future__ import annotations

import os
from typing import Any

from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.features.info import DatasetInfo
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.layouts.open import served_features
from stable_datasets.roots import CacheRoot, root_at


def open_cache(cache_dir: str | os.PathLike, *, storage_options: dict[str, Any] | None = None,
               **read_options: Any) -> StableDataset:
    """Open a published cache from its `_metadata.json` alone: no builder needed.

    `read_options` are read-time options of the cache's layout (e.g. `window_length` for
    video frame caches). The dataset reads the build `cache_dir` points to when it is opened,
    whatever is republished there later (see cache.builds). `cache_dir` may be an object-store
    URL (`s3://bucket/prefix/.../<split>`, credentials from the environment or `storage_options`):
    see storage.remote_cache.
    """
    return dataset_of(*root_at(cache_dir, storage_options).open(cache_dir, read_options))


def dataset_of(backend: LayoutBackend, metadata: CacheMetadata) -> StableDataset:
    """The dataset of one opened backend, described by the cache's `_metadata.json`."""
    stored = served_features(backend, metadata)
    return StableDataset([backend], features=stored, info=DatasetInfo.from_metadata(stored, metadata.info),
                         split=metadata.split or None)


def open_stream(root: CacheRoot, address: Any, rows: Any = None) -> Any | None:
    """A stream of the split at `address` on `root` read a shard at a time as it is reached (a remote Arrow or
    Parquet split: storage.remote_stream); None for caches best opened whole. `rows(num_rows)`: (start, stop) of
    a partial split."""
    opened = root.open_stream(address, rows)
    if opened is None:
        return None
    # a StreamingDataset (imported there: it imports torch); lanes: each node downloads about its own shards
    return dataset_of(*opened).to_iterable(lanes=True)
