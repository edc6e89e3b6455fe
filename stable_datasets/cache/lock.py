"""Inter-process locks around builds and downloads.

`FileLock` (flock) by default; `SoftFileLock` (create-exclusive) for network filesystems
without working flock, switched on by `soft=True` or `STABLE_DATASETS_SOFT_LOCK=1`. Lock
files are never deleted by us while anyone may hold them; they are group-writable so
jobs of one group can share a cache.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import filelock
from loguru import logger

from stable_datasets.env import env_flag, env_number
from stable_datasets.errors import LockTimeoutError

DEFAULT_TIMEOUT = 3600.0


def default_timeout() -> float:
    """`STABLE_DATASETS_LOCK_TIMEOUT` seconds (a number >= 0, or inf), else an hour."""
    return env_number("STABLE_DATASETS_LOCK_TIMEOUT", DEFAULT_TIMEOUT, float, lambda s: s >= 0,  # refuses nan
                      "is not a number of seconds >= 0 (unset it for the default of one hour)")


def _holder(lock_path: Path) -> str:
    try:
        return (lock_path.parent / (lock_path.name + ".owner")).read_text().strip() or "unknown"
    except OSError:
        return "unknown"


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, *, timeout: float | None = None, soft: bool | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path`; log who holds it while waiting."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    soft = env_flag("STABLE_DATASETS_SOFT_LOCK") if soft is None else soft
    timeout = default_timeout() if timeout is None else timeout
    cls = filelock.SoftFileLock if soft else filelock.FileLock
    lock = cls(str(lock_path), mode=0o664)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        logger.info("waiting for lock {} (held by {})", lock_path, _holder(lock_path))
        started = time.monotonic()
        try:
            lock.acquire(timeout=timeout)
        except filelock.Timeout:
            raise LockTimeoutError(
                f"timed out after {timeout:.0f}s waiting for lock {lock_path} (held by {_holder(lock_path)}); "
                "if that process is gone and this is a network filesystem, the lock may be stale"
            ) from None
        logger.debug("acquired {} after {:.1f}s", lock_path, time.monotonic() - started)
    try:
        with contextlib.suppress(OSError):
            owner = lock_path.parent / (lock_path.name + ".owner")
            since = time.strftime("%Y-%m-%d %H:%M:%S")
            owner.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {since}\n")
            os.chmod(owner, 0o664)  # the next holder may be another user of the group
        yield
    finally:
        lock.release()
