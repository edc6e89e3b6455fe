"""The checked read of `_metadata.json` (layouts.checked): the layout check and the reader of upstream caches are
passed to cache.metadata on each read, never installed into it at import time, so what a read checks does not
depend on which modules happen to be imported. Every reader that opens, lists or locates caches uses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.inventory import find_caches
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.errors import CacheError
from stable_datasets.layouts.checked import read_metadata
from stable_datasets.manage.inventory import entry_for
from stable_datasets.roots import locate, resolve_root
from tests.upstream_caches import write_upstream_cache


def unknown_layout_cache() -> Path:
    """A published in-memory cache whose `_metadata.json` names a layout nobody knows."""
    link = published_path(Path(sds.StableDataset.from_dict({"x": [1, 2, 3]}).cache_dirs[0]))
    metadata_file = link / "_metadata.json"
    metadata_file.write_text(json.dumps({**json.loads(metadata_file.read_text()), "layout": "zip_shards"}))
    return link


def test_the_plain_read_checks_the_shape_and_the_checked_read_the_layout_too(cache_root):
    link = unknown_layout_cache()
    assert CacheMetadata.read(link).layout == "zip_shards"  # cache/ knows no layouts: a listing's read
    with pytest.raises(CacheError, match=r"_metadata.json: invalid cache metadata: unknown layout 'zip_shards'"):
        read_metadata(link)


def test_listing_locating_and_inventory_read_checked(cache_root):
    link = unknown_layout_cache()
    unreadable: list = []
    assert find_caches(cache_root, unreadable, read=read_metadata) == []
    assert [d for d, _ in unreadable] == [link]
    unreadable = []
    assert locate(str(cache_root), resolve_root(cache_root), unreadable, any_state=True) == []
    assert len(unreadable) == 1 and "unknown layout 'zip_shards'" in unreadable[0][1]
    with pytest.raises(CacheError, match="unknown layout 'zip_shards'"):
        entry_for(link)


def test_an_upstream_cache_is_read_by_the_checked_read_only(tmp_path):
    upstream = write_upstream_cache(tmp_path / "toy_default_train_0123456789abcdef", [4, 4])
    metadata = read_metadata(upstream)
    assert (metadata.num_rows, len(metadata.shards), metadata.extra["upstream"]["format"]) == (8, 2, "arrow")
    with pytest.raises(CacheError, match="invalid cache metadata"):
        CacheMetadata.read(upstream)  # the plain read knows only our own metadata
