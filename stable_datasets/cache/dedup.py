"""Identical files stored once on a local cache root: hard links to one copy.

Before a build is published, each of its shard files is looked up by its sha256 in
`<root>/.shared-files/<first two hex digits>/<sha256>`. A file found there with the same size
takes the shard's place as a hard link (same inode, so the bytes are on disk once); a file not
found there is linked into it, for the builds that follow. A version bump that writes the same
rows, a config change that leaves a split as it was, or a `select` of everything then costs no
new space. Removing one cache removes only its names: every other cache keeps its links, and
the shared copy goes when `prune` finds that only the store holds it (one link left).

A stored copy is read back and checked against its sha256 before a new build links to it, so a
copy damaged in place is replaced, never spread. A hard link cannot be half made, and removing
a name never changes the inode others hold, so a prune racing a build is safe: whoever links
last keeps the content alive. Where links are not possible (another filesystem, a filesystem
without them) the shard simply stays a copy.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from loguru import logger

from stable_datasets.cache.publish import file_sha256

SHARED_DIR = ".shared-files"


def store_path(root: Path, sha256: str) -> Path:
    return root / SHARED_DIR / sha256[:2] / sha256


def share_identical_files(root: Path, staging: Path, shards: list[tuple[str, int, str]]) -> int:
    """Link the staging folder's shards (relative path, size, sha256) with identical files already
    under `root`; returns the bytes that were not stored again."""
    saved = 0
    for relative, size, digest in shards:
        if not digest:
            continue
        path = staging / relative
        shared = store_path(root, digest)
        try:
            if shared.is_file() and shared.stat().st_size == size and not os.path.samefile(shared, path) \
                    and file_sha256(shared) != digest:  # the stored copy was damaged in place: replaced by ours
                shared.unlink()
            if shared.is_file() and shared.stat().st_size == size:
                if os.path.samefile(shared, path):
                    continue
                temporary = path.with_name(f".{path.name}.link-{uuid.uuid4().hex[:8]}")
                os.link(shared, temporary)
                os.replace(temporary, path)
                saved += size
            else:
                shared.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileExistsError):  # another build stored it first: next time
                    os.link(path, shared)
        except OSError as exc:  # another filesystem, no links, a store removed meanwhile: keep the copy
            logger.debug("cannot share {} with {}: {}", path, shared, exc)
    return saved



def unshared_files(root: Path) -> list[Path]:
    """Files of the store that no cache links to any more (only the store's own name is left)."""
    found = []
    store = root / SHARED_DIR
    if not store.is_dir():
        return found
    for folder in sorted(store.iterdir()):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            try:
                if path.is_file() and path.stat().st_nlink == 1:
                    found.append(path)
            except OSError:
                continue
    return found
