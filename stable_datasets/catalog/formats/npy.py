"""`.npy` arrays read from an open stream (a tar member, a file) a bounded block of rows at a time: the header is
parsed with numpy's own reader, the data read raw, so nothing is unpickled and nothing is extracted or loaded whole.
CIFAR-10-C and CIFAR-100-C ship their images this way (one 50,000-row array per corruption in a tar)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import numpy as np
import numpy.lib.format as npy_format

from stable_datasets.errors import StableDatasetsError

#: bytes read per step (rounded to whole rows): bounded memory whatever the array's size
BLOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class NpyHeader:
    """Shape and dtype of a C-ordered `.npy` array, and where its data starts in the stream."""

    shape: tuple[int, ...]
    dtype: np.dtype
    data_offset: int

    @property
    def row_bytes(self) -> int:
        """Bytes of one row (one index along the first axis)."""
        return math.prod(self.shape[1:]) * self.dtype.itemsize


def read_npy_header(fh: IO[bytes], name: str) -> NpyHeader:
    """The header of the `.npy` array at the stream's position; an error naming `name` for a pickled (object),
    Fortran-ordered, or unknown-version array, which this reader refuses rather than unpickle or transpose."""
    try:
        version = npy_format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"npy format version {version} is not read here")
    except ValueError as exc:
        raise StableDatasetsError(f"{name}: not a readable .npy array ({exc})") from None
    if dtype.hasobject:
        raise StableDatasetsError(f"{name}: a .npy array of Python objects needs unpickling, which is never done")
    if fortran and len(shape) > 1:
        raise StableDatasetsError(f"{name}: a Fortran-ordered .npy array is not read here (shape {shape})")
    if not shape:
        raise StableDatasetsError(f"{name}: a 0-d .npy array has no rows")
    return NpyHeader(tuple(shape), dtype, fh.tell())


def iter_npy_blocks(fh: IO[bytes], name: str, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
    """Rows `start:stop` of the `.npy` array at the stream's position, as arrays of whole rows (first axis), each
    at most BLOCK_BYTES; `start` is reached by seeking where the stream can. A short array is an error naming
    `name` and the rows it lacks."""
    header = read_npy_header(fh, name)
    rows = header.shape[0]
    stop = rows if stop is None else stop
    if not 0 <= start <= stop <= rows:
        raise StableDatasetsError(f"{name}: rows {start}:{stop} asked of an array of {rows} rows")
    row_bytes = max(header.row_bytes, 1)
    if start:
        _skip(fh, start * header.row_bytes)
    per_block = max(1, BLOCK_BYTES // row_bytes)
    position = start
    while position < stop:
        count = min(per_block, stop - position)
        data = fh.read(count * header.row_bytes)
        if len(data) != count * header.row_bytes:
            got = position + len(data) // row_bytes
            raise StableDatasetsError(f"{name}: the array is cut short: {got} of {rows} rows ({header.shape})")
        yield np.frombuffer(data, dtype=header.dtype).reshape((count, *header.shape[1:]))
        position += count


def read_npy(fh: IO[bytes], name: str) -> np.ndarray:
    """A whole (small) `.npy` array, such as a labels file; the same checks as `iter_npy_blocks`."""
    blocks = list(iter_npy_blocks(fh, name))
    if not blocks:
        raise StableDatasetsError(f"{name}: the array has no rows")
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def _skip(fh: IO[bytes], count: int) -> None:
    if fh.seekable():
        fh.seek(count, 1)
        return
    while count:
        chunk = fh.read(min(count, BLOCK_BYTES))
        if not chunk:
            return
        count -= len(chunk)
