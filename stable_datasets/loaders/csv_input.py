"""What pyarrow's CSV reader is given to read: UTF-8 bytes in reads that never end between "\\r" and "\\n".

pyarrow's CSV reader takes "\\r" at the end of one block and "\\n" at the start of the next for one
line end cut in two, and drops that "\\n", also when it lies inside a quoted field: `"x\\r\\ny"` with
its "\\r" the last byte of a block came back as 'x\\ry' (its blocks are the reads of its input, of
`block_size` bytes each, wherever they fall). So the loader hands it a file whose reads end one byte
earlier where they would end on such a "\\r": no row depends on where a block happens to end. A file
in another encoding (UTF-16, Latin-1, ...) is transcoded to UTF-8 here, a chunk at a time, rather
than by pyarrow, whose transcoding makes blocks of the same kind.
"""

from __future__ import annotations

import codecs
import io
from typing import Any

import pyarrow as pa

#: bytes of a file in another encoding decoded at a time
TRANSCODE_BYTES = 4 << 20
_CR, _LF = 13, 10


def is_utf8(encoding: str) -> bool:
    """Whether `encoding` names UTF-8 (without a byte-order mark: pyarrow skips one anyway)."""
    return encoding.lower().replace("-", "").replace("_", "") == "utf8"


def csv_input(source: str | pa.Buffer, encoding: str = "utf8", start: int = 0) -> CsvInput:
    """A file over a data file from byte `start` (memory-mapped) or over bytes already read, as UTF-8 text."""
    if isinstance(source, str):
        mapped = pa.memory_map(source)
        mapped.seek(start)
        source = mapped.read_buffer()  # the buffer keeps the map open
    elif not isinstance(source, pa.Buffer):
        source = pa.py_buffer(source)
    return CsvInput(source, None if is_utf8(encoding) else encoding)


class CsvInput(io.RawIOBase):
    """`data` (UTF-8, or text in `encoding`) read in pieces that never end between a "\\r" and a "\\n"."""

    def __init__(self, data: pa.Buffer, encoding: str | None = None):
        super().__init__()
        self._data = data
        self._position = 0  # in `data`
        self._decoder: Any = codecs.getincrementaldecoder(encoding)("strict") if encoding else None
        self._text = bytearray()  # transcoded bytes not read yet

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> Any:  # type: ignore[override]
        if self._decoder is not None:
            return self._read_transcoded(size)
        data = self._data
        end = data.size if size is None or size < 0 else min(data.size, self._position + size)
        end = _safe_end(data, self._position, end)
        piece = data.slice(self._position, end - self._position)
        self._position = end
        return piece

    def _read_transcoded(self, size: int) -> bytes:
        want = None if size is None or size < 0 else size + 1  # one byte more: the one after the read
        while self._position < self._data.size and (want is None or len(self._text) < want):
            chunk = self._data.slice(self._position, min(TRANSCODE_BYTES, self._data.size - self._position))
            self._position += chunk.size
            self._text += self._decoder.decode(memoryview(chunk), self._position >= self._data.size).encode("utf-8")
        end = _safe_end(self._text, 0, len(self._text) if want is None else min(size, len(self._text)))
        piece = bytes(self._text[:end])
        del self._text[:end]
        return piece


def _safe_end(data: Any, start: int, end: int) -> int:
    """`end`, or one byte earlier when `data[end - 1:end + 1]` is "\\r\\n" (a read must not end between them)."""
    size = data.size if isinstance(data, pa.Buffer) else len(data)
    if end - start > 1 and end < size and data[end - 1] == _CR and data[end] == _LF:
        return end - 1
    return end
