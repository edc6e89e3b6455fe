"""Staging directories and the atomic renames that publish a cache.

A build writes into a hidden staging directory beside its final place, fsyncs every file
and the directory, renames it to a new build folder and swaps the cache's link to it.
Readers see no cache, or a complete one that never changes under them (cache.builds).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stable_datasets.cache.builds import BuildPin, hold_until_opened, new_build_dir, point_to, remove_superseded

STAGING_PREFIX = ".staging-"
OWNER_FILE = "_owner"  # {"host", "pid", "started"} of the process writing a staging directory


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_staging_dir(final_dir: Path) -> Path:
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging = final_dir.parent / f"{STAGING_PREFIX}{final_dir.name}-{tag}"
    staging.mkdir()
    return staging


def file_sha256(path: Path, chunk_size: int = 8 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    """Flush a written file's data to the disk (before a rename or a record that names it makes it count)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: fsyncs in flight at once: a filesystem journal commits concurrent fsyncs together (ext4: ~10x fewer commits
#: for a folder of shards linked from an earlier cache, whose inodes each changed)
FSYNC_THREADS = 8


def _fsync_all(paths: list[Path]) -> None:
    if len(paths) < 2:
        for path in paths:
            fsync_path(path)
        return
    with ThreadPoolExecutor(min(FSYNC_THREADS, len(paths))) as pool:
        list(pool.map(fsync_path, paths))


def share_with_group(path: Path) -> None:
    """Published files are group-readable (dirs group-searchable) whatever the umask says.

    Special bits (a setgid folder's, so new files keep the cache's group) are kept. Files
    of another user (a build of theirs we resume) are left as they are: only the owner may
    chmod, and they made them readable under the same rule.
    """
    info = path.stat()
    if info.st_uid != os.geteuid():
        return
    is_dir = stat.S_ISDIR(info.st_mode)
    extra = stat.S_IRGRP | (stat.S_IXGRP if is_dir else 0)
    mode = (0o777 if is_dir else 0o666) & ~current_umask() | extra | (stat.S_IMODE(info.st_mode) & 0o7000)
    if mode != stat.S_IMODE(info.st_mode):
        os.chmod(path, mode)


def publish(staging: Path, final_dir: Path) -> Path:
    """fsync and share everything in `staging`, then make it the build `final_dir` points to.

    `staging` becomes a new, never modified build folder `<final_dir>@<id>`; the link
    `final_dir` is swapped to it with one rename (see cache.builds). Superseded builds that
    no reader pins are removed. Returns the build folder.

    The build is pinned before its link exists and stays pinned until this process opens it
    (cache.builds.hold_until_opened): another process's eviction never takes a cache just published.
    """
    files, folders = [], []
    for dirpath, _dirnames, filenames in os.walk(staging):
        for name in filenames:
            path = Path(dirpath) / name
            share_with_group(path)
            files.append(path)
        share_with_group(Path(dirpath))
        folders.append(Path(dirpath))
    _fsync_all(files)  # files first, then the folders that name them
    _fsync_all(folders)
    build = new_build_dir(final_dir)
    pin = BuildPin.hold(staging)  # the same file once renamed: the lock follows it
    try:
        os.rename(staging, build)
    except BaseException:
        if pin is not None:
            pin.release()
        raise
    if pin is not None:
        pin.directory = build
        hold_until_opened(pin)
    point_to(final_dir, build)
    fsync_path(final_dir.parent)
    remove_superseded(final_dir)
    return build


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
