"""What the caches under a root are, which of them are superseded, and what `prune` may remove.

One rule: the caches built for the same thing, that is the same `made_by["spec"]` (builder by
source, config with absolute data-file paths, storage format and layout options; for a `map`, the
same parent, function and options) and the same split, are versions of one lineage, and one of
them is *current*, the others *superseded*. Which one is decided against the inputs as they are on
disk now: the builder (or loader), asked today, names a fingerprint, and the cache of that
fingerprint is current even when a newer one was built from an edit since reverted. When none
matches, the newest is *stale* (a script, helper or input file was edited and nothing was rebuilt
yet); when the builder cannot be asked, the newest is current. A map (or column operation) result
follows its parent: superseded when the parent is, *orphaned* when the parent is gone. Caches
written before `made_by` was recorded are judged by asking their builder, as before, and say
*unknown* when it cannot be asked.

`verify` lives with the layouts (layouts.open.verify_cache), since it opens a cache.

Nothing here deletes a cache that a live process has open: readers pin the build they read
(a shared `flock` that dies with the process, see cache.builds), and prune skips a pinned build.
Builders are asked once per lineage, never once per cache.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stable_datasets.builder.source_identity import remembering_sources
from stable_datasets.cache.builds import build_in_use, current_build
from stable_datasets.cache.inventory import CacheEntry
from stable_datasets.cache.limit import last_used as local_last_used
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.identity.fingerprint import fingerprint
from stable_datasets.layouts.checked import read_metadata
from stable_datasets.manage.ownership import builder_fingerprint_now, cache_status, is_map_cache

CURRENT, SUPERSEDED, STALE, ORPHANED, UNKNOWN = "current", "superseded", "stale", "orphaned", "unknown"
_DERIVED = ("map", "column_op")  # results that live beside their parent and follow it
_DURATION = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[smhdw]?)\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s`, `2w`, or a bare number of days, in seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"expected a duration such as 7d, 12h, 30m or 2w, got {text!r}")
    return float(match["n"]) * _SECONDS[match["unit"]]


def kind_of(metadata: CacheMetadata) -> str:
    """builder, loader, in_memory, map, column_op; "" for a cache that does not record it."""
    return str(metadata.made_by.get("kind", ""))


def lineage(metadata: CacheMetadata) -> str | None:
    """The key that every version of one dataset split shares (see the module docstring); None when
    the cache records no spec (in-memory data, caches written before it was recorded)."""
    spec = metadata.made_by.get("spec")
    if not isinstance(spec, dict):
        return None
    return fingerprint({"spec": spec, "split": metadata.split})


def created(entry: Any) -> tuple[str, float, str]:
    """When the cache was published, for ordering versions: its recorded time (to the second), then
    its metadata file's modification time (finer), then its path for a stable order."""
    modified = getattr(entry, "modified", None)
    if modified is None:
        try:
            modified = (current_build(Path(entry.directory)) / METADATA_FILE).stat().st_mtime_ns / 1e9
        except OSError:
            modified = 0.0
    return entry.metadata.created_at, float(modified), str(entry.directory)


def last_used(entry: Any) -> float:
    """When a process last opened the cache (readers mark it, see cache.limit.last_used), else when it
    was published. Remote caches: when they were published."""
    modified = getattr(entry, "modified", None)
    if modified is not None:
        return float(modified)
    return local_last_used(Path(entry.directory))


def in_use(entry: Any) -> bool:
    """Whether a live process has this (local) cache open now."""
    if not isinstance(entry.directory, Path):
        return False
    return build_in_use(current_build(entry.directory))


def annotate(entries: Sequence[Any], ask_builders: bool = True) -> None:
    """Set `status` on every entry (see the module docstring). `ask_builders=False` skips importing
    builders: the newest of each lineage is then "current" whatever its builder would say today."""

    with remembering_sources():  # one read of each builder's code, however many configs it has here
        _annotate(entries, ask_builders)


