"""notMNIST from miniature IDX files under upstream's URLs (upstream's test, ported: keys, (28, 28) uint8, label
range A-J, split sizes)."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import SplitRowsError
from stable_datasets.images import NotMNIST
from tests.fixtures.catalog import digit_images, idx_bytes, serve_urls

BASE = "https://github.com/davidflanagan/notMNIST-to-MNIST/raw/refs/heads/master/"


def _files(images: np.ndarray, labels: np.ndarray, n_train: int) -> dict[str, bytes]:
    return {BASE + "train-images-idx3-ubyte.gz": idx_bytes(images[:n_train]),
            BASE + "train-labels-idx1-ubyte.gz": idx_bytes(labels[:n_train]),
            BASE + "t10k-images-idx3-ubyte.gz": idx_bytes(images[n_train:]),
            BASE + "t10k-labels-idx1-ubyte.gz": idx_bytes(labels[n_train:])}


def test_not_mnist_rows_and_letters(monkeypatch):
    images, labels = digit_images(9, 28, offset=100)
    with serve_urls(monkeypatch, _files(images, labels, 6)):
        train = NotMNIST(split="train", verification_mode="no_checks")
        test = sds.load_dataset("not_mnist", split="test", verification_mode="no_checks")
    assert len(train) == 6 and len(test) == 3
    assert set(train[0]) == {"image", "label"}
    assert train[2]["image"].shape == (28, 28) and train[2]["image"].dtype == np.uint8
    np.testing.assert_array_equal(train[2]["image"], images[2])
    assert train["label"] == labels[:6].tolist() and test["label"] == labels[6:].tolist()
    assert train.features["label"].names == list("ABCDEFGHIJ")


def test_not_mnist_row_counts_are_checked_without_no_checks(monkeypatch):
    images, labels = digit_images(9, 28)
    with serve_urls(monkeypatch, _files(images, labels, 6)):
        with pytest.raises(SplitRowsError, match="expected 60000 rows, got 6"):
            NotMNIST(split="train")
