"""Reading the next table while the writer writes this one.

pyarrow's readers (CSV, JSON, Parquet) release the GIL while they parse, so a thread that runs a
loader's reading generator one table ahead lets parsing, writing, hashing and the disk's
writeback overlap instead of taking turns. At most `depth` tables wait in the queue, so memory
stays bounded; an error in the reader is raised in the consumer, and a consumer that stops
early (an error while writing) stops the reader.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_DONE = object()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def read_ahead(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """The items of `items`, produced by a thread up to `depth` items ahead of the consumer."""
    pending: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: Any) -> bool:
        while not stop.is_set():
            try:
                pending.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer(item):
                    return
            offer(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            offer(_Failed(exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None and stop.is_set():
                close()

    thread = threading.Thread(target=produce, name="read ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = pending.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()
