"""Building and opening caches whose root is on an object store (the protocol: storage.publish)."""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import uuid
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.cache.builds import BuildPin, opened, pin_current, remove_tree
from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.env import env_choice
from stable_datasets.errors import CacheError
from stable_datasets.layouts import layout_module
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.layouts.checked import parse_metadata, read_published
from stable_datasets.layouts.open import open_backend
from stable_datasets.storage import shard_cache
from stable_datasets.storage.lease import Lease
from stable_datasets.storage.publish import (
    ATTEMPTS,
    ETAGS,
    RemoteSplit,
    files_of,
    missing_objects,
    parse_remote_metadata,
    publish_attempt,
    remove_attempt,
)
from stable_datasets.storage.resolve import open_store
from stable_datasets.storage.root import RemoteRoot
from stable_datasets.storage.store import LocalWriteError, ObjectStore, local_writes
from stable_datasets.urls import ObjectURL

#: "in_place" (default): random access reads a remote Lance cache on the store; "download": its files come into
#: the local shard cache like Arrow shards, and reads cost what a local cache's cost
REMOTE_LANCE_ENV = "STABLE_DATASETS_REMOTE_LANCE"
REMOTE_LANCE_MODES = ("in_place", "download")


def remote_lance_mode() -> str:
    return env_choice(REMOTE_LANCE_ENV, REMOTE_LANCE_MODES, "in_place")


def valid_remote(split: RemoteSplit, expected_fingerprint: str) -> bool:
    """A published cache of this fingerprint whose objects are all on the store (one listing): else it is built
    again (a cache whose objects were deleted would fail every reader on every node, and never heal)."""
    try:
        metadata = split.read_metadata()
    except CacheError as exc:
        logger.warning("ignoring unusable cache {}: {}", split.url, exc)
        return False
    if metadata is None or metadata.fingerprint != expected_fingerprint:
        return False
    try:
        split.fetch_shard_list(metadata)
    except CacheError as exc:
        logger.warning("rebuilding {}: {}", split.url, exc)
        return False
    missing, _ = missing_objects(split, metadata.attempt, metadata)
    if missing:
        logger.warning("rebuilding {}: {} of its objects are missing from the store (first: {})", split.url,
                       len(missing), split.store.url(split.key(metadata.attempt, missing[0])))
        return False
    return True


def prepare_remote_split(root: RemoteRoot, relative: str, fingerprint: str, *, force: bool,
                         build: Callable[[Path], Mapping[str, str] | None], lock_timeout: float | None = None) -> str:
    """Make sure `<root>/<relative>` holds a published cache of `fingerprint`; its URL.

    `build(directory)` runs the local write path into `directory` (under the root's local work
    folder); what it publishes there is uploaded, committed, then removed locally (its shards
    are moved into the local shard cache, so a read right after needs no download). It may return
    {path of a file of the cache: key of an object under this split's `attempts/` that is that file}
    (a Ray build's parts, which its nodes uploaded): those files are not in the folder (the driver never
    downloaded them); they are copied on the store, their sizes checked there before the commit, and
    their attempts are removed once the split is published.
    """
    split = RemoteSplit(root.store, root.key(relative))
    if not force and valid_remote(split, fingerprint):
        return split.url
    local = root.local_dir / relative
    local.parent.mkdir(parents=True, exist_ok=True)
    # The lease keeps builders of different nodes apart. Builders of one node share `local` (its staging and
    # resume journal), so they also take its local lock: a builder that stalled past its lease must not find
    # its staging folder reset under it by the one that took the lease over.
    with Lease(root.store, split.prefix, timeout=lock_timeout) as lease, \
            exclusive_lock(local.parent / f".{local.name}.remote-build.lock", timeout=lock_timeout):
        if not force and valid_remote(split, fingerprint):
            return split.url
        replace = force or split.metadata_text() is not None  # a damaged commit is replaced, under the lease
        copies = build(local) or {}
        pin, metadata = _read_built(local, set(copies))
        try:
            published, won = publish_attempt(split, pin.directory, metadata, lease.attempt, replace=replace,
                                             copies=copies)
            if won:
                _keep_as_shard_cache(root, split, pin.directory, published, set(copies))
        finally:
            opened(pin)  # the local build is consumed here: no pin kept since its publish (cache.builds)
            pin.release()
            remove_tree(local)
        _remove_sources(split, copies.values())
        logger.info("{} {} rows to {}", "published" if won else "another builder published", published.num_rows,
                    split.url)
    return split.url


