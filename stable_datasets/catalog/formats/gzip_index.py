"""`SeekableGzip`: a gzip file read as a seekable stream without decompressing it again from the start on every
backward seek.

`gzip.GzipFile` answers a backward seek by rewinding to the first byte, so reading a `.tar.gz` archive's members
in an order other than the stored one (an official list, as DTD's, CUB's or Cars196's builders do) costs a
decompression of the archive per member. This reader records a checkpoint (the decompressor's state, copied) every
`spacing` bytes of output as it goes forward, and serves a seek from the nearest checkpoint at or before the
target: at most `spacing` bytes are decompressed again, whatever the order. Memory is bounded by the number of
checkpoints (about 50 KiB each: one a 4 MiB of output by default). Concatenated gzip members are read as one
stream, as `gzip` reads them.
"""

from __future__ import annotations

import bisect
import io
import os
import zlib
from typing import Any

from stable_datasets.errors import StableDatasetsError

#: compressed bytes fed to the decompressor a step
_INPUT_STEP = 64 * 1024
#: output a step at most (bounds the memory of a highly compressible stretch)
_OUTPUT_STEP = 1024 * 1024
#: gzip's wbits for zlib: a gzip header and trailer
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class SeekableGzip(io.RawIOBase):
    """A read-only, seekable view of the decompressed bytes of the gzip file at `path`."""

    def __init__(self, path: str | os.PathLike, *, spacing: int = 4 * 1024 * 1024):
        super().__init__()
        self.name = os.fspath(path)
        self._file = open(self.name, "rb")  # noqa: SIM115 (closed by close())
        self._spacing = spacing
        #: (output offset, compressed offset, decompressor copy, input not yet consumed, inside a member)
        self._checkpoints: list[tuple[int, int, Any, bytes, bool]] = []
        self._offsets: list[int] = []
        #: bytes of output produced in all (re-reads included): what a seek pattern costs
        self.decompressed = 0
        self._position = 0
        self._restart(0, 0, zlib.decompressobj(_GZIP_WBITS), b"", False)
        self._checkpoint()

    # -- the decompression position --------------------------------------------------------------------------
    def _restart(self, out_pos: int, in_pos: int, decompressor: Any, pending: bytes, in_member: bool) -> None:
        self._out = out_pos  # output offset of the first byte of self._buffer
        self._buffer = b""
        self._decompressor = decompressor
        self._pending = pending
        self._file.seek(in_pos)
        self._in = in_pos  # compressed offset after self._pending
        self._in_member = in_member  # the decompressor has begun a gzip member it has not finished

    def _checkpoint(self) -> None:
        if not self._offsets or self._out >= self._offsets[-1] + self._spacing:
            self._checkpoints.append((self._out, self._in, self._decompressor.copy(), self._pending,
                                      self._in_member))
            self._offsets.append(self._out)

    def _step(self) -> bytes:
        """The next piece of output (b"" at the end of the file)."""
        while True:
            if not self._pending:
                self._pending = self._file.read(_INPUT_STEP)
                self._in += len(self._pending)
                if not self._pending:
                    if self._in_member:
                        raise StableDatasetsError(f"{self.name}: the gzip stream ends early (a truncated file)")
                    return b""
            try:
                data = self._decompressor.decompress(self._pending, _OUTPUT_STEP)
            except zlib.error as exc:
                raise StableDatasetsError(f"{self.name}: not a valid gzip stream at byte {self._in} ({exc})") from None
            self._in_member = True
            self._pending = self._decompressor.unconsumed_tail
            if self._decompressor.eof:  # a gzip member ended: another may follow (concatenated members)
                rest = self._decompressor.unused_data + self._pending
                self._decompressor = zlib.decompressobj(_GZIP_WBITS)
                self._pending = rest.lstrip(b"\x00")  # trailing zero padding is not a member
                self._in_member = False
            if data:
                self.decompressed += len(data)
                return data

    def _advance_to(self, target: int) -> None:
        """Decompress forward until `target` is within the buffer (or the file ends)."""
        while self._out + len(self._buffer) <= target:
            self._out += len(self._buffer)
            self._buffer = b""
            self._checkpoint()
            piece = self._step()
            if not piece:
                return
            self._buffer = piece

    # -- io.RawIOBase ------------------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence == io.SEEK_END:
            self._advance_to(1 << 62)
            offset += self._out + len(self._buffer)
        elif whence != io.SEEK_SET:
            raise ValueError(f"invalid whence {whence}")
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        self._position = offset
        return offset

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if not len(view):
            return 0
        target = self._position
        if target < self._out:  # behind the buffer: from the nearest checkpoint at or before it
            index = bisect.bisect_right(self._offsets, target) - 1
            out_pos, in_pos, decompressor, pending, in_member = self._checkpoints[index]
            self._restart(out_pos, in_pos, decompressor.copy(), pending, in_member)
        elif target >= self._out + len(self._buffer) + self._spacing:
            # far ahead: jump to the last checkpoint before it when that is ahead of the current position
            index = bisect.bisect_right(self._offsets, target) - 1
            out_pos, in_pos, decompressor, pending, in_member = self._checkpoints[index]
            if out_pos > self._out + len(self._buffer):
                self._restart(out_pos, in_pos, decompressor.copy(), pending, in_member)
        self._advance_to(target)
        start = target - self._out
        if start >= len(self._buffer):
            return 0
        count = min(len(view), len(self._buffer) - start)
        view[:count] = self._buffer[start:start + count]
        self._position += count
        return count

    def close(self) -> None:
        if not self.closed:
            self._file.close()
            self._checkpoints.clear()
        super().close()


def open_seekable_gzip(path: str | os.PathLike, *, spacing: int = 4 * 1024 * 1024) -> io.BufferedReader:
    """A buffered `SeekableGzip` (whole reads, as tarfile expects); its `.raw.decompressed` counts the output."""
    return io.BufferedReader(SeekableGzip(path, spacing=spacing), buffer_size=256 * 1024)


def is_gzip(path: str | os.PathLike) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"
