"""Moving MNIST from a miniature `mnist_test_seq.npy` (the official (T, N, H, W) layout) of real digits."""

from __future__ import annotations

import io

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.video import MovingMNIST
from tests.fixtures.catalog import digit_images, serve_urls

URL = "http://www.cs.toronto.edu/~nitish/unsupervised_video/mnist_test_seq.npy"


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def test_moving_mnist_sequences_are_the_files_columns(monkeypatch):
    gray, _ = digit_images(20 * 3, 64)
    source = gray.reshape(20, 3, 64, 64)  # (T, N, H, W), as the official file
    with serve_urls(monkeypatch, {URL: npy_bytes(source)}):
        data = MovingMNIST(split="test", verification_mode="no_checks")
        again = sds.load_dataset("moving_mnist", split="test[2:]", verification_mode="no_checks")
    assert len(data) == 3 and set(data[0]) == {"video"}
    video = data[0]["video"]
    assert video.shape == (20, 64, 64, 1) and video.dtype == np.uint8
    for n in range(3):
        np.testing.assert_array_equal(data[n]["video"], source[:, n, :, :, None])
    np.testing.assert_array_equal(again[0]["video"], source[:, 2, :, :, None])
    assert data.info.num_examples == {"test": 10_000}


def test_moving_mnist_refuses_a_file_of_another_shape(monkeypatch):
    with serve_urls(monkeypatch, {URL: npy_bytes(np.zeros((10, 2, 64, 64), np.uint8))}), \
            pytest.raises(StableDatasetsError, match=r"expected a uint8 array of shape \(20, N, 64, 64\), got uint8 "
                                                     r"\(10, 2, 64, 64\)"):
        MovingMNIST(split="test", verification_mode="no_checks")
