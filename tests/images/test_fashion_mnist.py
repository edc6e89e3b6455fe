"""Fashion-MNIST from miniature IDX files under the official URLs (upstream's test, ported: keys, shapes, label
range, split sizes)."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import ChecksumError
from stable_datasets.images import FashionMNIST
from tests.fixtures.catalog import digit_images, idx_bytes, serve_urls

BASE = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"


def _files() -> tuple[dict[str, bytes], np.ndarray, np.ndarray]:
    images, labels = digit_images(12, 28)
    files = {}
    for prefix, part in (("train", slice(0, 8)), ("t10k", slice(8, 12))):
        files[f"{BASE}{prefix}-images-idx3-ubyte.gz"] = idx_bytes(images[part])
        files[f"{BASE}{prefix}-labels-idx1-ubyte.gz"] = idx_bytes(labels[part])
    return files, images, labels


def test_fashion_mnist_rows_labels_and_one_channel(monkeypatch):
    files, images, labels = _files()
    with serve_urls(monkeypatch, files):
        train = FashionMNIST(split="train", verification_mode="no_checks")
        test = sds.load_dataset("fashion_mnist", split="test", verification_mode="no_checks")
    assert len(train) == 8 and len(test) == 4
    sample = train[5]
    assert set(sample) == {"image", "label"}
    assert sample["image"].shape == (28, 28) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], images[5])
    np.testing.assert_array_equal(test[3]["image"], images[11])
    assert train["label"] == labels[:8].tolist() and test["label"] == labels[8:].tolist()
    names = train.features["label"].names
    assert (names[0], names[-1], len(names)) == ("T-shirt/top", "Ankle boot", 10)
    assert train.info.num_examples == {"train": 60_000, "test": 10_000}


def test_fashion_mnist_checks_the_recorded_sizes(monkeypatch):
    files, _, _ = _files()
    with serve_urls(monkeypatch, files), pytest.raises(ChecksumError, match="expected 26421880 bytes"):
        FashionMNIST(split="train")
