"""The local shard cache: verified copies of remote shards, bounded in size, shared by the processes of a node.

Files live at `<local base>/shards/<scheme>/<bucket>/<key>`, so an attempt's folder
(`.../<split>/attempts/<id>/`) looks like a local cache: its `_metadata.json` plus the shards
downloaded so far. Rules:

- A shard appears only whole and verified: downloaded beside its place, checked against the
  size and sha256 `_metadata.json` records, then renamed. One process downloads a shard while
  the others wait for it (a `filelock` per shard). A shard that changed or vanished remotely
  is an error naming it; it is never served.
- Attempts are never modified once published, so a verified local copy stays valid.
- Size: `STABLE_DATASETS_LOCAL_CACHE_LIMIT` (bytes, or `500MB`, `20GiB`; default 50 GiB).
  After each open, least recently opened shards are removed until the cache fits, skipping
  attempts that an open dataset pins (the shared `flock` on their `_metadata.json`, see
  cache.builds): the shards a dataset reads stay while it lives, even past the limit.
  A Lance dataset's manifests (`_versions/`, `_transactions/`, a few KB) are not counted nor removed: a
  stream downloads its data files one at a time and reads each through them.
- A stream pins its attempt against `rm` and `prune` (never against eviction: it holds about one
  shard on disk): a shared `flock` on the attempt folder's `.stream.pin` while the stream lives
  (`StreamPin`; a forked DataLoader worker shares its parent's, a spawned one takes its own).
  `rm`/`prune` of this node then mark the attempt superseded instead of deleting the objects the
  stream has yet to download.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
import uuid
from pathlib import Path

import filelock
from loguru import logger

from stable_datasets.cache.builds import build_in_use, lock_is_held
from stable_datasets.cache.metadata import METADATA_FILE, ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.env import env_text
from stable_datasets.errors import CacheError, ConfigurationError, MissingObjectError, StorageError
from stable_datasets.storage.root import local_base
from stable_datasets.storage.store import LocalWriteError, ObjectStore

DEFAULT_LIMIT = 50 << 30
STALE_DOWNLOAD_SECONDS = 3600.0  # a partial download this old belongs to a process that died
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000**2, "mb": 1000**2, "mib": 1 << 20,
          "g": 1000**3, "gb": 1000**3, "gib": 1 << 30, "t": 1000**4, "tb": 1000**4, "tib": 1 << 40}
LANCE_MANIFEST_DIRS = ("_versions", "_transactions")  # of a Lance dataset: tiny, and needed to read any data file
_ATTEMPT_ID = re.compile(r"[0-9a-f]{8,64}")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, name: str = "STABLE_DATASETS_LOCAL_CACHE_LIMIT") -> int:
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ConfigurationError(f"{name}={text!r} is not a size (a number of bytes, or like 500MB, 20GiB)")
    return int(float(match.group(1)) * _UNITS[unit])


def cache_limit() -> int:
    text = env_text("STABLE_DATASETS_LOCAL_CACHE_LIMIT")
    return parse_size(text) if text else DEFAULT_LIMIT


def shard_cache_root() -> Path:
    return local_base() / "shards"


def attempt_dir(store: ObjectStore, attempt_key: str) -> Path:
    """The local folder mirroring a remote attempt prefix."""
    return shard_cache_root() / store.scheme / store.bucket / attempt_key


STREAM_PIN = ".stream.pin"


class StreamPin:
    """A shared `flock` on `<attempt folder>/.stream.pin`: an open stream reads this attempt (see module docstring).
    Released with `release()` or when the process ends."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.fd: int | None = None
        try:
            fd = os.open(directory / STREAM_PIN, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o664)
        except PermissionError:
            fd = os.open(directory / STREAM_PIN, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as exc:  # a filesystem without flock: we read, but cannot keep rm/prune from removing
            logger.debug("cannot lock {} ({}); streaming without a pin", directory / STREAM_PIN, exc)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def stream_reading(directory: Path) -> bool:
    """Whether a stream (of any process of this node) pins the attempt mirrored by `directory` now (a probe)."""
    return lock_is_held(directory / STREAM_PIN)


def split_url_of(directory: Path) -> str | None:
    """The URL of the remote split whose attempt `directory` mirrors (see `attempt_dir`), else None."""
    try:
        parts = directory.relative_to(shard_cache_root()).parts
    except ValueError:
        return None
    if len(parts) < 5 or parts[-2] != "attempts":
        return None
    return f"{parts[0]}://{parts[1]}/{'/'.join(parts[2:-2])}"


def _is_bookkeeping(name: str) -> bool:
    return name == METADATA_FILE or name.startswith(".")


def fetch(store: ObjectStore, key: str, destination: Path, shard: ShardInfo) -> None:
    """Make `destination` a verified copy of object `key` (a no-op when it already is one)."""
    if _present(destination, shard):
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(destination.parent / f".{destination.name}.lock"), mode=0o664):
        if _present(destination, shard):
            return
        temporary = destination.parent / f".{destination.name}.{uuid.uuid4().hex[:8]}.download"
        try:
            try:
                size, digest = store.download(key, temporary)
            except LocalWriteError as exc:
                raise local_write_error(exc) from None
            except MissingObjectError:
                raise CacheError(f"{store.url(key)}: shard listed in {METADATA_FILE} is missing from the store "
                                 "(deleted after it was published); rebuild the cache with "
                                 "download_mode='force_rebuild'") from None
            if size != shard.num_bytes or (shard.sha256 and digest != shard.sha256):
                raise CacheError(f"{store.url(key)}: shard changed since it was published ({size} bytes, sha256 "
                                 f"{digest[:16]}...; {METADATA_FILE} records {shard.num_bytes} bytes, sha256 "
                                 f"{shard.sha256[:16]}...); rebuild the cache with download_mode='force_rebuild'")
            os.replace(temporary, destination)
        finally:
            temporary.unlink(missing_ok=True)


