"""HDF5 files (Shapes3D, Galaxy10 DECaLS): datasets read a bounded block of rows at a time, several in lockstep
(images with their labels), through h5py (the `formats` extra). `np.array(f["images"])` would load a whole
dataset (3D Shapes' images are 5.9 GB); a slice reads only its rows."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from stable_datasets.catalog.formats.matlab import open_hdf5
from stable_datasets.errors import StableDatasetsError

#: bytes of one dataset read per step (rows of all datasets read in lockstep are sized by the widest)
BLOCK_BYTES = 16 << 20


def iter_hdf5_blocks(path: str | os.PathLike, names: list[str],
                     block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[np.ndarray, ...]]:
    """Blocks of consecutive rows (along the first axis) of the datasets `names`, one block per name a step, all
    of the same length; a missing dataset or datasets of different lengths are errors naming the file."""
    label = os.fspath(path)
    with open_hdf5(path) as h5:
        missing = [name for name in names if name not in h5]
        if missing:
            raise StableDatasetsError(f"{label} lacks the dataset(s) {missing} (it holds {sorted(h5.keys())})")
        datasets = [h5[name] for name in names]
        lengths = {name: d.shape[0] if d.shape else 1 for name, d in zip(names, datasets)}
        if len(set(lengths.values())) != 1:
            raise StableDatasetsError(f"{label}: datasets {names} differ in length: {lengths}")
        total = next(iter(lengths.values()))
        row_bytes = max(int(np.prod(d.shape[1:], dtype=np.int64)) * d.dtype.itemsize for d in datasets)
        step = max(1, block_bytes // max(1, row_bytes))
        for start in range(0, total, step):
            stop = min(total, start + step)
            yield tuple(d[start:stop] if d.shape else np.asarray(d[()]).reshape(1) for d in datasets)
