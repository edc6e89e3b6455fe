"""KMNIST from miniature IDX files under the official URLs (upstream's test, ported: keys, (28, 28) uint8, label
range, split sizes)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import KMNIST
from tests.fixtures.catalog import digit_images, idx_bytes, serve_urls

BASE = "https://codh.rois.ac.jp/kmnist/dataset/kmnist/"


def test_kmnist_rows_labels_and_one_channel(monkeypatch):
    images, labels = digit_images(10, 28, offset=40)
    files = {}
    for prefix, part in (("train", slice(0, 7)), ("t10k", slice(7, 10))):
        files[f"{BASE}{prefix}-images-idx3-ubyte.gz"] = idx_bytes(images[part])
        files[f"{BASE}{prefix}-labels-idx1-ubyte.gz"] = idx_bytes(labels[part])
    with serve_urls(monkeypatch, files):
        data = KMNIST(verification_mode="no_checks")
        test = sds.load_dataset("kmnist", split="test", verification_mode="no_checks")
    train = data["train"]
    assert data.num_rows == {"train": 7, "test": 3}
    assert set(train[0]) == {"image", "label"}
    assert train[6]["image"].shape == (28, 28) and train[6]["image"].dtype == np.uint8
    np.testing.assert_array_equal(train[6]["image"], images[6])
    np.testing.assert_array_equal(test[0]["image"], images[7])
    assert train["label"] == labels[:7].tolist() and test["label"] == labels[7:].tolist()
    assert train.features["label"].names == ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
    assert train.info.num_examples == {"train": 60_000, "test": 10_000}
