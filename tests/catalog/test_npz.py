"""The `.npz` reader (catalog.formats.npz): rows in bounded blocks, members in lockstep, no unpickling."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from stable_datasets.catalog.formats.npz import iter_npz_blocks, npz_members, read_npz_array
from stable_datasets.errors import StableDatasetsError


def _npz(path, compressed: bool = True, **arrays) -> str:
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return str(path)


def test_blocks_are_bounded_in_lockstep_and_equal_the_arrays(tmp_path):
    images = np.arange(10 * 4 * 3, dtype=np.uint8).reshape(10, 4, 3)
    labels = np.arange(10, dtype=np.int64) * 7
    path = _npz(tmp_path / "a.npz", images=images, labels=labels)
    blocks = list(iter_npz_blocks(path, ["images", "labels"], block_bytes=3 * 12))  # 3 image rows a step
    assert [len(b[0]) for b in blocks] == [3, 3, 3, 1]
    assert all(len(i) == len(lab) for i, lab in blocks)
    np.testing.assert_array_equal(np.concatenate([b[0] for b in blocks]), images)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in blocks]), labels)
    assert npz_members(path) == ["images", "labels"]


def test_fortran_order_and_big_endian_members_read_right(tmp_path):
    fortran = np.asfortranarray(np.arange(24, dtype=np.int16).reshape(6, 4))
    big = np.arange(6, dtype=">f8") / 3
    path = _npz(tmp_path / "f.npz", compressed=False, f=fortran, b=big)
    (f_block, b_block), = iter_npz_blocks(path, ["f", "b"])
    np.testing.assert_array_equal(f_block, fortran)
    np.testing.assert_array_equal(b_block, big)
    np.testing.assert_array_equal(read_npz_array(path, "f"), fortran)


def test_object_arrays_are_refused_never_unpickled(tmp_path):
    path = _npz(tmp_path / "o.npz", meta=np.array([{"a": 1}], dtype=object), x=np.zeros(1))
    with pytest.raises(StableDatasetsError, match=r"o.npz:meta holds Python objects"):
        read_npz_array(path, "meta")
    np.testing.assert_array_equal(read_npz_array(path, "x"), np.zeros(1))  # the other members still read


def test_errors_name_the_file_and_the_problem(tmp_path):
    path = _npz(tmp_path / "e.npz", a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(StableDatasetsError, match=r"arrays \['a', 'b'\] differ in length: \{'a': 3, 'b': 4\}"):
        list(iter_npz_blocks(path, ["a", "b"]))
    with pytest.raises(StableDatasetsError, match=r"holds no array 'c' \(it holds \['a', 'b'\]\)"):
        read_npz_array(path, "c")
    (tmp_path / "n.npz").write_bytes(b"not a zip")
    with pytest.raises(StableDatasetsError, match="not an .npz"):
        npz_members(tmp_path / "n.npz")
    buf = io.BytesIO()
    np.save(buf, np.zeros(100, dtype=np.uint8))
    with zipfile.ZipFile(tmp_path / "t.npz", "w") as archive:
        archive.writestr("t.npy", buf.getvalue()[:-10])  # truncated data
    with pytest.raises(StableDatasetsError, match=r"t.npz:t ends early: 90 of 100 bytes"):
        read_npz_array(tmp_path / "t.npz", "t")
