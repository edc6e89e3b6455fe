"""STL-10 from a miniature binary archive laid out as the official one (stl10_binary/*_X.bin of column-major
3x96x96 records, *_y.bin of 1-based label bytes) under the official URL. Ports upstream's checks: keys,
(96, 96, 3) uint8, labels 0-9, unlabeled rows labelled -1."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import ChecksumError
from stable_datasets.images import STL10
from tests.fixtures.catalog import colour, digit_images, serve_urls, tar_bytes

URL = "https://cs.stanford.edu/~acoates/stl10/stl10_binary.tar.gz"


def _records(rgb: np.ndarray) -> bytes:
    return rgb.transpose(0, 3, 2, 1).astype(np.uint8).tobytes()  # (N, C, W, H): each plane column by column


@pytest.fixture
def archive():
    gray, digits = digit_images(8, 96)
    rgb = colour(gray)
    members = {"stl10_binary/class_names.txt": b"airplane\n",
               "stl10_binary/train_X.bin": _records(rgb[:4]), "stl10_binary/train_y.bin": (digits[:4] + 1).tobytes(),
               "stl10_binary/test_X.bin": _records(rgb[4:6]), "stl10_binary/test_y.bin": (digits[4:6] + 1).tobytes(),
               "stl10_binary/unlabeled_X.bin": _records(rgb[6:])}
    return tar_bytes(members), rgb, digits


def test_stl10_pixels_labels_and_unlabeled(monkeypatch, archive):
    data, rgb, digits = archive
    with serve_urls(monkeypatch, {URL: data}):
        splits = STL10(verification_mode="no_checks")
        unlabeled = sds.load_dataset("stl10", split="unlabeled", verification_mode="no_checks")
    assert splits.num_rows == {"train": 4, "test": 2, "unlabeled": 2}
    sample = splits["train"][3]
    assert set(sample) == {"image", "label"}
    assert sample["image"].shape == (96, 96, 3) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], rgb[3])  # lossless, upright, channels in order
    np.testing.assert_array_equal(splits["test"][1]["image"], rgb[5])
    assert splits["train"]["label"] == digits[:4].tolist() and splits["test"]["label"] == digits[4:6].tolist()
    assert unlabeled["label"] == [-1, -1]
    np.testing.assert_array_equal(unlabeled[0]["image"], rgb[6])
    assert splits["train"].features["label"].names[:2] == ["airplane", "bird"]
    assert splits["train"].info.num_examples == {"train": 5_000, "test": 8_000, "unlabeled": 100_000}


def test_stl10_checks_the_recorded_size(monkeypatch, archive):
    with serve_urls(monkeypatch, {URL: archive[0], URL.replace("https://cs", "http://ai"): archive[0]}):
        with pytest.raises(ChecksumError, match="expected 2640397119 bytes"):
            STL10(split="train")
