"""SVHN from miniature `.mat` files (MATLAB v5, as the official ones) under the official URLs."""

from __future__ import annotations

import io

import numpy as np
import scipy.io

from stable_datasets.images import SVHN
from tests.fixtures.catalog import colour, digit_images, serve_urls

BASE = "http://ufldl.stanford.edu/housenumbers/"


def _mat(rgb: np.ndarray, labels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"X": rgb.transpose(1, 2, 3, 0), "y": labels.reshape(-1, 1)})
    return buf.getvalue()


def test_svhn_label_ten_is_zero_and_pixels_are_exact(monkeypatch):
    gray, digits = digit_images(10, 32)
    rgb = colour(gray)
    labels = np.where(digits == 0, 10, digits).astype(np.uint8)  # the files say 10 for the digit 0
    files = {BASE + "train_32x32.mat": _mat(rgb[:6], labels[:6]), BASE + "test_32x32.mat": _mat(rgb[6:8], labels[6:8]),
             BASE + "extra_32x32.mat": _mat(rgb[8:], labels[8:])}
    with serve_urls(monkeypatch, files):
        data = SVHN(verification_mode="no_checks")
    assert data.num_rows == {"train": 6, "test": 2, "extra": 2}
    np.testing.assert_array_equal(data["train"][2]["image"], rgb[2])  # lossless: no JPEG re-encode
    assert data["train"]["label"] == digits[:6].tolist()
    assert data["extra"]["label"] == digits[8:].tolist()
