"""The bundled builders, on files in the original formats served from 127.0.0.1."""

from __future__ import annotations

import gzip
import struct

import cv2
import numpy as np
from sklearn.datasets import load_digits

import stable_datasets as sds


def _real_digit_images(n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    digits = load_digits()
    images = np.round(digits.images[:n] * (255 / 16)).astype(np.uint8)
    resized = np.stack([cv2.resize(im, (size, size), interpolation=cv2.INTER_NEAREST) for im in images])
    return resized, digits.target[:n].astype(np.uint8)


def _idx(array: np.ndarray) -> bytes:
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return gzip.compress(header + array.tobytes())


def test_digits_matches_scikit_learn():
    train = sds.load_dataset("digits", split="train")
    test = sds.load_dataset("digits", split="test")
    assert (len(train), len(test)) == (1438, 359)
    digits = load_digits()
    row = train[0]
    index = 0  # the first train row is the smallest sklearn index not drawn for test
    held_out = set(np.random.default_rng(0).permutation(1797)[:359].tolist())
    index = min(set(range(1797)) - held_out)
    expected = np.round(digits.images[index] * (255 / 16)).astype(np.uint8)
    assert row["image"].shape == (8, 8, 3)
    np.testing.assert_array_equal(row["image"][:, :, 0], expected)
    assert row["label"] == digits.target[index]
    assert train.features["label"].names == [str(d) for d in range(10)]
