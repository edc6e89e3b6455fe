"""Row counts of data files, remembered per node: a stream of files counts each file once, not per rank or restart.

Opening a stream of data files (loaders.file_stream) needs each unit's rows: a numpy pass over a
JSON Lines or text file's bytes, metadata for Parquet and Arrow, a parse for quoted CSV, tars and
JSON documents. The 8 ranks of a node open the same files, and a restarted job opens them again:
the counts are kept in one small JSON file in this node's local cache folder
(`$STABLE_DATASETS_LOCAL_CACHE_DIR/file-streams/unit-counts.json`), under a file lock held while a
rank counts, so the other ranks of the node wait and then find every count there.

An entry is keyed by the file's local path and what decides how it is cut and counted (the loader,
its config, the unit size); it holds the file's identity when counted ([size, mtime_ns], plus the
remote identity for a downloaded file) and its units ([start, stop, rows] each). A file whose identity
changed is counted again. An entry is checked before it is used: its units must be the whole file, or
ranges that tile the file exactly (`[0, extent)` with no gap or overlap: bytes, or a Parquet file's row
groups) with a count of rows each; any other entry is counted again and replaced, never trusted. At
most MAX_FILES files are kept (the least recently counted go first), so the file stays small; a damaged
or foreign file is ignored (and rewritten).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.storage.root import local_base

#: files whose unit counts are kept per node (the least recently counted are dropped past it)
MAX_FILES = 20_000
FORMAT = 1
FOLDER = "file-streams"
NAME = "unit-counts.json"

Units = list[tuple[Any, Any, int]]


def counts_path() -> Path:
    """This node's counts file."""
    return local_base() / FOLDER / NAME


def counting_key(loader_name: str, config: dict[str, Any], unit_bytes: int) -> str:
    """A hash of what decides how a file is cut into units and counted (besides the file itself)."""
    described = json.dumps([loader_name, config, unit_bytes], sort_keys=True, default=str)
    return hashlib.sha256(described.encode()).hexdigest()[:16]


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0  # not a bool, a float or a string


def tiles(units: list[list[Any]], extent: Callable[[], int]) -> bool:
    """Whether `units` ([start, stop, rows] each) cut a file exactly: one whole-file unit [None, None, rows], or ranges
    in order from 0 to `extent()` each starting where the one before stopped, none empty; every rows a count."""
    if not units or not all(_count(rows) for _, _, rows in units):
        return False
    if len(units) == 1 and units[0][0] is None and units[0][1] is None:
        return True
    bounds = [bound for start, stop, _ in units for bound in (start, stop)]
    if not all(_count(bound) for bound in bounds):
        return False
    edges = bounds[0:1] + bounds[1::2]  # the first start, then every stop
    joined = all(stop == start for stop, start in zip(bounds[1:-1:2], bounds[2::2]))
    return edges[0] == 0 and joined and all(lo < hi for lo, hi in itertools.pairwise(edges)) and edges[-1] == extent()


def _offset(value: Any) -> int | None:
    """A unit's start or stop (bytes, row groups) as JSON keeps it (numpy ints too)."""
    return None if value is None else int(value)


class UnitCounts:
    """The counts file, read once; `get` what is known, `put` what was counted, `save` (under the lock)."""

    def __init__(self, path: Path, key: str):
        self.path, self.key = path, key
        self._files: dict[str, Any] = {}
        self._changed = False
        try:
            loaded = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            logger.warning("ignoring the row counts in {} ({}); counting again", path, exc)
            return
        if isinstance(loaded, dict) and loaded.get("format") == FORMAT and isinstance(loaded.get("files"), dict):
            self._files = loaded["files"]

    def _entry_key(self, path: str) -> str:
        return f"{self.key}:{os.path.abspath(path)}"

    def get(self, path: str, identity: list[Any], extent: Callable[[], int]) -> Units | None:
        """The units of `path` counted when it had `identity`, else None (unknown, the file changed, or units that do
        not tile the file: `extent()` is what they must tile, its bytes or row groups; see `tiles`)."""
        entry = self._files.get(self._entry_key(path))
        if not isinstance(entry, dict) or entry.get("identity") != list(identity):
            return None
        units = entry.get("units")
        if not isinstance(units, list) or not all(isinstance(u, list) and len(u) == 3 for u in units):
            units = None
        if units is None or not tiles(units, extent):
            logger.warning("the remembered row counts of {} in {} do not describe the file; counting it again",
                           path, self.path)
            return None
        return [(start, stop, rows) for start, stop, rows in units]

    def put(self, path: str, identity: list[Any], units: Units) -> None:
        key = self._entry_key(path)
        entry = {"identity": [v if isinstance(v, str) else int(v) for v in identity],
                 "units": [[_offset(s), _offset(e), int(r)] for s, e, r in units]}
        if self._files.get(key) == entry:
            return  # known already: nothing to write
        self._files.pop(key, None)  # re-inserted last: the most recently counted
        self._files[key] = entry
        self._changed = True

    def forget(self, path: str) -> None:
        """Drop the entry of `path` (its units disagreed with its rows): it is counted again at the next open."""
        if self._files.pop(self._entry_key(path), None) is not None:
            self._changed = True

    def save(self) -> None:
        """Write the counts (atomically) when anything was counted, keeping at most MAX_FILES files."""
        if not self._changed:
            return
        while len(self._files) > MAX_FILES:
            self._files.pop(next(iter(self._files)))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{NAME}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"format": FORMAT, "files": self._files}, separators=(",", ":")))
        os.replace(partial, self.path)
        self._changed = False


@contextmanager
def node_counts(key: str) -> Iterator[UnitCounts]:
    """This node's counts for files cut and counted the `key` way, locked while the caller counts what is
    missing (the other ranks of the node wait, then find it), saved when the caller is done. A local folder
    that cannot be written (read-only, full) costs the memory only: the rows are counted, as without it."""
    path = counts_path()
    with ExitStack() as held:
        try:
            held.enter_context(exclusive_lock(path.with_name(f".{NAME}.lock")))
            locked = True
        except OSError as exc:
            logger.warning("cannot keep row counts in {} ({}); counting the files in this process", path.parent, exc)
            locked = False
        counts = UnitCounts(path, key)
        yield counts
        if locked:
            try:
                counts.save()
            except OSError as exc:
                logger.warning("cannot save the row counts to {} ({}); the next open counts again", path, exc)
