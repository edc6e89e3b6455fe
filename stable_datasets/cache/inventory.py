"""What is on disk: every published cache under a root, whether it is current, and checks.

Used by the command line (`stable-datasets ls/verify/prune/rm`) and usable from Python.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_datasets.cache.builds import (
    TRASH_PREFIX,
    build_base,
    build_in_use,
    current_build,
    pin_current,
    published_path,
    remove_build_if_unused,
    superseded_builds,
)
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.cache.publish import OWNER_FILE, STAGING_PREFIX
from stable_datasets.errors import CacheError


@dataclass
class CacheEntry:
    directory: Path
    metadata: CacheMetadata
    status: str = "unknown"  # "current", "stale" (the builder now has another fingerprint), "unknown"

    @property
    def size(self) -> int:
        return sum(s.num_bytes for s in self.metadata.shards)

    @property
    def age_seconds(self) -> float:
        return time.time() - (self.directory / METADATA_FILE).stat().st_mtime

    def to_dict(self) -> dict[str, Any]:
        m = self.metadata
        return {"path": str(self.directory), "name": m.builder_name, "config": m.config_name, "version": m.version,
                "split": m.split, "layout": m.layout, "rows": m.num_rows, "bytes": self.size,
                "fingerprint": m.fingerprint, "created_at": m.created_at, "status": self.status}


def find_caches(root: Path, unreadable: list[tuple[Path, str]] | None = None) -> list[CacheEntry]:
    """Every published cache (a folder with _metadata.json) under `root`, staging excluded.

    A cache published as a link to its current build is listed once, by its link; superseded
    builds are not listed (see `find_superseded`). Caches whose metadata cannot be read are
    skipped, or appended to `unreadable` as (directory, problem) when it is given.
    """
    entries = []
    if not root.is_dir():
        return entries
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((STAGING_PREFIX, TRASH_PREFIX))
                       and not d.endswith(".lance") and d != "downloads"]
        if METADATA_FILE in filenames:
            dirnames[:] = []
            directory = Path(dirpath)
            if build_base(directory) is not None:
                if current_build(published_path(directory)) != directory:
                    continue  # superseded
                directory = published_path(directory)
            try:
                entries.append(CacheEntry(directory, CacheMetadata.read(directory)))
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
                       and not d.endswith(".lance") and d != "downloads"]
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
            if name.startswith((STAGING_PREFIX, TRASH_PREFIX)):
                found.append(Path(dirpath) / name)
                dirnames.remove(name)
    return sorted(found)


def staging_is_orphaned(path: Path, max_age_seconds: float) -> bool:
    """A staging folder nobody owns: its pid is dead on this host, or it is older than the limit.

    Staging names end in `-<host>-<pid>-<random>` (see cache.publish.make_staging_dir).
    """
    if path.name.startswith(TRASH_PREFIX) or time.time() - path.stat().st_mtime > max_age_seconds:
        return True
    owner = path / OWNER_FILE
    try:
        if owner.is_file():  # a builder's staging dir (fixed name, resumable)
            info = json.loads(owner.read_text())
            host, pid = info["host"], int(info["pid"])
        else:  # a pid-named staging dir (map caches, extraction)
            head, pid_text, _ = path.name.rsplit("-", 2)
            host, pid = head.rsplit("-", 1)[-1], int(pid_text)
            host = socket.gethostname() if head.endswith(f"-{socket.gethostname()}") else host
    except (ValueError, KeyError, OSError):
        return False
    if host != socket.gethostname():
        return False  # another host's build: only its age can tell
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def verify_cache(directory: Path) -> list[str]:
    """Recompute every checksum and size against _metadata.json, and count the stored rows; the problems."""
    try:
        pin = pin_current(directory)
    except CacheError as exc:
        return [str(exc)]
    try:
        build = pin.directory
        try:
            metadata = CacheMetadata.parse(pin.read_text(), build / METADATA_FILE)
        except CacheError as exc:
            return [str(exc)]
        problems = [p for shard in [*metadata.shards, *metadata.extra_files] if (p := shard.problem(build))]
        if not problems:
            problems.extend(_check_rows(build))
        return problems
    finally:
        pin.release()


def _check_rows(directory: Path) -> list[str]:
    """Open the cache and count its stored rows, whatever _metadata.json says (more or fewer)."""
    from stable_datasets.dataset.open import open_cache

    try:
        counted, stored = open_cache(directory).stored_row_counts()[0]
    except Exception as exc:
        return [f"{directory}: cannot be read ({type(exc).__name__}: {exc})"]
    if counted != stored:
        return [f"{directory}: holds {counted} rows, _metadata.json says {stored}"]
    return []


def remove_tree(path: Path) -> bool:
    """Remove a cache, a build or a staging folder; builds that readers pin stay (False) for a later prune."""
    if build_base(path) is not None and not path.is_symlink():
        return remove_build_if_unused(path)
    if path.is_symlink():  # a cache's link: it goes first, so no new reader finds the builds
        path.unlink()
        in_use = [b for b in superseded_builds(path) if not remove_build_if_unused(b)]
        return not in_use
    shutil.rmtree(path, ignore_errors=True)
    return True
