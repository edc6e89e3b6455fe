"""What is on an object-store root: published caches, attempts, leases; verify, prune and rm.

The remote counterpart of cache.inventory, for `stable-datasets ls/info/verify/prune/rm`.
Prune removes an attempt that no `_metadata.json` names when nobody can still need it:

- not named by a live lease (a build in progress), and not pinned by an open dataset or stream on this node;
- never published (a killed build, a lost race): its builder, on this host, is gone, or its
  newest object is older than `max_age_seconds`;
- superseded (a rebuild or `rm` replaced it): marked so more than `max_age_seconds` ago, which
  is the grace that datasets opened on other nodes have to finish with it.
"""

from __future__ import annotations

import json
import re
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from stable_datasets.cache.builds import build_in_use
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.cache.processes import process_alive
from stable_datasets.errors import CacheError, StorageError
from stable_datasets.storage import shard_cache
from stable_datasets.storage.lease import LEASE_FILE, lease_is_stale
from stable_datasets.storage.publish import (
    ATTEMPT_RECORD,
    ATTEMPTS,
    SUPERSEDED,
    RemoteSplit,
    files_of,
    parse_remote_metadata,
    remove_attempt,
)
from stable_datasets.storage.remote_cache import open_remote_backend, open_remote_split
from stable_datasets.storage.root import RemoteRoot
from stable_datasets.storage.store import ObjectInfo

_ATTEMPT_KEY = re.compile(rf"^(?P<split>.+)/{ATTEMPTS}/(?P<id>[0-9a-f]{{8,64}})/(?P<rest>.+)$")


@dataclass
class RemoteEntry:
    """A published remote cache (the fields `stable-datasets ls` shows, as cache.inventory.CacheEntry)."""

    url: str
    split: RemoteSplit
    metadata: CacheMetadata
    modified: float
    status: str = "unknown"

    @property
    def location(self) -> str:
        """Where the cache is published (roots.CacheRoot.address): its URL."""
        return self.url

    @property
    def directory(self) -> PurePosixPath:
        return PurePosixPath(self.split.prefix)

    @property
    def size(self) -> int:
        return self.metadata.num_bytes

    @property
    def age_seconds(self) -> float:
        return time.time() - self.modified

    def to_dict(self) -> dict[str, Any]:
        m = self.metadata
        return {"path": self.url, "name": m.builder_name, "config": m.config_name, "version": m.version,
                "split": m.split, "layout": m.layout, "rows": m.num_rows, "bytes": self.size,
                "fingerprint": m.fingerprint, "created_at": m.created_at, "status": self.status,
                "attempt": m.attempt}


@dataclass
class SplitObjects:
    """Everything under one split prefix, from one listing."""

    prefix: str
    metadata: ObjectInfo | None = None
    lease: ObjectInfo | None = None
    attempts: dict[str, list[ObjectInfo]] = field(default_factory=dict)


def scan(root: RemoteRoot) -> dict[str, SplitObjects]:
    """Split prefixes under the root, with their metadata, lease and attempt objects (one listing)."""
    prefix = f"{root.url.key}/" if root.url.key else ""
    splits: dict[str, SplitObjects] = {}
    for item in root.store.list(prefix):
        match = _ATTEMPT_KEY.match(item.key)
        if match:
            entry = splits.setdefault(match.group("split"), SplitObjects(match.group("split")))
            entry.attempts.setdefault(f"{ATTEMPTS}/{match.group('id')}", []).append(item)
            continue
        parent, _, name = item.key.rpartition("/")
        if name == METADATA_FILE:
            splits.setdefault(parent, SplitObjects(parent)).metadata = item
        elif name == LEASE_FILE:
            splits.setdefault(parent, SplitObjects(parent)).lease = item
    return splits


def find_remote_caches(root: RemoteRoot, unreadable: list[tuple[str, str]] | None = None) -> list[RemoteEntry]:
    entries = []
    for objects in scan(root).values():
        if objects.metadata is None:
            continue
        split = RemoteSplit(root.store, objects.prefix)
        try:
            metadata = split.read_metadata()
        except CacheError as exc:
            if unreadable is not None:
                unreadable.append((split.url, str(exc)))
            continue
        if metadata is not None:
            entries.append(RemoteEntry(split.url, split, metadata, objects.metadata.modified))
    return sorted(entries, key=lambda e: (e.metadata.builder_name, e.metadata.config_name, e.metadata.split, e.url))


