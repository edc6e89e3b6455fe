"""What is on disk: every published cache under a root, staging left by builds, and removing them.

The storage floor's part of the inventory: it reads only folders and `_metadata.json`. Which
cache is current or superseded and what `prune` removes are the front door's
(`stable_datasets.manage.inventory`); `verify`, which opens a cache, is `layouts.open.verify_cache`.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_datasets.cache.builds import (
    TRASH_PREFIX,
    build_base,
    build_in_use,
    current_build,
    published_path,
)
from stable_datasets.cache.dedup import SHARED_DIR
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.cache.processes import process_alive, process_start_time
from stable_datasets.cache.publish import OWNER_FILE, STAGING_PREFIX
from stable_datasets.errors import CacheError


@dataclass
class CacheEntry:
    directory: Path
    metadata: CacheMetadata
    status: str = "unknown"  # set by manage.inventory.annotate

    @property
    def location(self) -> Path:
        """Where the cache is published (roots.CacheRoot.address): its folder."""
        return self.directory

    @property
    def size(self) -> int:
        return self.metadata.num_bytes

    @property
    def age_seconds(self) -> float:
        return time.time() - (self.directory / METADATA_FILE).stat().st_mtime

    def to_dict(self) -> dict[str, Any]:
        m = self.metadata
        return {"path": str(self.directory), "name": m.builder_name, "config": m.config_name, "version": m.version,
                "split": m.split, "layout": m.layout, "rows": m.num_rows, "bytes": self.size,
                "fingerprint": m.fingerprint, "created_at": m.created_at, "status": self.status}


def find_caches(root: Path, unreadable: list[tuple[Path, str]] | None = None,
                read: Callable[[Path], CacheMetadata] | None = None) -> list[CacheEntry]:
    """Every published cache (a folder with _metadata.json) under `root`, staging excluded.

    A cache published as a link to its current build is listed once, by its link; superseded
    builds are not listed (see `find_superseded`). Caches whose metadata cannot be read are
    skipped, or appended to `unreadable` as (directory, problem) when it is given. `read` reads a folder's
    metadata (`CacheMetadata.read`, its shape only, when None; layouts.checked.read_metadata checks it too).
    """
    read = read or CacheMetadata.read  # looked up now, not when this module was imported
    entries = []
    if not root.is_dir():
        return entries
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((STAGING_PREFIX, TRASH_PREFIX))
                       and not d.endswith(".lance") and d not in ("downloads", SHARED_DIR)]
        if METADATA_FILE in filenames:
            dirnames[:] = []
            directory = Path(dirpath)
            if build_base(directory) is not None:
                if current_build(published_path(directory)) != directory:
                    continue  # superseded
                directory = published_path(directory)
            try:
                entries.append(CacheEntry(directory, read(directory)))
            except CacheError as exc:
                if unreadable is not None:
                    unreadable.append((directory, str(exc)))
    return sorted(entries, key=lambda e: (e.metadata.builder_name, e.metadata.config_name, e.metadata.split,
                                          str(e.directory)))


def find_superseded(root: Path) -> list[Path]:
    """Build folders that their cache's link no longer points to and that no reader pins now."""
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((STAGING_PREFIX, TRASH_PREFIX))
                       and not d.endswith(".lance") and d not in ("downloads", SHARED_DIR)]
        for name in list(dirnames):
            build = Path(dirpath) / name
            if build_base(build) is not None:
                dirnames.remove(name)
                if current_build(published_path(build)) != build and not build_in_use(build):
                    found.append(build)
    return sorted(found)


def find_staging(root: Path) -> list[Path]:
    """Staging and trash folders left by builds that died."""
    if not root.is_dir():
        return []
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        for name in list(dirnames):
            if name == SHARED_DIR:
                dirnames.remove(name)
            elif name.startswith((STAGING_PREFIX, TRASH_PREFIX)):
                found.append(Path(dirpath) / name)
                dirnames.remove(name)
    return sorted(found)


def _staging_owner(path: Path) -> tuple[str, int, float | None] | None:
    """(host, pid, start time if recorded) of the process writing a staging folder, or None.

    A builder's staging folder names its owner in OWNER_FILE; other staging names end in
    `-<host>-<pid>-<random>` (see cache.publish.make_staging_dir).
    """
    owner = path / OWNER_FILE
    try:
        if owner.is_file():
            info = json.loads(owner.read_text())
            started = info.get("started")
            return str(info["host"]), int(info["pid"]), float(started) if started is not None else None
        head, pid_text, _ = path.name.rsplit("-", 2)
        here = socket.gethostname()
        return (here if head.endswith(f"-{here}") else head.rsplit("-", 1)[-1]), int(pid_text), None
    except (ValueError, KeyError, TypeError, AttributeError, OSError):
        return None


def staging_is_orphaned(path: Path, max_age_seconds: float) -> bool:
    """A staging folder nobody writes any more.

    On this host the owner's pid decides, whatever the folder's age: a live owner's staging
    is never orphaned (a long build may run for days), a dead owner's always is, and so is
    one whose pid was reused by a process started after the build. For a build
    on another host (or an owner that cannot be read) only the age can tell: older than
    `max_age_seconds`. Trash folders (left between a publish's rename and its cleanup) are
    always orphaned.
    """
    if max_age_seconds < 0:
        raise ValueError(f"max_age_seconds must be >= 0, got {max_age_seconds}")
    if path.name.startswith(TRASH_PREFIX):
        return True
    owner = _staging_owner(path)
    if owner is not None and owner[0] == socket.gethostname() and owner[1] > 0:
        _, pid, started = owner
        if not process_alive(pid):
            return True
        began = process_start_time(pid) if started is not None else None
        return began is not None and began > started + 5  # the pid now belongs to a newer process
    try:
        return time.time() - path.stat().st_mtime > max_age_seconds
    except FileNotFoundError:  # removed meanwhile (published or cleaned up by its owner)
        return False
