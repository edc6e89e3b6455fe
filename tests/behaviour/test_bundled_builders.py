"""The bundled builders, on files in the original formats served from 127.0.0.1."""

from __future__ import annotations

import gzip
import io
import json
import struct
import tarfile

import cv2
import numpy as np
import pytest
from sklearn.datasets import load_digits

import stable_datasets as sds
from stable_datasets.errors import DownloadError
from tests.http_server import FileServer


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


def test_mnist_from_idx_files(monkeypatch):
    images, labels = _real_digit_images(30, 28)
    with FileServer() as server:
        for split, sl in (("train", slice(0, 20)), ("t10k", slice(20, 30))):
            server.files[f"/mnist/{split}-images-idx3-ubyte.gz"] = _idx(images[sl])
            server.files[f"/mnist/{split}-labels-idx1-ubyte.gz"] = _idx(labels[sl])
        monkeypatch.setenv("STABLE_DATASETS_URL_REWRITES", json.dumps({
            "https://storage.googleapis.com/cvdf-datasets/mnist/": server.url + "/mnist/",
            "https://ossci-datasets.s3.amazonaws.com/mnist/": server.url + "/mirror/"}))
        # The test files are not the real MNIST files: the real checksums must reject them.
        with pytest.raises(DownloadError, match="expected sha256 440fcabf73cc546fa21475e81ea370265605f56be2"):
            sds.load_dataset("mnist", split="train")
        ds = sds.load_dataset("mnist", verification_mode="no_checks")
    assert ds.num_rows == {"train": 20, "test": 10}
    np.testing.assert_array_equal(ds["train"][3]["image"][:, :, 0], images[3])
    assert ds["test"]["label"] == labels[20:30].tolist()


def test_cifar10_from_binary_archive(monkeypatch):
    gray, labels = _real_digit_images(12, 32)
    rgb = np.stack([gray, 255 - gray, gray // 2], axis=-1)  # distinct channels catch plane-order bugs
    records = {}
    for i, name in enumerate(["data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                              "data_batch_5.bin", "test_batch.bin"]):
        chunk = slice(2 * i, 2 * i + 2)
        planes = rgb[chunk].transpose(0, 3, 1, 2).reshape(2, -1)
        records[name] = np.concatenate([labels[chunk, None], planes], axis=1).astype(np.uint8).tobytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in records.items():
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with FileServer() as server:
        server.files["/kriz/cifar-10-binary.tar.gz"] = buf.getvalue()
        monkeypatch.setenv("STABLE_DATASETS_URL_REWRITES",
                           json.dumps({"https://www.cs.toronto.edu/~kriz/": server.url + "/kriz/"}))
        train = sds.load_dataset("cifar10", split="train", verification_mode="no_checks")
        test = sds.load_dataset("cifar10", split="test", verification_mode="no_checks")
        assert server.hits("/kriz/cifar-10-binary.tar.gz") == 1
    assert len(train) == 10 and len(test) == 2
    np.testing.assert_array_equal(train[5]["image"], rgb[5])
    np.testing.assert_array_equal(test[1]["image"], rgb[11])
    assert train.features["label"].int2str(train[0]["label"]) == train.features["label"].names[labels[0]]
