"""A cache root in a local (or shared) folder: publish is fsync and one rename, a file lock keeps builders of
one split apart, readers pin the builds they open (cache.builds), and `prune` never removes a pinned one."""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import Any

from stable_datasets.cache import index as cache_index
from stable_datasets.cache.builds import opened, remove_tree
from stable_datasets.cache.dedup import unshared_files
from stable_datasets.cache.folders import is_map_cache, map_caches_of, remove_empty_parents
from stable_datasets.cache.inventory import CacheEntry, find_caches, find_staging, find_superseded, staging_is_orphaned
from stable_datasets.cache.limit import configured_limit, evict_over_limit
from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.layouts.checked import read_metadata, read_published
from stable_datasets.layouts.open import open_backend, verify_cache
from stable_datasets.roots.base import Address, CacheRoot, WriteFor
from stable_datasets.write import JobRunner, build_once
from stable_datasets.write.once import lock_path, published_matches


class LocalRoot(CacheRoot):
    """The cache root `path` (absolute: an open dataset keeps its files after an os.chdir)."""

    def __init__(self, path: Path):
        self.path = self.local_dir = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"LocalRoot({str(self.path)!r})"

    def address(self, directory: Path) -> Path:
        return directory

    def builder_folder(self, builder_folder: str) -> str:
        return str(self.path / builder_folder) + os.sep

    def is_published(self, directory: Path, fingerprint: str) -> bool:
        return published_matches(directory, fingerprint)

    def lock(self, directory: Path, *, timeout: float | None = None, soft: bool | None = None
             ) -> contextlib.AbstractContextManager[Any]:
        return exclusive_lock(lock_path(directory), timeout=timeout, soft=soft)

    def publish(self, directory: Path, fingerprint: str, write_for: WriteFor, runner: JobRunner, *, force: bool,
                lock_timeout: float | None = None, soft_lock: bool | None = None) -> Path:
        if not force and published_matches(directory, fingerprint):
            return directory
        plan, source = write_for(directory)
        build_once(plan, source, runner, checked=True,
                   reuse=None if force else functools.partial(_valid_directory, directory, fingerprint),
                   lock_timeout=lock_timeout, soft_lock=soft_lock)
        return directory

    def open(self, address: Address, read_options: dict[str, Any] | None = None
             ) -> tuple[LayoutBackend, CacheMetadata]:
        # the build the cache's link points to now, pinned; absolute, so a later os.chdir does not lose it
        pin, metadata = read_published(Path(address).expanduser().absolute())
        try:
            backend = open_backend(pin.directory, metadata, read_options)
            opened(pin)  # the pin kept since its publish (or its reuse check) is no longer needed
            return backend, metadata
        finally:
            pin.release()  # the backend holds its own pin on the same build

    def entries(self, unreadable: list[tuple[Any, str]] | None = None) -> list[CacheEntry]:
        return find_caches(self.path, unreadable, read=read_metadata)

    def entry(self, address: Address) -> CacheEntry:
        return CacheEntry(Path(address), read_metadata(Path(address)))

    def note_listed(self, entries: list[Any]) -> None:
        cache_index.rebuild(self.path, entries)  # walked anyway: the limit's index is fresh again

    def remove(self, entries: list[Any], *, dry_run: bool = False) -> list[Path]:
        doomed = list(dict.fromkeys(p for e in entries for p in [e.directory, *map_caches_of(e.directory)]))
        if not dry_run:
            for path in doomed:
                remove_tree(path)
            cache_index.record_removal(self.path, doomed)
            for path in doomed:
                remove_empty_parents(path, self.path)
        return doomed

    def verify(self, address: Address) -> list[str]:
        return verify_cache(Path(address))

    def prune(self, planned: list[tuple[str, Any]], *, dry_run: bool, max_age_seconds: float,
              also: list[tuple[str, Path]] = (), entries: list[Any] = ()
              ) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        root = self.path
        doomed: list[tuple[str, Path]] = [(kind, entry.directory) for kind, entry in planned]
        kept: list[tuple[str, Any]] = []
        for entry in entries:  # caches written before what made them was recorded: by their folder names
            if entry.metadata.made_by or not is_map_cache(entry.directory):
                continue
            parent = entry.directory.with_name(entry.directory.name.split(".map-")[0])
            if not parent.exists() and not parent.is_symlink():
                doomed.append(("map cache of a removed cache", entry.directory))
        for kind, path in list(doomed):
            if kind == "stale cache":
                doomed += [("map cache of a stale cache", m) for m in map_caches_of(path)]
        for build in find_superseded(root):
            doomed.append(("superseded build", build))
        doomed += list(also)
        for staging in find_staging(root):
            if staging_is_orphaned(staging, max_age_seconds):  # a live owner's staging never is
                doomed.append(("orphaned staging", staging))
        doomed = list(dict.fromkeys(doomed))
        emptied: list[Path] = []
        if not dry_run:
            done = []
            for kind, path in doomed:
                removed = remove_tree(path) and not (path.exists() or path.is_symlink())
                if removed:
                    done.append((kind, path))
                elif not os.access(path.parent, os.W_OK):  # another user's cache, or a read-only root
                    kept.append((f"{kind}, not removed: no permission to change {path.parent}", path))
                else:  # a reader pinned it after we looked
                    kept.append(("in use by a live process", path))
            doomed = done
            for _kind, path in doomed:
                emptied += remove_empty_parents(path, root)
            removed = {str(path) for _kind, path in doomed}
            cache_index.rebuild(root, [e for e in entries if str(e.directory) not in removed])
        for path in unshared_files(root):  # after the caches: the copies they were the last to use go too
            if not dry_run:
                try:
                    path.unlink(missing_ok=True)
                except OSError as exc:  # another user's copy in a shared root
                    kept.append((f"stored copy no cache uses, not removed: {exc.strerror or exc}", path))
                    continue
            doomed.append(("stored copy no cache uses", path))
        return doomed + [("empty folder", p) for p in emptied], kept

    def evict(self) -> list[Path]:
        limit = configured_limit()
        return [] if limit is None else evict_over_limit(self.path, limit, self.path / ".nothing-kept")

    def local_path(self, what: str) -> Path:
        return self.path


def _valid_directory(directory: Path, expected_fingerprint: str) -> Path | None:
    """`directory` when it holds a published cache of `expected_fingerprint` (build_once's reuse check)."""
    return directory if published_matches(directory, expected_fingerprint) else None
