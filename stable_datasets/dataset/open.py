"""`open_cache`: a published cache opened from its `_metadata.json` alone, through its layout's Backend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stable_datasets.builder.info import DatasetInfo
from stable_datasets.cache.metadata import CacheMetadata, read_published
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.features.features import Features
from stable_datasets.layouts import layout_module
from stable_datasets.storage.urls import is_url


def open_cache(cache_dir: str | os.PathLike, *, storage_options: dict[str, Any] | None = None,
               **layout_options: Any) -> StableDataset:
    """Open a published cache from its `_metadata.json` alone: no builder needed.

    `layout_options` are read-time options of the cache's layout (e.g. `window_length` for
    video frame caches). The dataset reads the build `cache_dir` points to when it is opened,
    whatever is republished there later (see cache.builds). `cache_dir` may be an object-store
    URL (`s3://bucket/prefix/.../<split>`, credentials from the environment or `storage_options`):
    see storage.remote_cache.
    """
    if is_url(cache_dir):
        from stable_datasets.storage.remote_cache import open_remote_cache

        return open_remote_cache(str(cache_dir), storage_options, **layout_options)
    # the build the cache's link points to now, pinned; absolute, so a later os.chdir does not lose it
    pin, metadata = read_published(Path(cache_dir).expanduser().absolute())
    try:
        return dataset_from(pin.directory, metadata, layout_options)
    finally:
        pin.release()  # the backend holds its own pin on the same build


def dataset_from(directory: Path, metadata: CacheMetadata, layout_options: dict[str, Any],
                 lance_base: tuple[str, dict[str, str]] | None = None,
                 lance_fragment: str | None = None,
                 origin: tuple[str, dict[str, Any] | None] | None = None) -> StableDataset:
    """The dataset of a checked cache in `directory`; `lance_base`: where its Lance data is read in place;
    `lance_fragment`: the one Lance data file it serves (a remote stream's downloaded fragment); `origin`:
    (URL, storage options) of the remote split `directory` is this machine's copy of."""
    backend = layout_module(metadata.layout).Backend(directory, metadata, **layout_options)
    if origin is not None:
        backend.mirror_of(*origin)
    if lance_base is not None:
        backend.read_lance_from(*lance_base)
    if lance_fragment is not None:
        backend.read_fragment(lance_fragment)
    stored = Features.from_dict(metadata.features)
    if len(stored) > 1 and list(stored) == sorted(stored) and metadata.layout != "lance_video_frames":
        # an older _metadata.json sorted its keys: the stored files keep the declared order
        stored = stored.in_order(backend.schema.names)
    features = backend.dataset_features(stored)
    return StableDataset([backend], features=features, info=DatasetInfo.from_metadata(stored, metadata.info),
                         split=metadata.split or None)
