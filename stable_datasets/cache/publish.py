"""Staging directories and the single atomic rename that publishes a cache.

A build writes into a hidden staging directory beside its final place, fsyncs every file
and the directory, and renames once. Readers see either no cache or a complete one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import uuid
from pathlib import Path

STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
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


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def share_with_group(path: Path) -> None:
    """Published files are group-readable (dirs group-searchable) whatever the umask says."""
    mode = path.stat().st_mode
    extra = stat.S_IRGRP | (stat.S_IXGRP if stat.S_ISDIR(mode) else 0)
    os.chmod(path, (0o777 if stat.S_ISDIR(mode) else 0o666) & ~current_umask() | extra)


def publish(staging: Path, final_dir: Path) -> None:
    """fsync and share everything in `staging`, then make it `final_dir` with one rename."""
    for dirpath, _dirnames, filenames in os.walk(staging):
        for name in filenames:
            path = Path(dirpath) / name
            _fsync_path(path)
            share_with_group(path)
        share_with_group(Path(dirpath))
        _fsync_path(Path(dirpath))
    trash = None
    if final_dir.exists():
        trash = final_dir.parent / f"{TRASH_PREFIX}{final_dir.name}-{uuid.uuid4().hex[:8]}"
        os.rename(final_dir, trash)
    os.rename(staging, final_dir)
    _fsync_path(final_dir.parent)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
