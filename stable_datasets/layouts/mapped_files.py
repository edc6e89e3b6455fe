"""A bounded set of memory-mapped files of one opened cache: mapped when first read, the least recently used
unmapped past `env.max_open_shards()`.

Every map is one of the kernel's `vm.max_map_count` (65,530 by default) for the whole process: a cache of
70,000 Arrow shards or Lance fragments mapped at once exhausts it. Both the Arrow shard layout
(arrow_shards._OpenShards) and the Lance blob reader (lance.blobs.BlobReader) keep their maps here.

Eviction is CLOCK, an approximation of least recently used where a hit costs one attribute store (the item's
`used`) and no lock: the first item not used since the pool last passed over it is closed. An item the pool
closes has `pooled` set to False, so a reader holding it knows to ask again.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from stable_datasets.env import max_open_shards
from stable_datasets.errors import ResourceLimitError


class Mapped(Protocol):
    """What the pool needs of an item: the flags it reads and sets."""

    used: bool
    pooled: bool


T = TypeVar("T", bound=Mapped)


class MappedFiles(Generic[T]):
    """Items (one mapped file each) by index, at most `capacity` at once; `closed(item)` runs for each one evicted
    or closed (a subclass frees what the item held)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max_open_shards() if capacity is None else capacity
        self.lock = threading.RLock()
        self.open: OrderedDict[int, T] = OrderedDict()
        self.maps_opened = 0  # files mapped so far, reopened ones included

    def acquire(self, index: int, make: Callable[[], T]) -> tuple[T, bool]:
        """Item `index`, made by `make()` (which maps its file) if it is not open; (the item, True when just made).
        Another item is closed first when the pool is full."""
        item = self.open.get(index)  # a hit takes no lock and moves nothing: it marks the item used (see _evict)
        if item is not None:
            item.used = True
            return item, False
        with self.lock:
            item = self.open.get(index)
            if item is not None:
                return item, False
            while len(self.open) >= self.capacity:
                self._evict()
            item = make()
            self.maps_opened += 1
            self.open[index] = item
            return item, True

    def _evict(self) -> None:
        victim = next(iter(self.open))
        for index, item in self.open.items():
            if not item.used:
                victim = index
                break
            item.used = False
        self.close(victim)  # the ones passed over go next, unless read again before

    def close(self, index: int) -> None:
        """Forget item `index`: its map goes once nothing else holds its buffers."""
        with self.lock:
            item = self.open.pop(index, None)
            if item is not None:
                item.pooled = False
                self.closed(item)

    def closed(self, item: Any) -> None:
        """Called under the lock for each item leaving the pool."""


def map_refused(exc: OSError) -> bool:
    """mmap failed with ENOMEM (Arrow reports it in the message, without an errno)."""
    return exc.errno == errno.ENOMEM or os.strerror(errno.ENOMEM) in str(exc)


def _first_int(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def map_limit_error(path: str | Path) -> ResourceLimitError:
    """Why mapping `path` failed, with the numbers: this process's maps against `vm.max_map_count`."""
    try:
        with open("/proc/self/maps", "rb") as fh:
            maps: int | None = sum(1 for _ in fh)
    except OSError:
        maps = None
    limit = _first_int("/proc/sys/vm/max_map_count")
    return ResourceLimitError(
        f"{path}: the system refused to map this file (out of memory maps or address space: this process has "
        f"{maps if maps is not None else 'an unknown number of'} memory maps, the kernel allows "
        f"{limit if limit is not None else 'an unknown number'} (vm.max_map_count), and `ulimit -v` bounds the "
        f"address space). The cache is not damaged. Each opened cache keeps at most "
        f"STABLE_DATASETS_MAX_OPEN_SHARDS={max_open_shards()} shard or fragment files mapped: lower it, open "
        "fewer caches at once, or raise vm.max_map_count (sysctl -w vm.max_map_count=262144)")