def _read_built(local: Path, on_store: Set[str]) -> tuple[BuildPin, CacheMetadata]:
    """The pinned build in `local` and its checked metadata: every file it lists is there at its size, except
    those `on_store` (copied there by the publish, which checks their sizes on the store)."""
    if not on_store:
        return read_published(local)
    pin = pin_current(local)
    try:
        metadata = parse_metadata(pin.read_text(), pin.directory / METADATA_FILE)
        for item in files_of(metadata):
            path = pin.directory / item.path
            size = path.stat().st_size if path.is_file() else None
            if item.path not in on_store and size != item.num_bytes:
                raise CacheError(f"{path}: built file is {'missing' if size is None else f'{size} bytes'} but "
                                 f"{METADATA_FILE} records {item.num_bytes} bytes; nothing was published")
    except BaseException:
        pin.release()
        raise
    return pin, metadata


def _remove_sources(split: RemoteSplit, keys: Iterable[str]) -> None:
    """The attempts (`<split>/attempts/<id>/`) the copied objects came from, once they are of no further use."""
    inside = split.key(ATTEMPTS) + "/"
    for attempt in sorted({inside + key[len(inside):].split("/", 1)[0] for key in keys if key.startswith(inside)}):
        remove_attempt(split, attempt[len(split.prefix) + 1:])


def _keep_as_shard_cache(root: RemoteRoot, split: RemoteSplit, build_dir: Path, metadata: CacheMetadata,
                         on_store: Set[str] = frozenset()) -> None:
    """The files just uploaded become the local shard cache's copies (same bytes, already verified); those
    copied on the store (`on_store`) were never here: a reader downloads them when it needs them."""
    target = shard_cache.attempt_dir(root.store, split.key(metadata.attempt))
    in_place = {f.path for f in layout_module(metadata.layout).Backend.in_place_files(metadata)} \
        if root.store.lance_location("") is not None else set()
    try:
        target.mkdir(parents=True, exist_ok=True)
        for item in files_of(metadata):
            if item.path in in_place or item.path in on_store:
                continue  # read in place from the store, or not on this disk
            (target / item.path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(build_dir / item.path, target / item.path)
        write_local_metadata(target, metadata)
    except OSError as exc:  # only a warm-up: a reader downloads what is not here
        logger.debug("could not keep the built shards in the local shard cache: {}", exc)


def write_local_metadata(directory: Path, metadata: CacheMetadata | str) -> None:
    """The `_metadata.json` of a remote attempt in its local shard-cache folder (marks the folder as an attempt's)."""
    text = metadata if isinstance(metadata, str) else json.dumps(metadata.to_dict(), indent=2, sort_keys=True)
    path = directory / METADATA_FILE
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return
    temporary = directory / f".{METADATA_FILE}.{uuid.uuid4().hex[:8]}"
    try:
        with local_writes():
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, path)
    except LocalWriteError as exc:
        temporary.unlink(missing_ok=True)
        raise shard_cache.local_write_error(exc) from None


def open_remote_split(url: str, storage_options: dict[str, Any] | None = None
                      ) -> tuple[RemoteSplit, CacheMetadata, str]:
    """(the split, its checked metadata, the metadata's text); CacheError when nothing is published there."""
    parsed = ObjectURL.parse(url)
    split = RemoteSplit(open_store(parsed, storage_options), parsed.key)
    text = split.metadata_text()
    if text is None:
        raise CacheError(f"{split.url}: not a stable-datasets cache (no {METADATA_FILE})")
    metadata = parse_remote_metadata(text, split.store.url(split.key(METADATA_FILE)))
    _refuse_copied(split, metadata)
    return split, split.fetch_shard_list(metadata), text


def _refuse_copied(split: RemoteSplit, metadata: CacheMetadata) -> None:
    """A `_metadata.json` copied from another cache names an attempt that is not under this prefix: say that, not
    that its objects were deleted. Checked (one listing) only when its fingerprint is not in the prefix, where
    every builder publishes."""
    if metadata.fingerprint in split.prefix.split("/") or split.store.list(split.key(metadata.attempt) + "/"):
        return
    raise CacheError(f"{split.store.url(split.key(METADATA_FILE))}: describes another cache ({metadata.builder_name} "
                     f"'{metadata.split}', fingerprint {metadata.fingerprint}) and its {metadata.attempt} has no "
                     f"objects here: a {METADATA_FILE} copied from elsewhere; remove it (stable-datasets rm "
                     f"{split.url}) and build or copy the whole cache")


