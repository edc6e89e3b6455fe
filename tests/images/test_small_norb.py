"""smallNORB from miniature gzipped NORB matrix files (int32 magic, rank, at least 3 dimensions, data) under the
official URLs. Ports upstream's checks: keys, (96, 96) uint8 left and right images, the five factors in range
and equal to `label`, the azimuth halved."""

from __future__ import annotations

import gzip
import struct

import numpy as np

import stable_datasets as sds
from stable_datasets.images import SmallNORB
from tests.fixtures.catalog import digit_images, serve_urls

BASE = "https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/"


def _matrix(array: np.ndarray, magic: int) -> bytes:
    dims = list(array.shape) + [1] * max(0, 3 - array.ndim)
    header = struct.pack("<ii", magic, array.ndim) + struct.pack(f"<{len(dims)}i", *dims)
    return gzip.compress(header + array.tobytes(), mtime=0)


def _split(prefix: str, pairs: np.ndarray, cat: np.ndarray, info: np.ndarray) -> dict[str, bytes]:
    return {f"{BASE}{prefix}-dat.mat.gz": _matrix(pairs, 0x1E3D4C55),
            f"{BASE}{prefix}-cat.mat.gz": _matrix(cat.astype("<i4"), 0x1E3D4C54),
            f"{BASE}{prefix}-info.mat.gz": _matrix(info.astype("<i4"), 0x1E3D4C54)}


def test_small_norb_pairs_and_factors(monkeypatch):
    gray, _ = digit_images(10, 96)
    pairs = np.stack([gray, 255 - gray], axis=1)  # (10, 2, 96, 96)
    cat = np.array([0, 4, 2, 1, 3, 0, 1, 2, 3, 4])
    info = np.array([[i % 10, i % 9, (2 * i) % 36, i % 6] for i in range(10)])  # instance, elevation, azimuth, light
    files = {**_split("smallnorb-5x46789x9x18x6x2x96x96-training", pairs[:6], cat[:6], info[:6]),
             **_split("smallnorb-5x01235x9x18x6x2x96x96-testing", pairs[6:], cat[6:], info[6:])}
    with serve_urls(monkeypatch, files):
        train = SmallNORB(split="train", verification_mode="no_checks")
        test = sds.load_dataset("small_norb", split="test", verification_mode="no_checks")
    assert len(train) == 6 and len(test) == 4
    sample = train[5]
    assert set(sample) == {"left_image", "right_image", "label", "category", "instance", "elevation", "azimuth",
                           "lighting"}
    assert sample["left_image"].shape == (96, 96) and sample["right_image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["left_image"], gray[5])
    np.testing.assert_array_equal(sample["right_image"], 255 - gray[5])
    assert sample["label"] == [0, 5, 5, 5, 5]  # category, instance, elevation, azimuth 10 / 2, lighting
    assert [sample[f] for f in ("category", "instance", "elevation", "azimuth", "lighting")] == sample["label"]
    assert test["category"] == [1, 2, 3, 4]
    assert test["azimuth"] == [6, 7, 8, 9]  # stored as 12, 14, 16, 18: halved
    np.testing.assert_array_equal(test[3]["left_image"], gray[9])
    assert train.info.num_examples == {"train": 24_300, "test": 24_300}
