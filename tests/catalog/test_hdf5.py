"""The HDF5 reader (catalog.formats.hdf5): rows in bounded blocks, datasets in lockstep, errors naming the file."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from stable_datasets.catalog.formats.hdf5 import iter_hdf5_blocks
from stable_datasets.errors import StableDatasetsError


def test_blocks_are_bounded_in_lockstep_and_equal_the_datasets(tmp_path):
    images = np.arange(7 * 2 * 2 * 3, dtype=np.uint8).reshape(7, 2, 2, 3)
    labels = np.arange(7, dtype=np.float64) / 2
    with h5py.File(tmp_path / "a.h5", "w") as h5:
        h5["images"], h5["labels"] = images, labels
    blocks = list(iter_hdf5_blocks(tmp_path / "a.h5", ["images", "labels"], block_bytes=2 * 12))
    assert [len(b[0]) for b in blocks] == [2, 2, 2, 1] and all(len(i) == len(lab) for i, lab in blocks)
    np.testing.assert_array_equal(np.concatenate([b[0] for b in blocks]), images)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in blocks]), labels)


def test_missing_or_unequal_datasets_are_errors(tmp_path):
    with h5py.File(tmp_path / "b.h5", "w") as h5:
        h5["a"], h5["b"] = np.zeros(3), np.zeros(4)
    with pytest.raises(StableDatasetsError, match=r"b.h5 lacks the dataset\(s\) \['c'\] \(it holds \['a', 'b'\]\)"):
        list(iter_hdf5_blocks(tmp_path / "b.h5", ["a", "c"]))
    with pytest.raises(StableDatasetsError, match=r"datasets \['a', 'b'\] differ in length: \{'a': 3, 'b': 4\}"):
        list(iter_hdf5_blocks(tmp_path / "b.h5", ["a", "b"]))