def _annotate(entries: Sequence[Any], ask_builders: bool) -> None:
    groups: dict[str, list[Any]] = defaultdict(list)
    by_path = {str(e.directory): e for e in entries}
    memo: dict[Any, Any] = {}  # builders by source, fingerprints by config: each asked once
    for entry in entries:
        key = lineage(entry.metadata)
        if key is not None and kind_of(entry.metadata) not in _DERIVED:
            groups[key].append(entry)
        elif not entry.metadata.made_by:
            entry.status = cache_status(entry, memo) if ask_builders else UNKNOWN
        elif kind_of(entry.metadata) not in _DERIVED:
            entry.status = CURRENT  # in-memory data: nothing newer can replace it
    for members in groups.values():
        members.sort(key=created, reverse=True)
        now = None
        if ask_builders and kind_of(members[0].metadata) in ("builder", "loader"):
            now = builder_fingerprint_now(members[0].metadata, memo)  # one spec: one answer for the lineage
        matching = [e for e in members if e.metadata.fingerprint == now]
        if matching:  # the inputs as they are now: the newest cache of them is current, however old it is
            chosen, status = matching[0], CURRENT
        else:  # no answer (newest is current), or edited since the newest build (stale)
            chosen, status = members[0], CURRENT if now is None else STALE
        for entry in members:
            entry.status = status if entry is chosen else SUPERSEDED
    derived = [e for e in entries if kind_of(e.metadata) in _DERIVED]
    derived_groups: dict[str, list[Any]] = defaultdict(list)
    for entry in derived:
        derived_groups[lineage(entry.metadata) or str(entry.directory)].append(entry)
    for members in derived_groups.values():
        members.sort(key=created, reverse=True)
        for position, entry in enumerate(members):
            parent = str(entry.metadata.made_by.get("parent", ""))
            parent_entry = by_path.get(parent)
            if parent_entry is None and isinstance(entry.directory, Path) and not _exists(Path(parent)):
                entry.status = ORPHANED
            elif parent_entry is not None and parent_entry.status in (SUPERSEDED, STALE, ORPHANED):
                entry.status = SUPERSEDED
            else:
                entry.status = CURRENT if position == 0 or entry.metadata.made_by.get("kind") != "map" \
                    else SUPERSEDED


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


@dataclass
class PrunePlan:
    """What `prune` removes (kind, entry) and what it leaves although it would qualify (reason, entry)."""

    remove: list[tuple[str, Any]] = field(default_factory=list)
    kept: list[tuple[str, Any]] = field(default_factory=list)


