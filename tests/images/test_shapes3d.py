"""3D Shapes from a miniature `3dshapes.h5` (`images` (N, 64, 64, 3) uint8, `labels` (N, 6) float64, as the
official one) under the official URL. Ports upstream's checks: every key, (64, 64, 3) uint8, factor values equal
to `label`, indices in range and equal to `label_index` (row-major over 10x10x10x8x4x15)."""

from __future__ import annotations

import io

import h5py
import numpy as np

import stable_datasets as sds
from stable_datasets.images import Shapes3D
from stable_datasets.images.shapes3d import _BASES, FACTOR_SIZES
from tests.fixtures.catalog import colour, digit_images, serve_urls

URL = "https://storage.googleapis.com/3d-shapes/3dshapes.h5"


def test_shapes3d_values_and_indices(monkeypatch):
    gray, _ = digit_images(5, 64)
    rgb = colour(gray)
    labels = np.linspace(0, 1, 30).reshape(5, 6)
    buf = io.BytesIO()
    with h5py.File(buf, "w") as h5:
        h5["images"], h5["labels"] = rgb, labels
    with serve_urls(monkeypatch, {URL: buf.getvalue()}):
        train = Shapes3D(split="train", verification_mode="no_checks")
        tail = sds.load_dataset("shapes3d", split="train[3:]", verification_mode="no_checks")
    assert len(train) == 5 and len(tail) == 2
    sample = train[4]
    assert set(sample) == {"image", "label", "label_index", "floor", "wall", "object", "scale", "shape",
                           "orientation", "floor_idx", "wall_idx", "object_idx", "scale_idx", "shape_idx",
                           "orientation_idx"}
    assert sample["image"].shape == (64, 64, 3) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], rgb[4])
    assert sample["label"] == labels[4].tolist() and sample["floor"] == labels[4, 0]
    assert sample["label_index"] == [0, 0, 0, 0, 0, 4]  # the 5th row: orientation 4
    assert train["orientation_idx"] == [0, 1, 2, 3, 4] and train["shape_idx"] == [0] * 5
    assert isinstance(sample["shape"], float) and isinstance(sample["shape_idx"], int)
    assert tail["label"] == labels[3:].tolist()
    assert train.info.num_examples == {"train": 480_000}


def test_shapes3d_factor_indices_follow_the_row_major_product():
    rows = np.array([15, 60, 48_000 + 4_800 + 480 + 60 + 15 + 1, 479_999])
    assert ((rows[:, None] // _BASES) % FACTOR_SIZES).tolist() == [[0, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0],
                                                                   [1, 1, 1, 1, 1, 1], [9, 9, 9, 7, 3, 14]]
