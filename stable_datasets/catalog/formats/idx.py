"""IDX files (MNIST and its kin): a magic number `0x0000 <type> <ndim>`, big-endian dimensions, then the data."""

from __future__ import annotations

import gzip
import os
import struct
from typing import IO

import numpy as np

from stable_datasets.errors import StableDatasetsError

#: IDX type codes -> big-endian numpy dtypes
_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(source: str | os.PathLike | IO[bytes], name: str | None = None) -> np.ndarray:
    """The array of an IDX file, gzipped (by its `.gz` name or magic bytes) or not; a header that disagrees with
    the data's length is an error naming the file."""
    label = name or str(source if not hasattr(source, "read") else getattr(source, "name", "idx stream"))
    if hasattr(source, "read"):
        data = source.read()  # type: ignore[union-attr]
    else:
        with open(source, "rb") as fh:
            data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4:
        raise StableDatasetsError(f"{label}: not an IDX file (only {len(data)} bytes)")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in _TYPES or len(data) < 4 + 4 * ndim:
        raise StableDatasetsError(f"{label}: not an IDX file (magic {data[:4].hex()})")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    dtype = np.dtype(_TYPES[code])
    count = int(np.prod(dims, dtype=np.int64))
    if len(data) - 4 - 4 * ndim != count * dtype.itemsize:
        raise StableDatasetsError(f"{label}: header says {dims} ({count * dtype.itemsize} bytes of data) but the "
                                  f"file holds {len(data) - 4 - 4 * ndim}")
    array = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim).reshape(dims)
    return array if dtype.itemsize == 1 else array.astype(dtype.newbyteorder("="))
