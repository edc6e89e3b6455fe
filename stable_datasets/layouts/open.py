"""Opening a published cache's backend from its folder and `_metadata.json`, and checking a cache.

This is the floor below `dataset/`: everything that must read a cache without building a
`StableDataset` (the remote cache and stream in `storage/`, `verify`, migration, the inventory)
opens its backend here. Only `dataset/open.py` wraps a backend into a dataset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stable_datasets.cache.builds import pin_current
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.features.features import Features
from stable_datasets.layouts import layout_module
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.layouts.checked import parse_metadata


def open_backend(directory: Path, metadata: CacheMetadata, read_options: dict[str, Any] | None = None, *,
                 in_place: tuple[str, dict[str, str]] | None = None, unit: ShardInfo | None = None) -> LayoutBackend:
    """The layout's Backend over the checked cache in `directory`.

    `read_options`: read-time options of the layout (e.g. `window_length` of a frames cache; never
    fingerprinted). `in_place`: (URI, storage options) of the cache folder on an object store, where the
    layout's `in_place_files` are read instead of on disk. `unit`: the one file (of the layout's
    `stream_units`) a stream downloaded, whose rows are the only ones served.
    """
    backend = layout_module(metadata.layout).Backend(directory, metadata, **(read_options or {}))
    if in_place is not None:
        backend.read_in_place(*in_place)
    if unit is not None:
        backend.serve_unit(unit)
    return backend


def served_features(backend: LayoutBackend, metadata: CacheMetadata) -> Features:
    """The features of the rows `backend` serves, from those `_metadata.json` records."""
    stored = Features.from_dict(metadata.features)
    if len(stored) > 1 and list(stored) == sorted(stored):
        # an older _metadata.json sorted its keys: the stored files keep the declared order
        order = backend.stored_column_order()
        if order is not None:
            stored = stored.in_order(order)
    return backend.dataset_features(stored)


def verify_cache(directory: Path) -> list[str]:
    """Recompute every checksum and size against `_metadata.json`, and count the stored rows; the problems."""
    try:
        pin = pin_current(directory)
    except CacheError as exc:
        return [str(exc)]
    try:
        build = pin.directory
        try:
            metadata = parse_metadata(pin.read_text(), build / METADATA_FILE)
        except CacheError as exc:
            return [str(exc)]
        listed = metadata.shard_list_file  # `_shards.arrow` of a cache of many shards: opening checks its sums only
        if listed is not None and (problem := listed.problem(build)):
            return [problem]
        problems = [p for files in (metadata.shards, metadata.extra_files) for shard in files
                    if (p := shard.problem(build))]
        if not problems:
            problems.extend(_row_count_problems(build, metadata))
        return problems
    finally:
        pin.release()


def _row_count_problems(directory: Path, metadata: CacheMetadata) -> list[str]:
    """Open the cache and count its stored rows, whatever `_metadata.json` says (more or fewer)."""
    try:
        backend = open_backend(directory, metadata)
        served_features(backend, metadata)
        counted, stored = backend.stored_row_counts()
    except Exception as exc:
        return [f"{directory}: cannot be read ({type(exc).__name__}: {exc})"]
    finally:
        if "backend" in locals():
            backend.release_pin()
    if counted != stored:
        return [f"{directory}: holds {counted} rows, {METADATA_FILE} says {stored}"]
    return []
