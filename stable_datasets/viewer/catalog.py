"""The caches a viewer shows: listed from the cache root, named by short ids, opened on demand.

An id is a hash of the cache's folder relative to the root, so it is stable across restarts
and carries no path: requests name caches only by id, looked up in this table, and no part
of a URL is ever joined to a filesystem path (that is the viewer's path-traversal rule).
Caches are opened through the public `open_cache`, once each, and kept open.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_datasets.cache.inventory import CacheEntry, find_caches
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.errors import StableDatasetsError
from stable_datasets.layouts.checked import read_metadata
from stable_datasets.load import open_cache
from stable_datasets.manage.inventory import annotate

#: how long a listing is reused before the root is walked again
LIST_SECONDS = 5.0


class UnknownCache(StableDatasetsError, LookupError):
    """A cache id that names no cache under the root."""


def cache_id(root: Path, directory: Path) -> str:
    """12 hex digits naming a cache folder under `root`."""
    try:
        relative = directory.relative_to(root).as_posix()
    except ValueError:
        relative = directory.as_posix()
    return hashlib.sha256(relative.encode()).hexdigest()[:12]


#: file names an `inputs` text names before "+N more"
SHOWN_FILES = 3


def _recorded_files(inputs: dict[str, Any], split: str) -> tuple[list[str], int]:
    """(the names of the data files a loader recorded for `split`, or for every split, and how many there are):
    the `input_files` of a loader's fingerprint, whose entries are (path, size, version)."""
    recorded = (inputs.get("input_files") or {}).get("data_files") or {}
    groups = [recorded[split]] if isinstance(recorded.get(split), dict) else list(recorded.values())
    names: list[str] = []
    count = 0
    for group in groups:
        if not isinstance(group, dict):
            continue
        entries = [e for e in group.get("entries") or [] if e]
        count += int(group.get("files") or len(entries))
        names += [Path(str(e[0])).name for e in entries]
    return names, count


def _inputs(entry: CacheEntry) -> str:
    """What made a cache, in a few words: its data files by name (`a.csv, b.csv +3 more`), its builder's script,
    or its parent cache; never a loader's class, which says nothing about which files were read."""
    m = entry.metadata
    inputs = m.fingerprint_inputs
    names, count = _recorded_files(inputs, m.split)
    if not count:
        files = inputs.get("data_files") or inputs.get("files")
        if isinstance(files, dict):
            files = [f for group in files.values() for f in (group if isinstance(group, list) else [group])]
        if isinstance(files, list) and files:
            names, count = [Path(str(f)).name for f in files], len(files)
    if count:
        shown = ", ".join(names[:SHOWN_FILES]) or f"{count} file{'s' if count != 1 else ''}"
        more = count - min(len(names), SHOWN_FILES) if names else 0
        return shown + (f" +{more} more" if more > 0 else "")
    if inputs.get("parent"):
        return "map of another cache"
    if m.builder_name == "in_memory":
        return f"data in memory ({m.config_name})"
    source = m.builder_source or ""
    if source and ":" not in source:  # a builder script's path: its file name
        return Path(source).name
    return f"{m.builder_name} builder"


@dataclass
class Listed:
    id: str
    entry: CacheEntry

    def to_dict(self) -> dict[str, Any]:
        m = self.entry.metadata
        return {"id": self.id, "name": m.builder_name, "config": m.config_name, "version": m.version,
                "split": m.split, "layout": m.layout, "rows": m.num_rows, "bytes": self.entry.size,
                "status": self.entry.status, "age_seconds": round(self.entry.age_seconds),
                "created_at": m.created_at, "fingerprint": m.fingerprint, "inputs": _inputs(self.entry),
                "features": m.features, "card": _card(m.info)}


def _card(info: dict[str, Any] | None) -> dict[str, Any]:
    """The dataset's card: what its builder says of it (description, homepage, license, citation, the rows each
    split must have), as recorded in the cache; empty fields left out."""
    fields = ("description", "homepage", "license", "citation", "num_examples")
    return {k: (info or {}).get(k) for k in fields if (info or {}).get(k)}


class Catalog:
    """The caches under one local root, by id; datasets opened once and shared by the server's threads."""

    def __init__(self, root: Path):
        self.root = Path(root).expanduser().absolute()
        self._lock = threading.Lock()
        self._listed: dict[str, Listed] = {}
        self._listed_at = 0.0
        self._open: dict[str, StableDataset] = {}

    def caches(self) -> list[Listed]:
        """Every published cache under the root (walked again after a few seconds)."""
        with self._lock:
            if time.monotonic() - self._listed_at > LIST_SECONDS:
                listed = {}
                entries = find_caches(self.root, read=read_metadata)
                annotate(entries)  # current, superseded, stale... as `stable-datasets ls` says
                for entry in entries:
                    key = cache_id(self.root, entry.directory)
                    listed[key] = Listed(key, entry)
                self._listed, self._listed_at = listed, time.monotonic()
            return list(self._listed.values())

    def get(self, key: str) -> Listed:
        found = {c.id: c for c in self.caches()}.get(key)
        if found is None:
            raise UnknownCache(f"no cache with id {key!r} under {self.root}")
        return found

    def dataset(self, key: str) -> StableDataset:
        """The cache's dataset, opened once (a cache republished meanwhile is seen after a restart)."""
        listed = self.get(key)
        with self._lock:
            if key not in self._open:
                self._open[key] = open_cache(listed.entry.directory)
            return self._open[key]
