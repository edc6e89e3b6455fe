"""Fixed-size binary records (the CIFAR binary batches, STL-10's files): label bytes then pixel planes, read a
bounded number of records at a time from an open file or archive member."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import numpy as np

from stable_datasets.errors import StableDatasetsError

#: bytes read per step (whole records, at least one): bounded memory whatever the file's or the record's size
BYTES_PER_READ = 8 << 20


def iter_records(fh: IO[bytes], record_size: int, name: str) -> Iterator[np.ndarray]:
    """(n, record_size) uint8 blocks of whole records; a trailing partial record is an error naming `name`."""
    while True:
        data = fh.read(record_size * max(1, BYTES_PER_READ // record_size))
        if not data:
            return
        if len(data) % record_size:
            raise StableDatasetsError(f"{name} is not a whole number of {record_size}-byte records "
                                      f"({len(data) % record_size} bytes left over)")
        yield np.frombuffer(data, dtype=np.uint8).reshape(-1, record_size)


def planes_to_hwc(planes: np.ndarray, channels: int, height: int, width: int) -> np.ndarray:
    """(n, C*H*W) channel-planar pixels -> (n, H, W, C)."""
    return planes.reshape(-1, channels, height, width).transpose(0, 2, 3, 1)
