"""Per-build directories: a published cache never changes under a reader.

Each publish of `<fp>/<split>` renames its staging directory to a new folder
`<fp>/<split>@<build id>` that is never modified again, then swaps the symlink
`<fp>/<split> -> <split>@<build id>` with one atomic `rename`. A reader resolves the
link once and reads only inside the build folder it found, so it gets the old build or
the new one, whole, and so do its DataLoader workers when they reopen files by path.

A reader pins its build: it holds a shared `flock` on the build's `_metadata.json` for as
long as the dataset lives. A superseded build is removed only by whoever takes the
exclusive lock on that file without waiting (after a publish, by `prune`, by `rm`); a build
in use is left for a later prune. A build this process just published, or found published by
a reuse check, stays pinned until this process opens it (`hold_until_opened`, `opened`), so
another process's eviction cannot take it in between. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import threading
import time
import uuid
from pathlib import Path

from loguru import logger

from stable_datasets.errors import CacheError

METADATA_FILE = "_metadata.json"  # cache.metadata imports this module, so the name is repeated here
BUILD_MARK = "@"  # never produced by paths.split_folder_name, so `<split>@<id>` cannot be another split's folder
_BUILD_NAME = re.compile(r"^(?P<base>.+)@(?P<id>[0-9a-f]{16})$")
TRASH_PREFIX = ".trash-"  # what is being deleted
_RESOLVE_ATTEMPTS = 50
_MAX_AWAITING_OPEN = 256  # pins of builds published or found but not opened yet (one file descriptor each)


def new_build_dir(final_dir: Path) -> Path:
    """A fresh build folder beside `final_dir` (ids sort by time, so the newest lists last)."""
    build_id = f"{time.time_ns() // 1000:013x}{os.urandom(2).hex()[:3]}"  # microseconds, then 12 random bits
    return final_dir.parent / f"{final_dir.name}{BUILD_MARK}{build_id}"


def build_base(path: Path) -> str | None:
    """The published name a build folder belongs to (`train` for `train@0123...`), else None."""
    match = _BUILD_NAME.match(path.name)
    return match.group("base") if match else None


def published_path(directory: Path) -> Path:
    """The stable path of a cache (its link) given the build folder a reader resolved."""
    base = build_base(directory)
    return directory.parent / base if base else directory


def current_build(final_dir: Path) -> Path:
    """The build folder `final_dir` points to now (a plain directory is its own build)."""
    try:
        target = os.readlink(final_dir)
    except OSError:  # not a link: a directory published before per-build folders, or nothing
        return final_dir
    return final_dir.parent / target


def point_to(final_dir: Path, build_dir: Path) -> None:
    """Make `final_dir` a link to `build_dir` with one atomic rename (readers never see it missing)."""
    link = final_dir.parent / f".{final_dir.name}.link-{uuid.uuid4().hex[:8]}"
    os.symlink(build_dir.name, link)
    try:
        if final_dir.is_dir() and not final_dir.is_symlink():  # an older plain directory: move it out of the way
            trash = final_dir.parent / f"{TRASH_PREFIX}{final_dir.name}-{uuid.uuid4().hex[:8]}"
            os.rename(final_dir, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(link, final_dir)
    except BaseException:
        with contextlib.suppress(OSError):
            link.unlink()
        raise


class BuildPin:
    """A shared lock on a build's `_metadata.json`: while it is held, nobody removes the build."""

    def __init__(self, fd: int, directory: Path):
        self.fd, self.directory = fd, directory

    @classmethod
    def hold(cls, directory: Path) -> BuildPin | None:
        """Pin exactly `directory`; None when it is not (or no longer) a cache."""
        path = directory / METADATA_FILE
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise CacheError(f"{path}: cannot open cache metadata ({exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as exc:  # a filesystem without flock: we read, but cannot keep others from removing
            logger.debug("cannot lock {} ({}); reading without a pin", path, exc)
        try:
            info = os.fstat(fd)
            if os.stat(path).st_ino == info.st_ino:
                _mark_used(path, info.st_mtime_ns)
                return cls(fd, directory)
        except OSError:
            pass
        os.close(fd)  # removed while we waited for the lock
        return None

    def read_text(self) -> str:
        """The pinned `_metadata.json` (read through the pinned file, whatever the path shows now)."""
        with os.fdopen(os.dup(self.fd), "rb") as fh:
            fh.seek(0)
            data = fh.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:  # damaged bytes: the same CacheError as damaged JSON, so it is rebuilt
            raise CacheError(f"{self.directory / METADATA_FILE}: invalid cache metadata: not UTF-8 text "
                             f"({exc})") from None

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.release()


_awaiting_open: dict[tuple[int, int], BuildPin] = {}  # by the pinned metadata file's (device, inode)
_awaiting_lock = threading.Lock()


def _identity(pin: BuildPin) -> tuple[int, int] | None:
    try:
        info = os.fstat(pin.fd)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def hold_until_opened(pin: BuildPin) -> None:
    """Keep `pin` until this process opens its build (`opened`): between a publish (or a reuse check that
    found the cache) and the open that pins it as a reader, another process's eviction under a cache limit
    would otherwise see a cache nobody uses. A build that is never opened keeps its pin until the process
    ends, or until `_MAX_AWAITING_OPEN` newer ones push it out."""
    key = _identity(pin)
    if key is None:
        pin.release()
        return
    with _awaiting_lock:
        previous = _awaiting_open.pop(key, None)
        _awaiting_open[key] = pin
        extra = max(0, len(_awaiting_open) - _MAX_AWAITING_OPEN)
        oldest = [_awaiting_open.pop(k) for k in list(_awaiting_open)[:extra]]
    for stale in ([previous] if previous is not None else []) + oldest:
        stale.release()


def opened(pin: BuildPin) -> None:
    """The build `pin` holds is open now (its backend pins it): drop the pin `hold_until_opened` kept."""
    key = _identity(pin)
    with _awaiting_lock:
        held = _awaiting_open.pop(key, None) if key is not None else None
    if held is not None:
        held.release()


def _mark_used(path: Path, mtime_ns: int) -> None:
    """Record that a reader opened this build: the access time of its `_metadata.json` (its modification
    time stays). It is what "last use" and the least-recently-used eviction go by; inventories read the
    file without touching it (see cache.metadata). Someone else's cache just keeps its old time."""
    with contextlib.suppress(OSError):
        os.utime(path, ns=(time.time_ns(), mtime_ns))


def pin_current(final_dir: Path) -> BuildPin:
    """Resolve `final_dir` to its build and pin it; a removal racing with us just means resolving again."""
    for _ in range(_RESOLVE_ATTEMPTS):
        build = current_build(final_dir)
        pin = BuildPin.hold(build)
        if pin is not None:
            return pin
        if build == final_dir or current_build(final_dir) == build:  # nothing newer to try
            break
    raise CacheError(f"{final_dir}: not a stable-datasets cache (no {METADATA_FILE})")


def _open_for_exclusive_lock(path: Path) -> int:
    """Read-write where we may: where flock is emulated with POSIX locks (NFS), an exclusive lock needs it."""
    try:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def remove_build_if_unused(build_dir: Path) -> bool:
    """Remove a build nobody has pinned (True), or leave it (False): never waits for readers."""
    fd = None
    try:
        fd = _open_for_exclusive_lock(build_dir / METADATA_FILE)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        pass  # no metadata: nobody can have pinned it
    except OSError:  # pinned by a reader (or the filesystem cannot tell us): keep it
        if fd is not None:
            os.close(fd)
        return False
    try:
        trash = build_dir.parent / f"{TRASH_PREFIX}{build_dir.name}-{uuid.uuid4().hex[:8]}"
        os.rename(build_dir, trash)  # under the exclusive lock: a reader that pins later sees it gone
    except OSError as exc:
        logger.debug("cannot remove superseded build {}: {}", build_dir, exc)
        return False
    finally:
        if fd is not None:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)
    return True


