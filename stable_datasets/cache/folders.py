"""Folders of a local cache root beside the caches: map caches (`<split>.map-<fingerprint>`), and folders left
empty once their caches are removed. Used by a local root's `remove` and `prune` (roots.local) and the
inventory (manage)."""

from __future__ import annotations

from pathlib import Path

from stable_datasets.cache.paths import SPLITS_FILE

MAP_MARKER = ".map-"  # a map's cache is the folder `<split>.map-<fingerprint>` beside its parent's


def is_map_cache(directory: Path) -> bool:
    return MAP_MARKER in directory.name


def map_caches_of(directory: Path) -> list[Path]:
    """The map caches derived from the split cache `directory` (its siblings `<split>.map-*`)."""
    if is_map_cache(directory) or not directory.parent.is_dir():
        return []
    return sorted(p for p in directory.parent.iterdir()
                  if p.name.startswith(directory.name + MAP_MARKER) and "@" not in p.name)  # not its builds


def _only_idle_bookkeeping(folder: Path) -> list[Path] | None:
    """The files in `folder` if they are all bookkeeping (lock files nobody holds now, the list of
    split names), else None."""
    import filelock

    entries = list(folder.iterdir())
    locks = [p for p in entries if p.name.startswith(".") and p.name.endswith(".lock") and p.is_file()]
    others = [p for p in entries if p.is_file() and (p.name == SPLITS_FILE or (p.name.startswith(".") and
                                                                                 p.name.endswith(".lock.owner")))]
    if len(locks) + len(others) != len(entries):
        return None
    for lock_path in locks:
        lock = filelock.FileLock(str(lock_path))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return None  # a build of this folder is starting
        lock.release()
    return locks + others


def remove_empty_parents(path: Path, root: Path) -> list[Path]:
    """Remove the folders above `path` left empty, up to (not including) `root`; the removed ones.

    A folder holding only bookkeeping that finished builds leave (lock files nobody holds, the
    list of split names) counts as empty. `rmdir` removes only an empty folder, so one that a
    build starts to fill meanwhile stays.
    """
    removed = []
    folder = path.parent
    while folder != root and root in folder.parents:
        try:
            files = _only_idle_bookkeeping(folder)
            if files is None:
                break
            for file in files:
                file.unlink(missing_ok=True)
            folder.rmdir()
        except OSError:
            break
        removed.append(folder)
        folder = folder.parent
    return removed