def check_local_copies(store: ObjectStore, attempt_key: str, files: list[ShardInfo]) -> list[str]:
    """Hash this node's copies of an attempt's files (`verify`): opening trusts a copy by its size, as it was
    checked when it was filled. A copy changed since is removed, so the next open downloads it again; one
    line per copy that was bad."""

    problems = []
    directory = attempt_dir(store, attempt_key)
    for item in files:
        path = directory / item.path
        try:
            size = path.stat().st_size
            digest = file_sha256(path) if item.sha256 and size == item.num_bytes else ""
        except FileNotFoundError:
            continue  # not downloaded here: nothing to check
        if size == item.num_bytes and (not item.sha256 or digest == item.sha256):
            continue
        found = f"sha256 {digest[:16]}..." if size == item.num_bytes else f"{size} bytes"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        problems.append(f"{path}: this node's copy of {store.url(f'{attempt_key}/{item.path}')} changed after it was "
                        f"downloaded ({found}; {METADATA_FILE} records {item.num_bytes} bytes, sha256 "
                        f"{item.sha256[:16]}...); removed: the next open downloads it again")
    return problems


def local_write_error(exc: OSError) -> StorageError:
    """The local shard cache could not take a file (a full disk, a file size limit): say so, and what to set."""
    return StorageError(f"cannot write to the local shard cache {shard_cache_root()} ({exc.strerror or exc}: "
                        f"{exc.filename}); free space there, or set STABLE_DATASETS_LOCAL_CACHE_DIR to a folder with "
                        "room (STABLE_DATASETS_LOCAL_CACHE_LIMIT bounds its size)")


def _present(path: Path, shard: ShardInfo) -> bool:
    """A copy is here (only verified copies are ever renamed into place); mark it recently used."""
    try:
        if path.stat().st_size != shard.num_bytes:
            return False
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def evict(limit: int | None = None) -> list[Path]:
    """Remove least recently used shards of unpinned attempts until the cache fits in `limit`; the removed."""
    limit = cache_limit() if limit is None else limit
    root = shard_cache_root()
    if not root.is_dir():
        return []
    with filelock.FileLock(str(root / ".evict.lock"), mode=0o664):
        files: list[tuple[float, int, Path, Path]] = []
        total = 0
        for dirpath, _dirnames, filenames in os.walk(root):
            directory = Path(dirpath)
            owner = _owning_attempt(directory, root)
            if owner is None:
                continue  # not a downloaded attempt: e.g. a local `map` cache made beside one, never evicted
            lance_own = directory.name in LANCE_MANIFEST_DIRS  # a streamed Lance cache's manifests: kept, a few KB
            for name in filenames:
                if name.endswith((".download", ".part")):  # left by a download that was killed
                    with contextlib.suppress(FileNotFoundError):
                        if time.time() - (directory / name).stat().st_mtime > STALE_DOWNLOAD_SECONDS:
                            (directory / name).unlink()
                    continue
                if _is_bookkeeping(name) or lance_own:
                    continue
                path = directory / name
                with contextlib.suppress(FileNotFoundError):
                    info = path.stat()
                    files.append((info.st_mtime, info.st_size, path, owner))
                    total += info.st_size
        if total <= limit:
            return []
        removed: list[Path] = []
        pinned: dict[Path, bool] = {}
        for _mtime, size, path, owner in sorted(files, key=lambda f: f[0]):
            if total <= limit:
                break
            if owner not in pinned:
                pinned[owner] = build_in_use(owner)
            if pinned[owner]:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
                total -= size
        if total > limit:
            logger.warning("the local shard cache {} holds {} bytes, over its limit of {} (STABLE_DATASETS_LOCAL_"
                           "CACHE_LIMIT): the rest is in use by open datasets", root, total, limit)
        return removed


def _owning_attempt(directory: Path, root: Path) -> Path | None:
    """The attempt folder (`.../attempts/<id>`, holding `_metadata.json`) a cached file belongs to, else None."""
    while directory != root and root in directory.parents:
        if (directory / METADATA_FILE).is_file():
            return directory if _ATTEMPT_ID.fullmatch(directory.name) and directory.parent.name == "attempts" else None
        directory = directory.parent
    return None