def lock_is_held(path: Path) -> bool:
    """Whether some process holds a shared flock on `path` now (a pin; a probe: the answer may change right
    after). A missing file is held by nobody."""
    try:
        fd = _open_for_exclusive_lock(path)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases the probe's lock


def build_in_use(build_dir: Path) -> bool:
    """Whether a reader pins `build_dir` now (a probe: the answer may change right after)."""
    return lock_is_held(build_dir / METADATA_FILE)


def superseded_builds(final_dir: Path) -> list[Path]:
    """Build folders of `final_dir` that its link does not point to."""
    current = current_build(final_dir).name
    try:
        names = os.listdir(final_dir.parent)
    except FileNotFoundError:
        return []
    return sorted(final_dir.parent / n for n in names
                  if n != current and build_base(Path(n)) == final_dir.name)


def remove_superseded(final_dir: Path) -> list[Path]:
    """Remove the superseded builds of `final_dir` that no reader pins; return those left in use."""
    return [b for b in superseded_builds(final_dir) if not remove_build_if_unused(b)]


def remove_cache_if_unused(final_dir: Path) -> bool:
    """Remove a published cache (its link, then its builds) only if no reader pins the build it points to
    (True); else leave all of it (False). Decided under the build's exclusive lock, taken before the link
    goes: a reader that pinned the build in the meantime keeps a cache it can still open by its path, and
    one that pins after sees it gone. A link re-pointed meanwhile (a new publish) is put back, untouched."""
    if not final_dir.is_symlink():
        return remove_tree(final_dir)
    build = current_build(final_dir)
    fd = None
    try:
        fd = _open_for_exclusive_lock(build / METADATA_FILE)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        pass  # a link to nothing: nobody can have pinned it
    except OSError:
        if fd is not None:
            os.close(fd)
        return False
    try:
        moved = final_dir.parent / f"{TRASH_PREFIX}{final_dir.name}.link-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(final_dir, moved)
        except FileNotFoundError:
            return False  # removed by someone else
        if os.readlink(moved) != build.name:  # republished since we looked: that build is not ours to judge
            if not os.path.lexists(final_dir):
                os.rename(moved, final_dir)
            else:
                moved.unlink()
            return False
        moved.unlink()
        if build.is_dir():
            trash = build.parent / f"{TRASH_PREFIX}{build.name}-{uuid.uuid4().hex[:8]}"
            os.rename(build, trash)
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        if fd is not None:
            os.close(fd)
    for older in superseded_builds(final_dir):
        remove_build_if_unused(older)
    return True


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
