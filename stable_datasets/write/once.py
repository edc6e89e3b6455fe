"""`build_once`: a split is written by one process, however many ask for it at the same time.

Every cache the library writes (a builder's split, an in-memory constructor's, a column operation's,
a `map`'s) follows the same steps: look for a usable cache, take the split's lock, look again
(another process may have built it while we waited), and only then `write_split`. They live here
once, so the lock's place and the re-check cannot drift apart between callers.

What "usable" means is the caller's: a builder trusts the published metadata's fingerprint
(`published_matches`), a dataset constructor opens the cache and checks its files. `write/` sits
below `dataset/`, so that check arrives as a callable, and what it returns (a path, an open dataset)
is handed back unchanged. A check that finds a damaged or foreign cache warns and returns None:
the cache is rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from loguru import logger

from stable_datasets.cache.builds import hold_until_opened
from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.metadata import METADATA_FILE
from stable_datasets.errors import CacheError
from stable_datasets.layouts.checked import read_published
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.plan import WritePlan
from stable_datasets.write.sources import ExampleSource
from stable_datasets.write.split import refuse_what_cannot_fit, write_split

T = TypeVar("T")


def lock_path(target: Path) -> Path:
    """The build lock of a split's published directory: a hidden file beside it (not inside, since
    the directory is replaced whole when published)."""
    return target.parent / f".{target.name}.lock"


def published_matches(directory: Path, expected_fingerprint: str) -> bool:
    """A published cache of `expected_fingerprint` is at `directory`, by its `_metadata.json` (no data
    file is read). An unreadable one is reported and counts as absent, so it is rebuilt. A match stays pinned
    until this process opens it (cache.builds.hold_until_opened): no eviction takes it in between."""
    if not (directory / METADATA_FILE).is_file():
        return False
    try:
        pin, metadata = read_published(directory)
    except CacheError as exc:
        logger.warning("ignoring unusable cache {}: {}", directory, exc)
        return False
    if metadata.fingerprint != expected_fingerprint:
        pin.release()
        return False
    hold_until_opened(pin)
    return True


def build_once(plan: WritePlan, source: ExampleSource, runner: JobRunner | None = None, *,
               reuse: Callable[[], T | None] | None = None, checked: bool = False,
               lock_timeout: float | None = None, soft_lock: bool | None = None) -> T | None:
    """Write `plan.target` from `source` unless `reuse()` finds a usable cache there; what `reuse()`
    found, or None when this call wrote the split.

    `reuse` is asked before the lock and again once it is held; None (a forced rebuild, a result
    that must not be reused) always writes. `checked=True` skips the first question when the
    caller has just asked it (a builder checks before it lists its splits). `lock_timeout` and
    `soft_lock` are `exclusive_lock`'s (a builder's `prepare` passes them through).
    """
    if reuse is not None and not checked and (found := reuse()) is not None:
        return found
    refuse_what_cannot_fit(plan)  # before the lock file, so a refused build leaves nothing behind
    with exclusive_lock(lock_path(plan.target), timeout=lock_timeout, soft=soft_lock):
        if reuse is not None and (found := reuse()) is not None:  # another process built it while we waited
            return found
        write_split(plan, source, runner)
    return None
