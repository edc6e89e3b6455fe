"""A content-addressed store for media files that caches own (videos in "path" storage).

Files live in `<fingerprint dir>/.videos/<sha256>.<ext>`, shared by every split of one
fingerprint (so "train+test" resolves one root), written once by hard link or copy and
never modified. A build activates the store with `media_store(dir)`; encoding a path
then places the file there and records it so the split's metadata can list and check it.
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
        def link_or_copy(tmp: Path) -> None:
            try:
                os.link(source, tmp)
            except OSError:  # another filesystem, or links not allowed: copy instead
                shutil.copyfile(source, tmp)

        return self._place(sha256, extension, link_or_copy)

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
