"""From a cache location to a store: `s3://` (and `s3a://`) through boto3, other schemes through fsspec.

Stores are kept per (scheme, bucket, storage options) for the life of the process, so opening
many caches of one bucket sets up one client. Where no `storage_options=` is given (the command
line, a Ray worker's environment), `$STABLE_DATASETS_STORAGE_OPTIONS` may hold them as a JSON object.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from stable_datasets.env import env_json_object
from stable_datasets.storage.store import ObjectStore
from stable_datasets.urls import ObjectURL

S3_SCHEMES = ("s3", "s3a")
_stores: dict[tuple[str, str, str], ObjectStore] = {}
_lock = threading.Lock()


OPTIONS_VARIABLE = "STABLE_DATASETS_STORAGE_OPTIONS"


def storage_options_from_env() -> dict[str, Any]:
    """`$STABLE_DATASETS_STORAGE_OPTIONS` (a JSON object), or {} when unset."""
    return env_json_object(OPTIONS_VARIABLE, '{"token": "anon"}')


def open_store(url: ObjectURL, storage_options: dict[str, Any] | None = None) -> ObjectStore:
    """The store holding `url`'s bucket (created once per process and options); without
    `storage_options`, those of the environment."""
    if storage_options is None:
        storage_options = storage_options_from_env()
    try:
        options_key = json.dumps(storage_options or {}, sort_keys=True, default=str)
    except TypeError:
        options_key = repr(storage_options)
    key = (url.scheme, url.bucket, options_key)
    with _lock:
        store = _stores.get(key)
        if store is None:
            if url.scheme in S3_SCHEMES:
                from stable_datasets.storage.s3 import S3Store  # local: ~40 ms, only for s3:// roots

                store = S3Store(url.bucket, storage_options, scheme=url.scheme)
            else:
                from stable_datasets.storage.fsspec_store import FsspecStore  # local: ~50 ms, only for gs:// etc.

                store = FsspecStore(url.scheme, url.bucket, storage_options, str(url))
            _stores[key] = store
    return store


def _forget_after_fork() -> None:
    """A forked child (a part of a build with num_proc, a DataLoader worker) sets up its own clients: the parent's
    are not fork-safe (gcsfs refuses them: "This class is not fork-safe"; a boto3 connection pool is shared)."""
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread at the fork
    _stores.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def forget_stores() -> None:
    """Drop the stores set up so far (tests that change the environment's credentials)."""
    with _lock:
        _stores.clear()
