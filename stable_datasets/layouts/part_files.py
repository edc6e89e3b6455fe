"""Where a layout's merge finds the files of the parts it joins.

A merge does two things with a part's files: it makes some of them files of the cache under their
final names (shards renumbered, Lance data files under `data.lance/data/`), and it reads a few small
ones (a part's video records). On one disk both are plain file operations (`ON_DISK`). In a Ray build
on an object-store root the parts are on the store, and the driver must not bring their bytes through
itself: there `place` only notes which object of the store the cache file is, for the publish to copy
it server-side, and `local` downloads just the small file asked for (write.remote_parts.StoreParts).
The layouts' merges are written once against this seam, so a merge on the store and one on disk list
the same files with the same sizes and checksums (both come from the part records).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stable_datasets.write.parts import PartResult

#: the key of a merge's extra that lists the cache files each part became: the write path records it, so a later
#: build can reuse those parts (write.reuse)
PART_FILES_KEY = "part_files"


class PartFiles(Protocol):
    """The files of the parts a merge joins (paths of a part's files are relative to its folder)."""

    def place(self, staging: Path, part: PartResult, relative: str, name: str) -> None:
        """Make the part's file `relative` the cache's file `name` (relative to `staging`)."""

    def local(self, staging: Path, part: PartResult, relative: str) -> Path:
        """The part's file `relative` on this disk, to read (a small file: a merge reads nothing big)."""

    @property
    def on_disk(self) -> bool:
        """True when every part's files are on this disk (a merge may then read any of them)."""


class _OnDisk:
    """Parts in their folders of the staging directory: placing a file is a rename."""

    on_disk = True

    def place(self, staging: Path, part: PartResult, relative: str, name: str) -> None:
        os.replace(part.folder(staging) / relative, staging / name)

    def local(self, staging: Path, part: PartResult, relative: str) -> Path:
        return part.folder(staging) / relative


ON_DISK: PartFiles = _OnDisk()