def plan_prune(entries: Sequence[Any], *, keep_last: int = 1, older_than: float | None = None,
               now: float | None = None, check_in_use: bool = True) -> PrunePlan:
    """Superseded, stale and orphaned caches to remove, newest `keep_last` of each lineage kept (the
    current one counts), only those unused for `older_than` seconds when given, never one in use."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    now = time.time() if now is None else now
    plan = PrunePlan()
    rank: dict[int, int] = {}
    groups: dict[str, list[Any]] = defaultdict(list)
    for entry in entries:
        key = lineage(entry.metadata)
        if key is not None:
            groups[key].append(entry)
    for members in groups.values():
        members.sort(key=created, reverse=True)
        members.sort(key=lambda e: getattr(e, "status", None) != CURRENT)  # stable: the current one counts first
        for position, entry in enumerate(members):
            rank[id(entry)] = position
    reasons = {SUPERSEDED: "superseded cache", STALE: "stale cache", ORPHANED: "map cache of a removed cache"}
    removed: set[str] = set()

    def consider(entry: Any, reason: str, ranked: bool) -> None:
        if ranked and rank.get(id(entry), keep_last) < keep_last:
            plan.kept.append((f"one of the last {keep_last}", entry))
        elif older_than is not None and now - last_used(entry) < older_than:
            plan.kept.append(("used recently", entry))
        elif check_in_use and in_use(entry):
            plan.kept.append(("in use by a live process", entry))
        else:
            plan.remove.append((reason, entry))
            removed.add(str(entry.directory))

    derived = [e for e in entries if kind_of(e.metadata) in _DERIVED]
    for entry in entries:
        if kind_of(entry.metadata) not in _DERIVED and entry.status in reasons:
            consider(entry, reasons[entry.status], ranked=entry.status == SUPERSEDED)
    for entry in derived:  # after their parents: a result whose parent goes, goes too
        if str(entry.metadata.made_by.get("parent", "")) in removed:
            consider(entry, "map cache of a removed cache", ranked=False)
        elif entry.status in reasons:
            consider(entry, reasons[entry.status], ranked=entry.status == SUPERSEDED)
    return plan


def derived_of(entry: Any, entries: Iterable[Any]) -> list[Any]:
    """The map and column results made from `entry` (by their recorded parent, or as its `.map-` siblings)."""
    path = str(entry.directory)
    return [e for e in entries if e is not entry and (e.metadata.made_by.get("parent") == path or (
        not e.metadata.made_by and is_map_cache(Path(str(e.directory)))
        and str(e.directory).startswith(path + ".map-")))]


@dataclass
class Totals:
    caches: int = 0
    bytes: int = 0
    rows: int = 0


def totals(entries: Iterable[Any]) -> tuple[Totals, dict[str, Totals]]:
    """The sum over every cache, and per dataset (builder or loader name; in-memory data by constructor).
    A file stored once for several caches (cache.dedup: same sha256, one inode) counts once in each sum."""
    whole = Totals()
    per: dict[str, Totals] = defaultdict(Totals)
    seen: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for entry in entries:
        for bucket in (whole, per[dataset_name(entry.metadata)]):
            bucket.caches += 1
            bucket.rows += entry.metadata.num_rows
            files = seen[id(bucket)]
            for shard in entry.metadata.shards:
                key = (shard.sha256, shard.num_bytes) if shard.sha256 else (f"{entry.directory}/{shard.path}", 0)
                if key not in files:
                    files.add(key)
                    bucket.bytes += shard.num_bytes
    return whole, dict(sorted(per.items()))


def dataset_name(metadata: CacheMetadata) -> str:
    if kind_of(metadata) == "in_memory":
        return f"{metadata.builder_name}/{metadata.config_name}"
    return metadata.builder_name


def describe_inputs(metadata: CacheMetadata) -> list[str]:
    """What made the cache, one line each, for `ls --long`; what is missing for older caches."""
    made = metadata.made_by
    if not made:
        return ["made by: not recorded (written before stable-datasets recorded what made a cache)"]
    kind = made.get("kind", "?")
    lines = []
    if kind in ("builder", "loader"):
        lines.append(f"made by: {kind} {made.get('builder')} ({made.get('source')})")
        if made.get("script"):
            lines.append(f"script: {made['script']}")
        for key in ("data_files", "data_dir"):
            if made.get(key):
                lines.append(f"{key}: {made[key]}")
        for split, files in (made.get("data_files_resolved") or {}).items():
            shown = files.get("files", [])
            more = files.get("count", len(shown)) - len(shown[:3])
            lines.append(f"files ({split}): {', '.join(shown[:3])}" + (f" and {more} more" if more > 0 else ""))
    elif kind in _DERIVED:
        what = made.get("function") or made.get("operation")
        lines.append(f"made by: {kind} {what} of {made.get('parent')}")
    elif kind == "in_memory":
        lines.append(f"made by: {made.get('constructor')} (in memory)" +
                     (f" in {made['script']}" if made.get("script") else ""))
    else:
        lines.append(f"made by: {kind}")
    return lines


def entry_for(directory: Path) -> CacheEntry:
    """The inventory entry of one cache folder."""
    return CacheEntry(directory, read_metadata(directory))