def verify_remote(split: RemoteSplit, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Download every object `_metadata.json` lists and check size and sha256, then count the rows; this node's
    local copies of them are hashed too (a changed one is removed)."""
    try:
        metadata = split.read_metadata()
    except CacheError as exc:
        return [str(exc)]
    if metadata is None:
        return [f"{split.url}: not a stable-datasets cache (no {METADATA_FILE})"]
    try:
        split.fetch_shard_list(metadata)
    except CacheError as exc:
        return [str(exc)]
    problems = shard_cache.check_local_copies(split.store, split.key(metadata.attempt), files_of(metadata))
    for item in files_of(metadata):
        key = split.key(metadata.attempt, item.path)
        with tempfile.TemporaryDirectory() as scratch:
            try:
                size, sha = split.store.download(key, Path(scratch) / "object")
            except StorageError as exc:
                problems.append(str(exc))
                continue
        if size != item.num_bytes:
            problems.append(f"{split.store.url(key)}: {size} bytes, expected {item.num_bytes}")
        elif item.sha256 and sha != item.sha256:
            problems.append(f"{split.store.url(key)}: sha256 {sha}, expected {item.sha256}")
    if not problems:
        try:
            backend, _ = open_remote_backend(split.url, storage_options)
            counted, stored = backend.stored_row_counts()
            backend.release_pin()
        except Exception as exc:
            return [f"{split.url}: cannot be read ({type(exc).__name__}: {exc})"]
        if counted != stored:
            problems.append(f"{split.url}: holds {counted} rows, {METADATA_FILE} says {stored}")
    return problems


def pinned_here(split: RemoteSplit, attempt: str) -> bool:
    """An open dataset or stream on this node reads this attempt (its local folder's metadata, or its stream pin,
    is flocked)."""
    directory = shard_cache.attempt_dir(split.store, split.key(attempt))
    return ((directory / METADATA_FILE).is_file() and build_in_use(directory)) or shard_cache.stream_reading(directory)


def _owner_gone(split: RemoteSplit, attempt: str) -> bool:
    data = split.store.get(split.key(attempt, ATTEMPT_RECORD))
    try:
        record = json.loads(data) if data else None
        return bool(record) and record["host"] == socket.gethostname() and not process_alive(int(record["pid"]))
    except (ValueError, KeyError, TypeError):
        return False


def abandoned_attempts(root: RemoteRoot, max_age_seconds: float) -> list[tuple[str, RemoteSplit, str]]:
    """(kind, split, attempt) for every attempt prune may remove (see the module docstring)."""
    now = time.time()
    found = []
    for objects in scan(root).values():
        split = RemoteSplit(root.store, objects.prefix)
        current = None
        if objects.metadata is not None:
            try:
                metadata = split.read_metadata()
            except CacheError:
                continue  # a damaged commit: leave its attempts for a human (verify names the problem)
            current = metadata.attempt if metadata else None
        building = None
        if objects.lease is not None:
            data = root.store.get(split.key(LEASE_FILE))
            try:
                record = json.loads(data) if data else None
            except ValueError:
                record = None
            if not lease_is_stale(record, now):
                building = record.get("attempt")
        for attempt, items in objects.attempts.items():
            if attempt in (current, f"{ATTEMPTS}/{building}") or pinned_here(split, attempt):
                continue
            marker = next((o for o in items if o.key.endswith(f"/{SUPERSEDED}")), None)
            if marker is not None:
                if now - marker.modified > max_age_seconds:
                    found.append(("superseded attempt", split, attempt))
            elif now - max(o.modified for o in items) > max_age_seconds or _owner_gone(split, attempt):
                found.append(("abandoned attempt", split, attempt))
    return found


def _live_lease_attempt(split: RemoteSplit) -> str | None:
    """The attempt a live lease names (a build in progress), else None."""
    data = split.store.get(split.key(LEASE_FILE))
    try:
        record = json.loads(data) if data else None
    except ValueError:
        return None
    if lease_is_stale(record) or not isinstance(record.get("attempt"), str):
        return None
    return f"{ATTEMPTS}/{record['attempt']}"


def remove_remote_cache(split: RemoteSplit) -> None:
    """Unpublish a cache: `_metadata.json` goes first (no new reader finds it), then its objects.

    Attempts an open dataset on this node pins are marked superseded instead, for a later prune. A build in
    progress (a live lease) keeps its lease and its attempt: it publishes a whole cache when it is done.
    """
    split.store.delete([split.key(METADATA_FILE)])
    building = _live_lease_attempt(split)
    attempts: dict[str, list[str]] = {}
    others = []
    for item in split.store.list(split.prefix + "/"):
        match = _ATTEMPT_KEY.match(item.key)
        if match and match.group("split") == split.prefix:
            attempts.setdefault(f"{ATTEMPTS}/{match.group('id')}", []).append(item.key)
        elif item.key.rpartition("/")[0] == split.prefix and not (building and item.key.endswith(f"/{LEASE_FILE}")):
            others.append(item.key)
    keys = list(others)
    for attempt, attempt_keys in attempts.items():
        if attempt == building:
            continue
        if pinned_here(split, attempt):
            split.store.put_bytes(split.key(attempt, SUPERSEDED), json.dumps({"at": time.time()}).encode())
        else:
            keys += attempt_keys
    split.store.delete(keys)


def remote_entry_for(url: str, storage_options: dict[str, Any] | None = None) -> RemoteEntry:
    split, metadata, _ = open_remote_split(url, storage_options)
    info = split.store.head(split.key(METADATA_FILE))
    return RemoteEntry(split.url, split, metadata, info.modified if info else time.time())


__all__ = ["RemoteEntry", "abandoned_attempts", "find_remote_caches", "parse_remote_metadata", "remote_entry_for",
           "remove_attempt", "remove_remote_cache", "scan", "verify_remote"]
