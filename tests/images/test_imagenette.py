"""Imagenette from a miniature `imagenette2.tgz` (the official layout) under the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import Imagenette
from tests.fixtures.catalog import colour, digit_images, png_bytes, serve_urls, tar_bytes

URL = "https://s3.amazonaws.com/fast-ai-imageclas/imagenette2.tgz"


def test_imagenette_splits_labels_and_untouched_pixels(monkeypatch):
    gray, _ = digit_images(5, 24)
    rgb = colour(gray)
    archive = tar_bytes({
        "imagenette2/noisy_imagenette.csv": b"path,noisy_labels_0\n",
        "imagenette2/train/n03888257/n03888257_1.JPEG": png_bytes(rgb[0]),
        "imagenette2/train/n01440764/n01440764_7.JPEG": png_bytes(rgb[1]),
        "imagenette2/train/n09999999/n09999999_1.JPEG": png_bytes(rgb[2]),  # not one of the ten: skipped
        "imagenette2/val/n02102040/n02102040_3.JPEG": png_bytes(rgb[3]),
        "imagenette2/val/n03417042/n03417042_9.JPEG": png_bytes(rgb[4]),
    })
    with serve_urls(monkeypatch, {URL: archive}):
        data = Imagenette(verification_mode="no_checks")
        validation = sds.load_dataset("imagenette", split="validation", verification_mode="no_checks")
    assert sorted(data) == ["train", "validation"]
    train = data["train"]
    assert set(train[0]) == {"image", "label"}
    assert train["label"] == [9, 0] and validation["label"] == [1, 6]
    np.testing.assert_array_equal(train[0]["image"], rgb[0])  # lossless: the member's bytes as stored
    np.testing.assert_array_equal(validation[1]["image"], rgb[4])
    assert train.features["label"].names[0] == "n01440764" and train.features["label"].names[-1] == "n03888257"
    assert train.info.num_examples == {"train": 9_469, "validation": 3_925}
