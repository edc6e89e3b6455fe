"""A size limit for a local cache root: after a publish past it, the least recently used caches that
no process has open are evicted, one log line each.

The limit is `STABLE_DATASETS_CACHE_LIMIT` (or `cache_limit=`): bytes such as `200GB`, `1.5TiB`,
`500000000`, or a share of the disk holding the root such as `20%`. "Used" is when a reader last
opened the cache (cache.builds marks it on the metadata's access time); a cache in use is pinned and
never removed; the caches of the build that just published are never evicted by it, nor by another
process before it opens them (cache.builds.hold_until_opened). An open dataset
keeps serving what it opened (its build stays until it is released), and a later load of an evicted
cache rebuilds it. Standard library only (plus loguru).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

from stable_datasets.cache.builds import build_in_use, current_build, published_path, remove_cache_if_unused
from stable_datasets.cache.dedup import store_path
from stable_datasets.cache.index import IndexedCache, cache_files, indexed_caches, record_removal
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.env import env_setting
from stable_datasets.errors import CacheError, ConfigurationError

LIMIT_VARIABLE = "STABLE_DATASETS_CACHE_LIMIT"
_SIZE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[kmgtp]?i?b?)\s*$", re.IGNORECASE)
_SHARE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*%\s*$")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


@dataclass(frozen=True)
class CacheLimit:
    """At most `num_bytes`, or at most `share` (0..1] of the disk the root is on; `text` as given."""

    text: str
    num_bytes: int | None = None
    share: float | None = None

    def resolve(self, root: Path) -> int:
        """The limit in bytes for `root` (a share is of its disk's total size)."""
        if self.num_bytes is not None:
            return self.num_bytes
        probe = root
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        return int(shutil.disk_usage(probe).total * (self.share or 0.0))


def parse_limit(value: str | int) -> CacheLimit:
    """`200GB` (powers of 1000), `200GiB` (of 1024), `500000000` (bytes), `20%` (of the disk)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 200GB or a share of the disk such as 20%, got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"a cache limit must be at least 1 byte, got {value}")
        return CacheLimit(str(value), num_bytes=value)
    text = str(value)
    if match := _SHARE.match(text):
        share = float(match["n"]) / 100
        if not 0 < share <= 1:
            raise ValueError(f"a share of the disk must be in (0%, 100%], got {text!r}")
        return CacheLimit(text, share=share)
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"expected a size such as 200GB, 1.5TiB or 500000000, or a share of the disk such as 20%, "
                         f"got {text!r}")
    unit = match["unit"].lower()
    if unit in ("i", "ib") or (unit.endswith("i") and not unit.endswith("ib")):
        raise ValueError(f"unknown unit in {text!r}; use B, KB, MB, GB, TB (or KiB, MiB, GiB, TiB)")
    base = 1024 if "i" in unit else 1000
    num_bytes = int(float(match["n"]) * base ** _POWERS[unit[:1] if unit[:1] in _POWERS else ""])
    if num_bytes < 1:
        raise ValueError(f"a cache limit must be at least 1 byte, got {text!r}")
    return CacheLimit(text, num_bytes=num_bytes)


def configured_limit(given: str | int | CacheLimit | None = None) -> CacheLimit | None:
    """`cache_limit=` when given, else $STABLE_DATASETS_CACHE_LIMIT, else None (no limit)."""
    if isinstance(given, CacheLimit):
        return given
    if given is not None:
        try:
            return parse_limit(given)
        except ValueError as exc:
            raise ConfigurationError(f"cache_limit={given!r}: {exc}") from None
    return env_setting(LIMIT_VARIABLE, parse_limit, "must be a size such as 200GB or a share of the disk such as 20%")


def last_used(directory: Path) -> float:
    """When a reader last opened the cache (the access time its pins mark), else when it was published."""
    try:
        info = (current_build(directory) / METADATA_FILE).stat()
    except OSError:
        return 0.0
    return max(info.st_atime, info.st_mtime)


def _usage(entries: list[IndexedCache]) -> tuple[int, dict[tuple[str, int], int]]:
    """The bytes `entries` hold, a file several hold counted once, and how many hold each file."""
    users: dict[tuple[str, int], int] = {}
    for entry in entries:
        for key in set(entry.files):
            users[key] = users.get(key, 0) + 1
    return sum(size for _, size in users), users


def evict_over_limit(root: Path, limit: CacheLimit, keep: Path) -> list[Path]:
    """Remove least recently used caches under `root` until it is within `limit`; never the caches under
    `keep` (the folder of the build that just published) nor one a process has open. The caches removed.
    A file several caches share counts once, and frees its bytes only with the last cache that holds it.

    Totals and candidates come from the root's index (cache.index: one file read, not one per cache); a
    candidate's own `_metadata.json` is read before it is removed, and what it holds now is what counts."""
    allowed = limit.resolve(root)
    entries = indexed_caches(root)
    total, users = _usage(entries)
    if total <= allowed:
        return []
    gone = [e.directory for e in entries if not os.path.lexists(e.directory)]  # removed by hand: a stat each
    if gone:
        vanished = set(gone)
        entries = [e for e in entries if e.directory not in vanished]
        total, users = _usage(entries)
    keep = published_path(keep)
    candidates = sorted((e for e in entries if keep != e.directory and keep not in e.directory.parents),
                        key=lambda e: last_used(e.directory))
    evicted: list[Path] = []

    def forget(files: set[tuple[str, int]]) -> int:
        freed = 0
        for key in files:
            users[key] -= 1
            if users[key] == 0:
                freed += key[1]
        return freed

    for entry in candidates:
        if total <= allowed:
            break
        try:
            metadata = CacheMetadata.read(entry.directory)  # the cache as it is, not as the index remembers it
        except (CacheError, OSError):
            if not os.path.lexists(entry.directory):  # removed by other means: it holds nothing any more
                total -= forget(set(entry.files))
                gone.append(entry.directory)
            continue
        files = set(cache_files(entry.directory, metadata))
        if files != set(entry.files):  # republished since it was indexed: count what it holds now
            total -= forget(set(entry.files))
            for key in files:
                users[key] = users.get(key, 0) + 1
                total += key[1] if users[key] == 1 else 0
            if total <= allowed:
                break
        if build_in_use(current_build(entry.directory)):
            continue  # a process has it open
        if not remove_cache_if_unused(entry.directory):  # a reader pinned it meanwhile: all of it stays
            continue
        freed = forget(files)
        for key in files:
            if users[key] == 0 and _SHA256.fullmatch(key[0]):
                _drop_shared(root, key[0])
        total -= freed
        evicted.append(entry.directory)
        logger.info("evicted {} ({} bytes freed, {} {} '{}'): the cache root is over its limit {} ({} bytes)",
                    entry.directory, freed, metadata.builder_name, metadata.config_name, metadata.split, limit.text,
                    allowed)
    record_removal(root, evicted + gone)
    if total > allowed:
        logger.warning("the cache root {} holds {} bytes, over its limit {} ({} bytes): what is left is in use or "
                       "was just built", root, total, limit.text, allowed)
    return evicted


def refuse_if_cannot_fit(root: Path, limit: CacheLimit, needed: int, target: Path) -> None:
    """Refuse a build whose size is known before it starts (`needed` bytes) when it cannot fit under `limit`:
    larger than the limit itself, or than the limit minus the caches in use (which eviction may not remove).
    Raised before anything is written, so a build that could only end over the limit wastes no work."""
    allowed = limit.resolve(root)
    pinned: dict[tuple[str, int], None] = {}
    if needed <= allowed:
        for entry in indexed_caches(root):
            if build_in_use(current_build(entry.directory)):
                pinned.update(dict.fromkeys(entry.files))
    in_use = sum(size for _, size in pinned)
    if needed <= allowed - in_use:
        return
    held = f", of which {in_use} bytes are caches in use that cannot be evicted" if in_use else ""
    raise CacheError(f"{target}: this build needs about {needed} bytes, which cannot fit under the cache limit "
                     f"{limit.text} ({allowed} bytes{held}); nothing was written. Raise the limit (cache_limit= or "
                     f"${LIMIT_VARIABLE}) or free space (close datasets in use, stable-datasets prune or rm)")


def _drop_shared(root: Path, sha256: str) -> None:
    """The store's copy of a file no cache holds any more (cache.dedup), so its bytes are freed now."""
    path = store_path(root, sha256)
    with contextlib.suppress(OSError, ValueError):
        if path.stat().st_nlink == 1:
            path.unlink()


def root_of(split_dir: Path) -> Path | None:
    """The cache root of a split folder `<root>/<name>/<config>/<version>/<fingerprint>/<split>` (see cache.paths);
    None for a folder too shallow to be one (callers then leave root-wide work, eviction and sharing, alone)."""
    parents = Path(split_dir).absolute().parents
    return parents[4] if len(parents) > 4 else None