def open_remote_backend(url: str, storage_options: dict[str, Any] | None = None,
                        read_options: dict[str, Any] | None = None) -> tuple[LayoutBackend, CacheMetadata]:
    """The backend of a published remote cache, read through the local shard cache (the layout's
    `in_place_files`, Lance data, are read in place on the store unless $STABLE_DATASETS_REMOTE_LANCE is
    "download"), with its metadata.

    The attempt named by `_metadata.json` now is pinned locally while the backend lives, so
    neither eviction nor `prune` on this node removes its files.
    """
    split, metadata, text = open_remote_split(url, storage_options)
    store, attempt_key = split.store, split.key(metadata.attempt)
    in_place_files = {f.path for f in layout_module(metadata.layout).Backend.in_place_files(metadata)}
    in_place = store.lance_location(attempt_key) if in_place_files and remote_lance_mode() == "in_place" else None
    local = shard_cache.attempt_dir(store, attempt_key)
    local.mkdir(parents=True, exist_ok=True)
    write_local_metadata(local, text)
    pin = BuildPin.hold(local)
    try:
        for item in files_of(metadata):
            if in_place is not None and item.path in in_place_files:
                continue
            shard_cache.fetch(store, f"{attempt_key}/{item.path}", local / item.path, item)
        if in_place is not None:
            _check_in_place(split, metadata, in_place_files)
        shard_cache.evict()
        backend = open_backend(local, metadata, read_options, in_place=in_place)
        backend.mirror_of(RemoteOrigin(store, attempt_key, tuple(sorted(in_place_files)) if in_place else ()))
        return backend, metadata
    finally:
        if pin is not None:
            pin.release()  # the backend holds its own pin


@dataclass(frozen=True)
class RemoteOrigin:
    """Where the local folder of a remote cache's backend came from: a backend unpickled on a machine that
    lacks the folder (a Ray task of `to_ray` on another node) fetches the files into that machine's own
    shard cache. The store pickles as its URL and options (ObjectStore.__reduce__)."""

    store: ObjectStore
    attempt_key: str
    in_place: tuple[str, ...] = ()  # paths read in place on the store, never fetched

    @property
    def split_prefix(self) -> str:
        """The key prefix of the split this attempt belongs to (`<split>/attempts/<id>` -> `<split>`)."""
        return self.attempt_key.rsplit(f"/{ATTEMPTS}/", 1)[0]

    def localize(self, metadata: CacheMetadata) -> Path:
        local = shard_cache.attempt_dir(self.store, self.attempt_key)
        with local_writes():
            local.mkdir(parents=True, exist_ok=True)
        RemoteSplit(self.store, self.split_prefix).fetch_shard_list(metadata)  # its list first, then the shards
        for item in files_of(metadata):
            if item.path not in self.in_place:
                shard_cache.fetch(self.store, f"{self.attempt_key}/{item.path}", local / item.path, item)
        write_local_metadata(local, metadata)  # last: its presence says the files are here
        return local


def _check_in_place(split: RemoteSplit, metadata: CacheMetadata, in_place_files: set[str]) -> None:
    """Every object read in place is on the store with its recorded size and ETag (one listing, no download)."""
    prefix = split.key(metadata.attempt) + "/"
    folder = posixpath.commonpath([posixpath.dirname(path) for path in in_place_files])
    found = {o.key[len(prefix):]: o for o in split.store.list(prefix + (f"{folder}/" if folder else ""))}
    etags = metadata.extra.get(ETAGS)
    etags = etags if isinstance(etags, dict) else {}
    for item in metadata.shards:
        if item.path not in in_place_files:
            continue
        listed = found.get(item.path)
        size = None if listed is None else listed.size
        if listed is not None and listed.etag and etags.get(item.path) not in (None, listed.etag):
            raise CacheError(f"{split.store.url(prefix + item.path)}: object changed after it was published (ETag "
                             f"{listed.etag}, {METADATA_FILE} records {etags[item.path]}); rebuild the cache with "
                             "download_mode='force_rebuild'")
        if size is None:
            raise CacheError(f"{split.store.url(prefix + item.path)}: object listed in {METADATA_FILE} is missing "
                             "from the store (deleted after it was published); rebuild the cache with "
                             "download_mode='force_rebuild'")
        if size != item.num_bytes:
            raise CacheError(f"{split.store.url(prefix + item.path)}: object is {size} bytes but {METADATA_FILE} "
                             f"records {item.num_bytes} (changed after it was published); rebuild the cache with "
                             "download_mode='force_rebuild'")
