"""A bounded set of memory-mapped files of one opened cache: mapped when first read, the least recently used
unmapped past `env.max_open_shards()`.

Every map is one of the kernel's `vm.max_map_count` (65,530 by default) for the whole process: a cache of
70,000 Arrow shards or Lance fragments mapped at once exhausts it. Both the Arrow shard layout
(arrow_shards._OpenShards) and the Lance blob reader (lance_blobs.BlobReader) keep their maps here.

Eviction is CLOCK, an approximation of least recently used where a hit costs one attribute store (the item's
`used`) and no lock: the first item not used since the pool last passed over it is closed. An item the pool
closes has `pooled` set to False, so a reader holding it knows to ask again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from stable_datasets.env import max_open_shards


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
