"""CIFAR-100 from a miniature binary archive (the non-pickled one) under the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import CIFAR100
from tests.fixtures.catalog import colour, digit_images, serve_urls, tar_bytes

URL = "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz"


def _record(coarse: np.ndarray, fine: np.ndarray, rgb: np.ndarray) -> bytes:
    planes = rgb.transpose(0, 3, 1, 2).reshape(len(rgb), -1)
    return np.concatenate([coarse[:, None], fine[:, None], planes], 1).astype(np.uint8).tobytes()


def test_cifar100_fine_and_coarse_labels(monkeypatch):
    gray, digits = digit_images(9, 32)
    rgb = colour(gray)
    fine, coarse = (digits * 11).astype(np.uint8), (digits * 2).astype(np.uint8)
    archive = tar_bytes({"cifar-100-binary/coarse_label_names.txt": b"aquatic_mammals\n",
                         "cifar-100-binary/test.bin": _record(coarse[6:], fine[6:], rgb[6:]),
                         "cifar-100-binary/train.bin": _record(coarse[:6], fine[:6], rgb[:6])})
    with serve_urls(monkeypatch, {URL: archive}):
        train = CIFAR100(split="train", verification_mode="no_checks", storage_format="lance")
        test = sds.load_dataset("cifar100", split="test[1:]", verification_mode="no_checks")
    assert len(train) == 6 and len(test) == 2
    assert set(train[0]) == {"image", "label", "superclass"}
    np.testing.assert_array_equal(train[4]["image"], rgb[4])
    assert train["label"] == fine[:6].tolist() and train["superclass"] == coarse[:6].tolist()
    assert test["label"] == fine[7:].tolist()
    assert train.features["label"].names[:3] == ["apple", "aquarium_fish", "baby"]
    assert train.features["superclass"].names[-1] == "vehicles_2"
    assert train.info.num_examples == {"train": 50_000, "test": 10_000}
