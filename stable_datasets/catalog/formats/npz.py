"""NumPy `.npz` archives (MedMNIST, dSprites): a zip of `.npy` members, each read in place from the zip, a bounded
block of rows at a time, and never unpickled (an object array is an error, not a `pickle.load`).

`np.load(path)["x"]` inflates a whole member into memory (dSprites' images are 2.9 GB); here a member's header is
parsed and its rows are read `block_bytes` at a time, several members in lockstep (images with their labels)."""

from __future__ import annotations

import contextlib
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import numpy as np

from stable_datasets.errors import StableDatasetsError

#: bytes of one member read per step (rows of all members read in lockstep are sized by the widest)
BLOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class NpyHeader:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize


def npz_members(path: str | os.PathLike) -> list[str]:
    """The array names of an `.npz` (its members' names without `.npy`), in the archive's order."""
    with _open_zip(path) as archive:
        return [n.removesuffix(".npy") for n in archive.namelist() if n.endswith(".npy")]


def read_header(fh: IO[bytes], label: str) -> NpyHeader:
    """The header of an `.npy` stream (versions 1 to 3); an object dtype (pickled cells) is an error."""
    try:
        major, _ = np.lib.format.read_magic(fh)
        if major == 1:
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif major in (2, 3):  # 3.0 differs from 2.0 only in allowing utf-8 field names
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy version {major}")
    except ValueError as exc:
        raise StableDatasetsError(f"{label}: not a readable .npy member ({exc})") from None
    if dtype.hasobject:
        raise StableDatasetsError(f"{label} holds Python objects (dtype {dtype}): reading it would unpickle, which "
                                  "stable-datasets never does")
    return NpyHeader(tuple(shape), dtype, fortran)


def read_npz_array(path: str | os.PathLike, name: str) -> np.ndarray:
    """One whole array of an `.npz` (for small members: labels, factor tables)."""
    with _open_zip(path) as archive, _member(archive, path, name) as fh:
        label = f"{os.fspath(path)}:{name}"
        header = read_header(fh, label)
        count = int(np.prod(header.shape, dtype=np.int64))
        data = _read_exact(fh, count * header.dtype.itemsize, label)
        order = "F" if header.fortran_order else "C"
        return np.frombuffer(data, dtype=header.dtype).reshape(header.shape, order=order)


def iter_npz_blocks(path: str | os.PathLike, names: list[str],
                    block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[np.ndarray, ...]]:
    """Blocks of consecutive rows (along the first axis) of the arrays `names`, in lockstep: each step yields one
    block per name, all of the same length. Arrays with different row counts are an error naming both. A
    Fortran-ordered member has no contiguous rows: so it is read whole."""
    label = os.fspath(path)
    with _open_zip(path) as archive, contextlib.ExitStack() as stack:
        handles = [stack.enter_context(_member(archive, path, name)) for name in names]
        headers = [read_header(fh, f"{label}:{name}") for fh, name in zip(handles, names)]
        rows = {h.shape[0] if h.shape else 1 for h in headers}
        if len(rows) != 1:
            counts = {name: h.shape[0] if h.shape else 1 for name, h in zip(names, headers)}
            raise StableDatasetsError(f"{label}: arrays {names} differ in length: {counts}")
        total = rows.pop()
        whole = [_whole(fh, h, f"{label}:{n}") if h.fortran_order else None
                 for fh, h, n in zip(handles, headers, names)]
        step = max(1, block_bytes // max(1, max(h.row_bytes for h in headers)))
        for start in range(0, total, step):
            count = min(step, total - start)
            blocks = []
            for fh, header, name, array in zip(handles, headers, names, whole):
                if array is not None:
                    blocks.append(array[start:start + count])
                    continue
                data = _read_exact(fh, count * header.row_bytes, f"{label}:{name}")
                blocks.append(np.frombuffer(data, dtype=header.dtype).reshape((count, *header.shape[1:])))
            yield tuple(blocks)


def _whole(fh: IO[bytes], header: NpyHeader, label: str) -> np.ndarray:
    count = int(np.prod(header.shape, dtype=np.int64))
    data = _read_exact(fh, count * header.dtype.itemsize, label)
    return np.frombuffer(data, dtype=header.dtype).reshape(header.shape, order="F")


def _read_exact(fh: IO[bytes], size: int, label: str) -> bytes:
    data = fh.read(size)
    while len(data) < size:  # a zip member may return less than asked
        more = fh.read(size - len(data))
        if not more:
            raise StableDatasetsError(f"{label} ends early: {len(data)} of {size} bytes of data")
        data += more
    return data


def _open_zip(path: str | os.PathLike) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise StableDatasetsError(f"{os.fspath(path)}: not an .npz (zip) archive") from None


def _member(archive: zipfile.ZipFile, path: str | os.PathLike, name: str) -> IO[bytes]:
    try:
        return archive.open(f"{name}.npy")
    except KeyError:
        names = [n.removesuffix(".npy") for n in archive.namelist()]
        raise StableDatasetsError(f"{os.fspath(path)} holds no array {name!r} (it holds {names})") from None
