"""A per-root index of the published caches, so that a publish under a size limit reads one file, not every cache.

One rule: the index may make the limit's arithmetic cheap, never a deletion unsafe. It lists each
cache of a local root (its folder, the files it holds by content key and size, its names for log
lines); the eviction after a publish (cache.limit) takes the totals and the candidates from it, and
reads a candidate's own `_metadata.json` before removing it, so a cache is only ever removed as it
is, never as the index remembers it.

`<root>/.cache-index.jsonl` is a header line, then one line per event: a cache published ("add",
the last line of a folder wins) or removed ("remove"). Appends and rewrites take `.cache-index.lock`
(an flock, held for one write). It is rebuilt from the caches themselves (`find_caches`) when it is
missing, unreadable, of another format, older than `MAX_AGE_SECONDS` (caches written by an older
version, or removed by hand, are then seen again), and whenever `ls`/`prune` have walked the root
anyway; it is compacted when removed and replaced entries outnumber the live ones. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.cache.inventory import CacheEntry, find_caches
from stable_datasets.cache.metadata import CacheMetadata

INDEX_FILE = ".cache-index.jsonl"
LOCK_FILE = ".cache-index.lock"
FORMAT = 1
#: an index older than this is rebuilt from the caches at the next read (a day)
MAX_AGE_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class IndexedCache:
    """What the limit needs of one cache, as the index recorded it at its publish."""

    directory: Path
    files: tuple[tuple[str, int], ...]  # (sha256, or the file's own path when it has none; bytes)
    name: str = ""
    config: str = ""
    split: str = ""


def cache_files(directory: Path, metadata: CacheMetadata) -> list[tuple[str, int]]:
    """The files a cache holds as its metadata lists them, by content (cache.dedup stores identical shards once);
    files without a checksum by path. Media in the shared store (`../`) are the fingerprint folder's, not its."""
    return [(s.sha256, s.num_bytes) if s.sha256 else (f"{directory}/{s.path}", s.num_bytes)
            for files in ([metadata.shard_list_file] if metadata.shard_list_file else [], metadata.shards,
                          [f for f in metadata.extra_files if not f.path.startswith("..")]) for s in files]


def _line(root: Path, directory: Path, metadata: CacheMetadata) -> dict[str, Any]:
    return {"op": "add", "dir": os.path.relpath(directory, root), "files": cache_files(directory, metadata),
            "name": metadata.builder_name, "config": metadata.config_name, "split": metadata.split}


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _append(root: Path, lines: list[dict[str, Any]]) -> None:
    """Add event lines to an index that exists (a missing one is rebuilt whole by the next reader)."""
    path = root / INDEX_FILE
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    try:
        with _locked(root):
            if not path.is_file():
                return
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(text)
    except OSError as exc:  # a read-only or full disk: the index goes stale, the limit still holds once rebuilt
        logger.debug("cannot update the cache index of {}: {}", root, exc)


def record_publish(root: Path, directory: Path, metadata: CacheMetadata) -> None:
    """A cache was published at `directory` (a later line of the same folder replaces an earlier one)."""
    _append(root, [_line(root, directory, metadata)])


def record_removal(root: Path, directories: list[Path]) -> None:
    if directories:
        _append(root, [{"op": "remove", "dir": os.path.relpath(d, root)} for d in directories])


def rebuild(root: Path, entries: list[CacheEntry] | None = None) -> dict[str, IndexedCache]:
    """Write the index anew from `entries` (a walk of the root when None), atomically; its caches by folder."""
    entries = find_caches(root) if entries is None else entries
    if not root.is_dir():  # no root yet (`ls` of an empty one): nothing to index
        return {}
    writable = os.access(root, os.W_OK)  # another user's root is listed, never written
    lines = [{"op": "header", "format": FORMAT, "rebuilt": time.time()},
             *(_line(root, e.directory, e.metadata) for e in entries)]
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    try:
        if writable:
            with _locked(root):
                temporary = root / f".{INDEX_FILE}.{uuid.uuid4().hex[:8]}"
                temporary.write_text(text, encoding="utf-8")
                os.replace(temporary, root / INDEX_FILE)
    except OSError as exc:
        logger.debug("cannot write the cache index of {}: {}", root, exc)
    return {str(e.directory): _indexed(root, line) for e, line in zip(entries, lines[1:])}


def _indexed(root: Path, line: dict[str, Any]) -> IndexedCache:
    return IndexedCache(directory=root / line["dir"], files=tuple((str(k), int(n)) for k, n in line["files"]),
                        name=str(line.get("name", "")), config=str(line.get("config", "")),
                        split=str(line.get("split", "")))


def _read(root: Path) -> tuple[dict[str, IndexedCache], int, float] | None:
    """The caches the index lists, its number of event lines and when it was rebuilt; None when it must be
    rebuilt."""
    path = root / INDEX_FILE
    try:
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "null")
            if not isinstance(header, dict) or header.get("op") != "header" or header.get("format") != FORMAT \
                    or time.time() - float(header.get("rebuilt", 0)) > MAX_AGE_SECONDS:
                return None
            caches: dict[str, IndexedCache] = {}
            events = 0
            for text in fh:
                if not text.endswith("\n"):
                    break  # a line being written
                line = json.loads(text)
                events += 1
                directory = str(root / line["dir"])
                if line["op"] == "add":
                    caches[directory] = _indexed(root, line)
                elif line["op"] == "remove":
                    caches.pop(directory, None)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return caches, events, float(header["rebuilt"])


def indexed_caches(root: Path) -> list[IndexedCache]:
    """Every cache of `root` as the index lists it: rebuilt from the caches first when it is missing or stale,
    compacted when mostly replaced or removed lines."""
    found = _read(root)
    if found is None:
        return list(rebuild(root).values())
    caches, events, rebuilt = found
    if events > 2 * len(caches) + 1000:
        _compact(root, caches, rebuilt)
    return list(caches.values())


def _compact(root: Path, caches: dict[str, IndexedCache], rebuilt: float) -> None:
    """The index rewritten with its live entries only (its age kept: a rebuild from the caches stays due)."""
    lines = [{"op": "header", "format": FORMAT, "rebuilt": rebuilt},
             *({"op": "add", "dir": os.path.relpath(c.directory, root), "files": [list(f) for f in c.files],
                "name": c.name, "config": c.config, "split": c.split} for c in caches.values())]
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    try:
        with _locked(root):
            current = _read(root)
            if current is None or current[0].keys() != caches.keys():  # appended meanwhile: next time
                return
            temporary = root / f".{INDEX_FILE}.{uuid.uuid4().hex[:8]}"
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, root / INDEX_FILE)
    except OSError as exc:
        logger.debug("cannot compact the cache index of {}: {}", root, exc)
