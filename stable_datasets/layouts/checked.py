"""The checked read of a cache's `_metadata.json`: its shape (cache.metadata), its layout and features
(`layouts.metadata_problem`), and the metadata of upstream stable-datasets' caches (layouts.upstream).

Every reader that opens or trusts a cache reads through here (the cache roots, the write path's reuse check,
verify, the object-store protocol); `cache/` sits below `layouts/` and passes no check of its own. Nothing is
installed into cache.metadata: the check and the upstream reader are passed to it on each read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stable_datasets.cache.builds import BuildPin
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.cache.metadata import read_published as read_published_unchecked
from stable_datasets.layouts import metadata_problem
from stable_datasets.layouts.upstream import is_upstream, upstream_metadata


def upstream_or_none(directory: Path, data: Any) -> CacheMetadata | None:
    """Our metadata of an upstream stable-datasets cache (read-only), or None when `data` is ours."""
    return upstream_metadata(directory, data) if is_upstream(data) else None


def parse_metadata(text: str, path: Path, *, attach: bool = True) -> CacheMetadata:
    """`CacheMetadata.parse`, checked against its layout and features."""
    return CacheMetadata.parse(text, path, attach=attach, check=metadata_problem, foreign=upstream_or_none)


def read_metadata(directory: str | os.PathLike) -> CacheMetadata:
    """`CacheMetadata.read`, checked against its layout and features."""
    return CacheMetadata.read(directory, check=metadata_problem, foreign=upstream_or_none)


def read_published(directory: str | os.PathLike) -> tuple[BuildPin, CacheMetadata]:
    """`cache.metadata.read_published`, checked against its layout and features."""
    return read_published_unchecked(directory, check=metadata_problem, foreign=upstream_or_none)
