"""A split's files cut into groups whose edges depend on each file alone, so an edit moves no other edge.

Incremental rebuilds (issue 24 part 5) reuse the parts of a previous cache whose files did not
change. A part is a run of consecutive files; if the runs were cut by position ("every 10 files")
or by running totals of bytes, adding one file would shift every edge after it and no part would
be reused. Here a file ends its group when a hash of its path, read as a number in [0, 1), is
below `size / target_bytes` (at least `1 / max_files`): whether a file is an edge depends on its
own path and size only. An edited, added or removed file therefore changes at most the group it
is in and the one after (when it was, or becomes, an edge); every other group has the same files
as before, and its part is reused.

Expected group sizes: about `target_bytes` of files, and at most about `max_files` small files.
Standard library only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

#: bytes of input per group, on average (a group of larger files holds fewer of them)
TARGET_BYTES = 2 << 20
#: files per group, on average at most (files under `TARGET_BYTES / MAX_FILES`, 2 KB, are grouped by count)
MAX_FILES = 1024


def is_edge(name: str, size: int, target_bytes: int = TARGET_BYTES, max_files: int = MAX_FILES) -> bool:
    """Whether the file `name` (of `size` bytes) ends its group: a property of the file alone."""
    draw = int.from_bytes(hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
    chance = max(size / max(target_bytes, 1), 1 / max(max_files, 1))
    return draw < chance * 2**64


def content_groups(names: Sequence[str], sizes: Sequence[int], target_bytes: int = TARGET_BYTES,
                   max_files: int = MAX_FILES) -> list[tuple[int, int]]:
    """`[lo, hi)` index ranges that cover `names` in order; an edge falls after each file `is_edge` picks
    (and after the last)."""
    if len(names) != len(sizes):
        raise ValueError(f"{len(names)} names but {len(sizes)} sizes")
    groups: list[tuple[int, int]] = []
    start = 0
    for index, (name, size) in enumerate(zip(names, sizes)):
        if index == len(names) - 1 or is_edge(name, size, target_bytes, max_files):
            groups.append((start, index + 1))
            start = index + 1
    return groups


def incremental_groups(paths: Sequence[Any], num_jobs: int,
                       target_bytes: int = TARGET_BYTES) -> list[tuple[int, int]] | None:
    """`content_groups` of files by base name (the same groups wherever their folder is), when they hold two
    groups' worth of bytes and make at least `num_jobs` groups; None otherwise: a few MB are one part built
    whole every time, and too few groups leave the dividing to the caller."""
    if len(paths) < 2:
        return None
    sizes = [file_size(p) for p in paths]
    if sum(sizes) < 2 * target_bytes:
        return None
    groups = content_groups([os.path.basename(os.fspath(p)) for p in paths], sizes, target_bytes)
    return groups if len(groups) >= num_jobs else None


def file_size(path: Any) -> int:
    """A local file's size; 0 for anything that is not one (a URL, a missing file)."""
    try:
        return os.path.getsize(path)
    except (OSError, TypeError, ValueError):
        return 0
