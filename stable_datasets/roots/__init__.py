"""Cache roots: one interface (roots.base.CacheRoot) with a local folder (roots.local) and an object store
(roots.remote) behind it. `resolve_root` gives the root a call names; `root_at` the root an address (a cache's
folder or URL) is on. Which kind a root is, is decided here and in `storage/` only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stable_datasets.cache.inventory import find_caches
from stable_datasets.cache.metadata import METADATA_FILE
from stable_datasets.cache.paths import cache_root
from stable_datasets.env import env_text
from stable_datasets.errors import ConfigurationError
from stable_datasets.layouts.checked import read_metadata
from stable_datasets.roots.base import Address, CacheRoot
from stable_datasets.roots.local import LocalRoot
from stable_datasets.roots.remote import ObjectStoreRoot
from stable_datasets.storage.root import RemoteRoot
from stable_datasets.urls import ObjectURL, is_url

__all__ = ["Address", "CacheRoot", "LocalRoot", "ObjectStoreRoot", "locate", "resolve_root", "root_at", "root_for"]


def resolve_root(cache_dir: str | os.PathLike | None = None, storage_options: dict[str, Any] | None = None,
                 *, check: bool = True) -> CacheRoot:
    """The root a call names: the argument, else $STABLE_DATASETS_CACHE_DIR, else ~/.cache/stable_datasets.
    An object store's is checked once (`check`: fail fast on a bucket that cannot be reached)."""
    if cache_dir is not None and not isinstance(cache_dir, (str, bytes, os.PathLike)):
        raise ConfigurationError(f"cache_dir is a {type(cache_dir).__name__} object: give a cache root as a local "
                                 "path or a URL string ('s3://bucket/prefix', 'gs://...', any fsspec protocol), with "
                                 "the filesystem's credentials and endpoint in storage_options=")
    location = cache_dir if cache_dir is not None else env_text("STABLE_DATASETS_CACHE_DIR")
    if is_url(location):
        return ObjectStoreRoot(RemoteRoot.open(str(location), storage_options, check=check))
    return LocalRoot(cache_root(cache_dir))


def root_at(address: Address, storage_options: dict[str, Any] | None = None) -> CacheRoot:
    """The root a cache's address is on, enough to open, read and verify it there (its bucket, or its folder)."""
    if is_url(address):
        parsed = ObjectURL.parse(str(address))
        return ObjectStoreRoot(RemoteRoot.open(ObjectURL(parsed.scheme, parsed.bucket, ""), storage_options,
                                               check=False))
    return LocalRoot(Path(address).expanduser().absolute().parent)


def root_for(address: Address, root: CacheRoot) -> CacheRoot:
    """The root that serves `address`: `root` when the address is of its kind (a folder, or a URL), else the root
    the address is on (a cache's URL named while the root is a local folder, or the reverse)."""
    return root if is_url(address) == isinstance(root, ObjectStoreRoot) else root_at(address, root.storage_options)


def locate(target: str, root: CacheRoot, unreadable: list[tuple[Any, str]] | None = None, *,
           any_state: bool = False) -> list[Address] | None:
    """The caches a command's target names when it is an address: a cache's URL, a cache folder, or a folder of
    caches (those whose metadata cannot be read go to `unreadable`); None when it names no place (a builder).
    `any_state`: a folder with a `_metadata.json` (or a link) is a cache whatever state its metadata is in."""
    if is_url(target):
        return [target]
    path = Path(target).expanduser()
    if (path / METADATA_FILE).is_file() or (any_state and ((path / METADATA_FILE).exists() or path.is_symlink())):
        return [path]
    if path.is_dir():
        found_unreadable: list[tuple[Any, str]] = []
        found = find_caches(path, found_unreadable, read=read_metadata)
        if found or (any_state and found_unreadable):
            if unreadable is not None:
                unreadable += found_unreadable
            return [e.directory for e in found]
    return None
