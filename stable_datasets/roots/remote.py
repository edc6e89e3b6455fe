"""A cache root on an object store (`s3://`, `gs://`, any writable fsspec protocol): a cache is visible only
through its `_metadata.json`, written last with a conditional put (storage.publish); a lease on the store keeps
builders of one split apart (storage.lease); readers copy shards into this node's bounded shard cache."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.cache.builds import remove_tree
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.roots.base import Address, CacheRoot, WriteFor
from stable_datasets.storage import shard_cache
from stable_datasets.storage.inventory import (
    RemoteEntry,
    abandoned_attempts,
    find_remote_caches,
    remote_entry_for,
    remove_remote_cache,
    verify_remote,
)
from stable_datasets.storage.lease import Lease
from stable_datasets.storage.publish import RemoteSplit, remove_attempt
from stable_datasets.storage.remote_cache import open_remote_backend, prepare_remote_split, valid_remote
from stable_datasets.storage.remote_stream import open_remote_shards
from stable_datasets.storage.resolve import open_store
from stable_datasets.storage.root import RemoteRoot
from stable_datasets.urls import ObjectURL
from stable_datasets.write import JobRunner, write_split_for_store
from stable_datasets.write.places import PARTS_ON_DISK, PartsOnStore
from stable_datasets.write.remote_parts import RemoteParts


class ObjectStoreRoot(CacheRoot):
    """`scheme://bucket/prefix` (storage.root.RemoteRoot: its URL and store) as a cache root."""

    sees_readers = False  # readers on other nodes pin their copies there, not here

    def __init__(self, bucket_root: RemoteRoot):
        self.bucket_root = bucket_root
        self.local_dir = bucket_root.local_dir
        self.storage_options = bucket_root.storage_options

    @property
    def store(self) -> Any:
        return self.bucket_root.store

    @property
    def url(self) -> ObjectURL:
        return self.bucket_root.url

    def __str__(self) -> str:
        return str(self.bucket_root)

    def __repr__(self) -> str:
        return f"ObjectStoreRoot({str(self.bucket_root)!r})"

    def _split(self, directory: Path) -> RemoteSplit:
        return RemoteSplit(self.store, self.bucket_root.key(directory.relative_to(self.local_dir).as_posix()))

    def address(self, directory: Path) -> str:
        return self._split(directory).url

    def input_options(self, storage_options: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
        return {self.url.scheme: dict(storage_options)} if storage_options else None  # they serve this scheme

    def builder_folder(self, builder_folder: str) -> str:
        return self.store.url(self.bucket_root.key(builder_folder)) + "/"

    def is_published(self, directory: Path, fingerprint: str) -> bool:
        return valid_remote(self._split(directory), fingerprint)

    def lock(self, directory: Path, *, timeout: float | None = None, soft: bool | None = None
             ) -> contextlib.AbstractContextManager[Any]:
        return Lease(self.store, self._split(directory).prefix, timeout=timeout)

    def publish(self, directory: Path, fingerprint: str, write_for: WriteFor, runner: JobRunner, *, force: bool,
                lock_timeout: float | None = None, soft_lock: bool | None = None) -> str:
        """Built in this node's work folder, then uploaded and committed (storage.remote_cache); with
        engine="ray" the parts travel through the store (write.remote_parts), as nodes may share no disk."""
        relative = directory.relative_to(self.local_dir).as_posix()
        # Ray tasks may run on nodes that share no disk: their parts go through the store
        parts_at = PartsOnStore(RemoteParts(self.store, self.bucket_root.key(relative))) if runner.engine == "ray" \
            else PARTS_ON_DISK

        def build(local: Path) -> dict[str, str]:
            plan, source = write_for(local)
            if source.incremental:
                logger.info("{} '{}': on an object-store root no part of an earlier cache is reused: a full build",
                            plan.builder_name, plan.split)
            plan = dataclasses.replace(plan, evict=False, cache_limit=None, part_basis="")
            return write_split_for_store(plan, source, runner, parts_at)[1]

        return prepare_remote_split(self.bucket_root, relative, fingerprint, force=force, build=build,
                                    lock_timeout=lock_timeout)

    def read_note(self, path: Path) -> str | None:
        if path.is_file():
            return path.read_text()
        data = self.store.get(self.bucket_root.key(path.relative_to(self.local_dir).as_posix()))
        return None if data is None else data.decode()

    def write_note(self, path: Path, text: str) -> None:
        self.store.put_bytes(self.bucket_root.key(path.relative_to(self.local_dir).as_posix()), text.encode())

    def open(self, address: Address, read_options: dict[str, Any] | None = None
             ) -> tuple[LayoutBackend, CacheMetadata]:
        return open_remote_backend(str(address), self.storage_options, read_options)

    def open_stream(self, address: Address, rows: Any = None) -> tuple[LayoutBackend, CacheMetadata] | None:
        return open_remote_shards(str(address), self.storage_options, rows)

    def entries(self, unreadable: list[tuple[Any, str]] | None = None) -> list[RemoteEntry]:
        return find_remote_caches(self.bucket_root, unreadable)

    def entry(self, address: Address) -> RemoteEntry:
        return remote_entry_for(str(address), self.storage_options)

    def remove(self, entries: list[Any], *, dry_run: bool = False) -> list[str]:
        if not dry_run:
            for entry in entries:
                remove_remote_cache(entry.split)
        return [entry.url for entry in entries]

    def verify(self, address: Address) -> list[str]:
        parsed = ObjectURL.parse(str(address))
        return verify_remote(RemoteSplit(open_store(parsed, self.storage_options), parsed.key), self.storage_options)

    def prune(self, planned: list[tuple[str, Any]], *, dry_run: bool, max_age_seconds: float,
              also: list[tuple[str, Path]] = (), entries: list[Any] = ()
              ) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        doomed: list[tuple[str, Any]] = []
        for kind, entry in planned:
            doomed.append((kind, entry.url))
            if not dry_run:
                remove_remote_cache(entry.split)
        for kind, split, attempt in abandoned_attempts(self.bucket_root, max_age_seconds):
            doomed.append((kind, f"{split.url}/{attempt}"))
            if not dry_run:
                remove_attempt(split, attempt)
        for kind, path in also:  # this node's files for the root (its work folder's downloads)
            if dry_run or remove_tree(path):
                doomed.append((kind, path))
        return doomed, []

    def evict(self) -> list[Path]:
        return shard_cache.evict()
