"""MNIST from miniature IDX files under the official URLs (upstream's test, ported: keys, shapes, counts)."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import ChecksumError
from stable_datasets.images import MNIST
from tests.fixtures.catalog import digit_images, idx_bytes, serve_urls

BASE = "https://storage.googleapis.com/cvdf-datasets/mnist/"


def _files() -> tuple[dict[str, bytes], np.ndarray, np.ndarray]:
    images, labels = digit_images(30, 28)
    files = {}
    for split, part in (("train", slice(0, 20)), ("t10k", slice(20, 30))):
        files[f"{BASE}{split}-images-idx3-ubyte.gz"] = idx_bytes(images[part])
        files[f"{BASE}{split}-labels-idx1-ubyte.gz"] = idx_bytes(labels[part])
    return files, images, labels


def test_mnist_rows_keys_and_one_channel(monkeypatch):
    files, images, labels = _files()
    with serve_urls(monkeypatch, files):
        train = MNIST(split="train", verification_mode="no_checks")
        test = sds.load_dataset("mnist", split="test", verification_mode="no_checks")
    assert len(train) == 20 and len(test) == 10
    sample = train[3]
    assert set(sample) == {"image", "label"}
    assert sample["image"].shape == (28, 28) and sample["image"].dtype == np.uint8  # one channel, as upstream's
    np.testing.assert_array_equal(sample["image"], images[3])
    assert train["label"] == labels[:20].tolist()
    assert test["label"] == labels[20:].tolist()
    assert train.features["label"].names == [str(d) for d in range(10)]


def test_mnist_real_checksums_and_row_counts_refuse_the_stand_in(monkeypatch):
    files, _, _ = _files()
    files.update({url.replace(BASE, "https://ossci-datasets.s3.amazonaws.com/mnist/"): data
                  for url, data in files.items()})  # the mirror serves the same stand-in
    with serve_urls(monkeypatch, files), pytest.raises(ChecksumError, match="expected 9912422 bytes, got"):
        MNIST(split="train")
