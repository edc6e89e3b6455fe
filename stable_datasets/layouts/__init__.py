"""Layouts: one module per physical format (the two Lance ones in lance/), each holding its Writer and its Backend."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.features import Features, Video

if TYPE_CHECKING:
    from stable_datasets.layouts.contract import LayoutModule

# storage_format (user-facing) -> layout module name
STORAGE_FORMATS = {"arrow": "arrow_shards", "lance": "lance_rows", "parquet": "parquet_shards"}
LAYOUTS = {
    "arrow_shards": "stable_datasets.layouts.arrow_shards",
    "lance_rows": "stable_datasets.layouts.lance.rows",
    "lance_video_frames": "stable_datasets.layouts.lance.video_frames",
    "parquet_shards": "stable_datasets.layouts.parquet_shards",
}


def layout_module(name: str) -> LayoutModule:
    """The module owning layout `name` (see layouts.contract.LayoutModule)."""
    if name not in LAYOUTS:
        raise ValueError(f"unknown cache layout {name!r}; known layouts: {sorted(LAYOUTS)}")
    return cast("LayoutModule", importlib.import_module(LAYOUTS[name]))


def layout_for_storage_format(storage_format: str) -> str:
    if storage_format not in STORAGE_FORMATS:
        raise ValueError(f"unknown storage_format {storage_format!r}; choose one of {sorted(STORAGE_FORMATS)}")
    return STORAGE_FORMATS[storage_format]


def frames_video_column(features: Features) -> str | None:
    """The top-level Video(storage="frames") column, if any (at most one is allowed)."""
    names = [n for n, f in features.items() if isinstance(f, Video) and f.storage == "frames"]
    if len(names) > 1:
        raise ValueError(f"at most one Video(storage='frames') column per dataset, got {names}")
    return names[0] if names else None


def layout_for(features: Features, storage_format: str) -> str:
    """The layout a builder's data goes to: a Video(storage="frames") column implies video frames."""
    layout = "lance_video_frames" if frames_video_column(features) else layout_for_storage_format(storage_format)
    if layout.startswith("lance"):
        dotted = next((name for name in features if "." in name), None)
        if dotted is not None:  # Lance's own error names neither the column's origin nor what to do
            raise ValueError(f"storage_format='lance' cannot store the column {dotted!r}: Lance reads a dot in a "
                             "column name as a path into a struct; rename the column (rename_column) or choose "
                             "storage_format='arrow' or 'parquet'")
    return layout


def metadata_problem(metadata: CacheMetadata) -> str | None:
    """What in a `_metadata.json` contradicts its layout or its features, else None (checked on every read that
    opens a cache: layouts.checked passes it to cache.metadata)."""
    if metadata.layout not in LAYOUTS:
        return f"unknown layout {metadata.layout!r}; known layouts: {sorted(LAYOUTS)}"
    try:
        Features.from_dict(metadata.features)
    except Exception as exc:  # any malformed feature description
        return f"features cannot be read ({type(exc).__name__}: {exc})"
    return layout_module(metadata.layout).Backend.metadata_problem(metadata)

