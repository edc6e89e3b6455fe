"""`open_cache`: a published cache opened from its `_metadata.json` alone, through its layout's Backend.

The one place a backend becomes a `StableDataset`: the floors below open backends
(layouts.open, storage.remote_cache, storage.remote_stream) and hand them up here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stable_datasets.cache.builds import opened
from stable_datasets.cache.metadata import CacheMetadata, read_published
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.features.info import DatasetInfo
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.layouts.open import open_backend, served_features
from stable_datasets.storage.remote_cache import open_remote_backend
from stable_datasets.storage.remote_stream import open_remote_shards
from stable_datasets.urls import is_url


def open_cache(cache_dir: str | os.PathLike, *, storage_options: dict[str, Any] | None = None,
               **read_options: Any) -> StableDataset:
    """Open a published cache from its `_metadata.json` alone: no builder needed.

    `read_options` are read-time options of the cache's layout (e.g. `window_length` for
    video frame caches). The dataset reads the build `cache_dir` points to when it is opened,
    whatever is republished there later (see cache.builds). `cache_dir` may be an object-store
    URL (`s3://bucket/prefix/.../<split>`, credentials from the environment or `storage_options`):
    see storage.remote_cache.
    """
    if is_url(cache_dir):
        backend, metadata = open_remote_backend(str(cache_dir), storage_options, read_options)
        return dataset_of(backend, metadata)
    # the build the cache's link points to now, pinned; absolute, so a later os.chdir does not lose it
    pin, metadata = read_published(Path(cache_dir).expanduser().absolute())
    try:
        dataset = dataset_of(open_backend(pin.directory, metadata, read_options), metadata)
        opened(pin)  # the pin kept since its publish (or its reuse check) is no longer needed
        return dataset
    finally:
        pin.release()  # the backend holds its own pin on the same build


def dataset_of(backend: LayoutBackend, metadata: CacheMetadata) -> StableDataset:
    """The dataset of one opened backend, described by the cache's `_metadata.json`."""
    stored = served_features(backend, metadata)
    return StableDataset([backend], features=stored, info=DatasetInfo.from_metadata(stored, metadata.info),
                         split=metadata.split or None)


def open_remote_stream(url: str, storage_options: dict[str, Any] | None = None,
                       rows: Any = None) -> Any | None:
    """A stream of the remote split at `url` read a shard at a time (storage.remote_stream); None for caches
    that cannot be streamed that way (they are opened whole). `rows(num_rows)`: (start, stop) of a partial
    split."""
    opened = open_remote_shards(url, storage_options, rows)
    if opened is None:
        return None
    backend, metadata = opened
    # a StreamingDataset (imported there: it imports torch); lanes: each node downloads about its own shards
    return dataset_of(backend, metadata).to_iterable(lanes=True)
