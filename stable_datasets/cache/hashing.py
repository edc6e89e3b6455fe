"""Checksums computed beside the writer, not after it.

`FileHasher` follows a file as it grows: the writer reports how far it has written, and a
background thread reads that region back from the page cache into sha256 (hashlib releases
the GIL), then fsyncs the file at the end. Hashing a shard overlaps with encoding the next
batches instead of adding a full re-read at the end of the build.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from pathlib import Path

_CHUNK = 8 << 20


class FileHasher:
    def __init__(self, path: Path):
        self.path = path
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._digest = hashlib.sha256()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"hash {path.name}", daemon=True)
        self._thread.start()

    def advance(self, written: int) -> None:
        """The file now holds at least `written` bytes that will not change."""
        self._queue.put(written)

    def _run(self) -> None:
        position = 0
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                while True:
                    target = self._queue.get()
                    if self._cancelled:
                        return
                    last = target is None
                    end = os.fstat(fd).st_size if last else target
                    while position < end:
                        data = os.pread(fd, min(_CHUNK, end - position), position)
                        if not data:
                            break
                        self._digest.update(data)
                        position += len(data)
                    if last:
                        os.fsync(fd)
                        return
            finally:
                os.close(fd)
        except BaseException as exc:  # surfaced by finish()
            self._error = exc

    _cancelled = False

    def cancel(self) -> None:
        """Stop without finishing (the build failed); the thread exits and closes its file."""
        self._cancelled = True
        self._queue.put(None)
        self._thread.join()

    def finish(self) -> str:
        """Hash to the end of the (closed) file, fsync it, and return the hex digest."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._digest.hexdigest()
