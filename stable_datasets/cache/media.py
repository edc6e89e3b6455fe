"""A content-addressed store for media files that caches own (videos in "path" storage).

Files live in `<fingerprint dir>/.videos/<sha256>.<ext>`, shared by every split of one
fingerprint (so "train+test" resolves one root), written once as a copy (a copy-on-write
clone where the filesystem has them) and never modified. A build activates the store with
`media_store(dir)`; encoding a path then places the file there and records it so the split's
metadata can list and check it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEDIA_DIR = ".videos"  # hidden: no split folder name starts with a dot


@dataclass
class MediaStore:
    root: Path  # the fingerprint directory; stored paths are relative to it
    used: dict[str, int] = field(default_factory=dict)  # relative path -> size

    def put_file(self, source: Path, sha256: str, extension: str) -> str:
        """Store a copy of `source`: a copy-on-write clone where the filesystem offers one, else a
        plain copy. Never a hard link: the cache's file would then be the user's file, so an edit
        in place would change the cache, and setting the cache's mode would change the user's."""
        return self._place(sha256, extension, lambda tmp: clone_or_copy(source, tmp))

    def put_bytes(self, data: bytes, sha256: str, extension: str) -> str:
        return self._place(sha256, extension, lambda tmp: tmp.write_bytes(data))

    def _place(self, sha256: str, extension: str, write: Callable[[Path], Any]) -> str:
        """Put content at `videos/<sha256>.<ext>` once (temp name, then rename) and record its use."""
        relative = f"{MEDIA_DIR}/{sha256}.{extension}"
        target = self.root / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
            write(tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        self.used[relative] = target.stat().st_size
        return relative


FICLONE = 0x40049409  # Linux ioctl: make `dst` share `src`'s extents copy-on-write (btrfs, XFS, ...)


def clone_or_copy(source: Path, target: Path) -> None:
    """Copy `source` to a new file `target` (contents only: the source's mode is not read or set)."""
    with open(source, "rb") as src, open(target, "xb") as dst:
        try:
            import fcntl

            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
            return
        except (ImportError, OSError):  # no clones here (ext4, tmpfs, another filesystem, not Linux)
            pass
        shutil.copyfileobj(src, dst, 8 << 20)


_current: contextvars.ContextVar[MediaStore | None] = contextvars.ContextVar("media_store", default=None)


def current_media_store() -> MediaStore | None:
    return _current.get()


@contextlib.contextmanager
def media_store(root: Path) -> Iterator[MediaStore]:
    store = MediaStore(root)
    token = _current.set(store)
    try:
        yield store
    finally:
        _current.reset(token)
