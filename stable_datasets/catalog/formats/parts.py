"""A file published in parts (`name-00`, `name-01`, ...: the pieces of one archive cut for download) read as the
one file they make, with seeking, so that zipfile or tarfile reads its members in place without a concatenated
copy on disk."""

from __future__ import annotations

import bisect
import io
import os
from collections.abc import Sequence

from stable_datasets.errors import StableDatasetsError


class ConcatenatedFile(io.RawIOBase):
    """The bytes of `paths`, one after the other, as a readable, seekable binary file."""

    def __init__(self, paths: Sequence[str | os.PathLike]):
        super().__init__()
        self._paths = [os.fspath(p) for p in paths]
        self._starts = [0]
        for path in self._paths:
            self._starts.append(self._starts[-1] + os.path.getsize(path))
        self._position = 0
        self._open: tuple[int, io.BufferedReader] | None = None

    @property
    def size(self) -> int:
        return self._starts[-1]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def readinto(self, buffer) -> int:  # type: ignore[override]
        """Fills `buffer` across part boundaries; short only at the end of the last part."""
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view) and self._position < self.size:
            part = bisect.bisect_right(self._starts, self._position) - 1
            if self._open is None or self._open[0] != part:
                self._close_part()
                self._open = (part, open(self._paths[part], "rb"))  # noqa: SIM115 (kept open across reads)
            fh = self._open[1]
            fh.seek(self._position - self._starts[part])
            count = min(len(view) - filled, self._starts[part + 1] - self._position)
            got = fh.readinto(view[filled:filled + count])
            if not got:
                raise StableDatasetsError(f"{self._paths[part]} is shorter than when it was opened")
            filled += got
            self._position += got
        return filled

    def close(self) -> None:
        self._close_part()
        super().close()

    def _close_part(self) -> None:
        if self._open is not None:
            self._open[1].close()
            self._open = None


def open_parts(paths: Sequence[str | os.PathLike]) -> io.BufferedReader:
    """`ConcatenatedFile(paths)`, buffered."""
    return io.BufferedReader(ConcatenatedFile(paths), buffer_size=1 << 20)
