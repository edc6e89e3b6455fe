"""Where lines end in a data file's bytes, in any text encoding: ranges and blocks of whole lines.

Line-based files (JSON Lines, text, CSV) are cut into byte ranges for parallel builds and stream
units, and read in blocks of whole lines. In UTF-8 and the other ASCII-compatible encodings a line
ends at the byte 0x0A. In UTF-16 and UTF-32 it ends at a whole code unit that is a line feed
("\\n\\x00" at an even offset in UTF-16-LE, ...): a 0x0A byte elsewhere is half of another character
(U+4E0A, 上, is 0A 4E), and a cut there split the code units of everything after it. `LineBytes`
says what a line end is in a file's encoding, which byte order its blocks are decoded in (a
"utf-16" or "utf-32" file says it with its byte-order mark, which only its first block holds), and
how many bytes that mark takes.
"""

from __future__ import annotations

import codecs
import io
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

#: bytes of a line-based file read at a time
BLOCK_BYTES = 16 << 20
#: the byte-order marks of the encodings that read one ("utf-16", "utf-32"; "utf-8-sig" drops one)
_MARKS = {"utf-16": ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")),
          "utf-32": ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be")),
          "utf-8-sig": ((codecs.BOM_UTF8, "utf-8"),)}


@dataclass(frozen=True)
class LineBytes:
    """Lines in a file's bytes: `codec` decodes any block of whole lines after the first `mark` bytes (its
    byte-order mark), and a line ends after `newline` (a line feed as the encoding writes it) at an offset that
    is a multiple of its length (a whole code unit)."""

    codec: str = "utf-8"
    newline: bytes = b"\n"
    mark: int = 0

    @property
    def width(self) -> int:
        return len(self.newline)

    def _units(self, data: bytes) -> np.ndarray:
        dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[self.width]
        return np.frombuffer(data, dtype=dtype, count=len(data) // self.width)

    def count(self, data: bytes) -> int:
        """Line feeds in `data` (which starts at a whole code unit)."""
        if self.width == 1:
            return data.count(self.newline)
        return int(np.count_nonzero(self._units(data) == self._units(self.newline)[0]))

    def find(self, data: bytes, start: int = 0) -> int:
        """Offset in `data` (which starts at a whole code unit) just past the first line feed at or after `start`,
        or -1."""
        if self.width == 1:
            found = data.find(self.newline, start)
            return found + 1 if found >= 0 else -1
        start = -(-start // self.width) * self.width
        units = self._units(data[start:])
        hits = np.flatnonzero(units == self._units(self.newline)[0])
        return start + (int(hits[0]) + 1) * self.width if len(hits) else -1


UTF8 = LineBytes()


def line_bytes(encoding: str, head: bytes = b"") -> LineBytes:
    """How lines end in a file in `encoding` whose first bytes are `head` (4 are enough): a "utf-16"/"utf-32" file
    in the byte order its mark names (none: this machine's, as Python reads it)."""
    name = codecs.lookup(encoding).name
    if name in ("utf-8", "ascii"):
        return UTF8
    mark, codec = 0, name
    if name in _MARKS:
        found = next(((len(bom), named) for bom, named in _MARKS[name] if head.startswith(bom)), None)
        if found is not None:
            mark, codec = found
        elif name != "utf-8-sig":
            codec = f"{name}-{'le' if sys.byteorder == 'little' else 'be'}"
        else:
            codec = "utf-8"
    newline = "\n".encode(codec)
    if len(newline) not in (1, 2, 4):
        raise ValueError(f"cannot find line ends in {encoding} text")
    return LineBytes(codec, newline, mark)


def marks_byte_order(encoding: str) -> bool:
    """Whether a file in `encoding` names its byte order in its first bytes ("utf-16", "utf-32"): a range of it
    cut off from them cannot be decoded alone."""
    return codecs.lookup(encoding).name in ("utf-16", "utf-32")


def file_line_bytes(path: str, encoding: str) -> LineBytes:
    """`line_bytes` of a local file (its first bytes read for its byte-order mark)."""
    if line_bytes(encoding) == UTF8:
        return UTF8
    with open(path, "rb") as fh:
        return line_bytes(encoding, fh.read(4))


def line_end(read_at: Callable[[int, int], bytes], offset: int, size: int, lines: LineBytes = UTF8) -> int:
    """The offset just past the first line end at or after `offset` (`size` if none): windows of 64 KiB, growing."""
    offset = -(-offset // lines.width) * lines.width
    window = 64 << 10
    while offset < size:
        data = read_at(offset, window)
        if not data:
            break
        found = lines.find(data)
        if found >= 0:
            return offset + found
        offset += len(data) - len(data) % lines.width
        window = min(window * 4, 16 << 20)
    return size


def line_ranges(path: str, parts: int, size: int | None = None, read_at: Callable[[int, int], bytes] | None = None,
                lines: LineBytes = UTF8) -> list[list[Any]]:
    """Byte ranges of about equal size that start and end at line ends: each cut is the end of the line the
    `size * i / parts` byte falls in. `read_at(offset, n)` reads the file (a remote one: `FileLoader.remote_bytes`,
    small ranged reads around each cut); by default the local file at `path`."""
    if read_at is None:
        with open(path, "rb") as fh:
            return line_ranges(path, parts, os.fstat(fh.fileno()).st_size,
                               lambda offset, n: os.pread(fh.fileno(), n, offset), lines)
    size = int(size or 0)
    bounds = [0]
    for i in range(1, parts):
        target = max(size * i // parts, bounds[-1], lines.mark)
        position = line_end(read_at, target, size, lines) if target else 0
        if position >= size:
            break
        if position > bounds[-1]:
            bounds.append(position)
    bounds.append(size)
    return [[path, lo, hi] for lo, hi in itertools.pairwise(bounds) if hi > lo]


def line_blocks(path: str, start: int | None, stop: int | None, block_bytes: int | None = None,
                data: bytes | None = None, lines: LineBytes = UTF8) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines of the byte range (a file's byte-order mark left out), each with the number
    (0-based) of its first line counted from the start of the file (or of `data`, the file's bytes already
    read). Each block starts and ends at a whole code unit."""
    block_bytes = block_bytes or BLOCK_BYTES
    block_bytes = max(block_bytes - block_bytes % lines.width, lines.width)
    with (io.BytesIO(data) if data is not None else open(path, "rb")) as fh:
        line = 0
        if start:
            remaining = start
            while remaining:  # count the lines before the range, for messages
                chunk = fh.read(min(remaining, block_bytes))
                if not chunk:
                    break
                line += lines.count(chunk)
                remaining -= len(chunk)
        position = max(start or 0, lines.mark)
        fh.seek(position)
        end = (len(data) if data is not None else os.path.getsize(path)) if stop is None else stop
        while position < end:
            block = fh.read(min(block_bytes, end - position))
            if not block:
                break
            position += len(block)
            if position < end and not _ends_line(block, lines):
                rest = _rest_of_line(fh, lines)
                block += rest
                position += len(rest)
            yield block, line
            line += lines.count(block)


def _ends_line(block: bytes, lines: LineBytes) -> bool:
    return len(block) % lines.width == 0 and block.endswith(lines.newline)


def _rest_of_line(fh: Any, lines: LineBytes) -> bytes:
    """The bytes from the file's position to the end of its line (the file is at a whole code unit)."""
    if lines.width == 1:
        return fh.readline()
    parts, window = [], 64 << 10
    while True:
        chunk = fh.read(window)
        if not chunk:
            return b"".join(parts)
        found = lines.find(chunk)
        if found >= 0:
            fh.seek(found - len(chunk), os.SEEK_CUR)
            parts.append(chunk[:found])
            return b"".join(parts)
        parts.append(chunk)
        window = min(window * 4, 16 << 20)
