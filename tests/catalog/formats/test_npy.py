"""`.npy` arrays read from a stream in bounded blocks, without unpickling."""

from __future__ import annotations

import io

import numpy as np
import numpy.lib.format as npy_format
import pytest

from stable_datasets.catalog.formats import npy
from stable_datasets.catalog.formats.npy import iter_npy_blocks, read_npy
from stable_datasets.errors import StableDatasetsError


def npy_stream(array: np.ndarray, version: tuple[int, int] | None = None) -> io.BytesIO:
    buf = io.BytesIO()
    if version is None:
        np.save(buf, array, allow_pickle=False)
    else:
        npy_format.write_array(buf, array, version=version, allow_pickle=False)
    buf.seek(0)
    return buf


def test_blocks_are_bounded_and_rows_exact(monkeypatch):
    array = np.arange(10 * 4 * 3, dtype=np.uint16).reshape(10, 4, 3)
    monkeypatch.setattr(npy, "BLOCK_BYTES", 3 * array[0].nbytes)  # three rows a block
    blocks = list(iter_npy_blocks(npy_stream(array), "a.npy"))
    assert [len(b) for b in blocks] == [3, 3, 3, 1]
    np.testing.assert_array_equal(np.concatenate(blocks), array)
    middle = list(iter_npy_blocks(npy_stream(array, (2, 0)), "a.npy", 4, 9))  # a version 2.0 header too
    np.testing.assert_array_equal(np.concatenate(middle), array[4:9])
    np.testing.assert_array_equal(read_npy(npy_stream(array), "a.npy"), array)


def test_refuses_pickled_fortran_and_short_arrays():
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    pickled.seek(0)
    with pytest.raises(StableDatasetsError, match=r"bad\.npy: a \.npy array of Python objects needs unpickling"):
        list(iter_npy_blocks(pickled, "bad.npy"))
    with pytest.raises(StableDatasetsError, match=r"f\.npy: a Fortran-ordered \.npy array is not read here"):
        list(iter_npy_blocks(npy_stream(np.asfortranarray(np.zeros((3, 2), np.uint8))), "f.npy"))
    short = io.BytesIO(npy_stream(np.zeros((4, 3), np.uint8)).getvalue()[:-2])
    with pytest.raises(StableDatasetsError, match=r"short\.npy: the array is cut short: 3 of 4 rows"):
        list(iter_npy_blocks(short, "short.npy"))
    with pytest.raises(StableDatasetsError, match=r"x\.npy: rows 2:9 asked of an array of 4 rows"):
        list(iter_npy_blocks(npy_stream(np.zeros((4, 3), np.uint8)), "x.npy", 2, 9))
    with pytest.raises(StableDatasetsError, match=r"text\.npy: not a readable \.npy array"):
        list(iter_npy_blocks(io.BytesIO(b"not an array at all"), "text.npy"))
