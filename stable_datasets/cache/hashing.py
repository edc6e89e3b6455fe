"""Checksums computed beside the writer, not after it.

`FileHasher` follows a file as it grows: the writer reports how far it has written, and a
background thread reads that region back from the page cache into sha256 (hashlib releases
the GIL), then fsyncs the file at the end. Hashing a shard overlaps with encoding the next
batches instead of adding a full re-read at the end of the build.

Each stretch the writer reports is also handed to the disk before it is hashed (Linux
`sync_file_range`, which starts the writeback without waiting for it), so the disk writes while
the writer parses and encodes the next batches; the fsync at the end, which the publish still
waits for, then finds less left to write. Elsewhere the fsync does all the writing, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path

_CHUNK = 8 << 20
#: the writer starts the writeback of each new stretch of this many bytes
_WRITEBACK_STEP = 4 << 20
#: sync_file_range flag: start writing the range's dirty pages, do not wait for them
_SYNC_FILE_RANGE_WRITE = 2


def _writeback_starter() -> Callable[[int, int, int], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range  # ctypes releases the GIL for the call
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int

    def start(fd: int, offset: int, nbytes: int) -> None:
        function(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)  # a refusal only leaves the work to fsync

    return start


_start_writeback = _writeback_starter()


class FileHasher:
    """`background_fsync=True`: `finish` returns once the digest is known and the fsync goes on in the thread,
    for writers whose files the publish fsyncs again anyway (it then waits for what is left): a build of many
    small shards does not stop for a journal commit at each one."""

    def __init__(self, path: Path, background_fsync: bool = False):
        self.path = path
        self._background_fsync = background_fsync
        self._hashed = threading.Event()
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._digest = hashlib.sha256()
        self._error: BaseException | None = None
        self._fd = os.open(path, os.O_RDONLY)  # the file exists: the writer created it
        self._handed_to_disk = 0  # bytes whose writeback has been started
        self._thread = threading.Thread(target=self._run, name=f"hash {path.name}", daemon=True)
        self._thread.start()

    def advance(self, written: int) -> None:
        """The file now holds at least `written` bytes that will not change."""
        self._queue.put(written)

    def _writeback(self, end: int) -> None:
        """Start writing [handed, end) to the disk now. It runs in the hashing thread, before the
        stretch is hashed: the call allocates the file's blocks (a few ms per 4 MiB), which the
        writer need not wait for."""
        if _start_writeback is not None and end > self._handed_to_disk:
            _start_writeback(self._fd, self._handed_to_disk, end - self._handed_to_disk)
        self._handed_to_disk = end

    def _run(self) -> None:
        position = 0
        fd = self._fd
        try:  # the file is closed by finish() or cancel(), after this thread ends
            while True:
                target = self._queue.get()
                if self._cancelled:
                    return
                last = target is None
                end = os.fstat(fd).st_size if last else target
                if last or end - self._handed_to_disk >= _WRITEBACK_STEP:
                    self._writeback(end)
                while position < end:
                    data = os.pread(fd, min(_CHUNK, end - position), position)
                    if not data:
                        break
                    self._digest.update(data)
                    position += len(data)
                if last:
                    if self._background_fsync:
                        self._hashed.set()  # finish() returns; this thread still owns the file until it closes it
                        with contextlib.suppress(OSError):  # the publish's own fsync reports a failing disk
                            os.fsync(fd)
                        os.close(fd)
                        return
                    os.fsync(fd)
                    return
        except BaseException as exc:  # surfaced by finish()
            self._error = exc
        finally:
            self._hashed.set()

    _cancelled = False

    def cancel(self) -> None:
        """Stop without finishing (the build failed): the thread exits, then its file is closed."""
        self._cancelled = True
        self._queue.put(None)
        self._thread.join()
        os.close(self._fd)

    def finish(self) -> str:
        """Hash to the end of the (closed) file, fsync it, and return the hex digest."""
        self._queue.put(None)
        if self._background_fsync:
            self._hashed.wait()
            if self._error is not None:
                self._thread.join()
                os.close(self._fd)
                raise self._error
            return self._digest.hexdigest()
        self._thread.join()
        os.close(self._fd)
        if self._error is not None:
            raise self._error
        return self._digest.hexdigest()
