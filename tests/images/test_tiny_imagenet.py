"""Tiny ImageNet from a miniature `tiny-imagenet-200.zip` (the official layout) under the official URL."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.images import TinyImagenet
from tests.fixtures.catalog import colour, digit_images, jpeg_bytes, png_bytes, serve_urls, zip_bytes

URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
ROOT = "tiny-imagenet-200/"
FIRST, LAST = "n02124075", "n02504458"  # the first and last of upstream's class list


def archive(rgb: np.ndarray, annotations: str) -> bytes:
    return zip_bytes({
        ROOT + "wnids.txt": f"{FIRST}\n{LAST}\n".encode(),
        ROOT + f"train/{LAST}/{LAST}_boxes.txt": b"",
        ROOT + f"train/{LAST}/images/{LAST}_1.JPEG": png_bytes(rgb[0]),
        ROOT + f"train/{LAST}/images/{LAST}_0.JPEG": png_bytes(rgb[1]),
        ROOT + f"train/{FIRST}/images/{FIRST}_4.JPEG": png_bytes(rgb[2]),
        ROOT + "val/val_annotations.txt": annotations.encode(),
        ROOT + "val/images/val_0.JPEG": png_bytes(rgb[3]),
        ROOT + "val/images/val_1.JPEG": jpeg_bytes(rgb[4]),
        ROOT + "test/images/test_1.JPEG": png_bytes(rgb[5]),
        ROOT + "test/images/test_0.JPEG": png_bytes(rgb[6]),
    })


def test_tiny_imagenet_splits_in_order_with_labels(monkeypatch):
    gray, _ = digit_images(7, 64)
    rgb = colour(gray)
    annotations = f"val_1.JPEG\t{FIRST}\t0\t0\t63\t63\nval_0.JPEG\t{LAST}\t1\t2\t30\t40\n"
    with serve_urls(monkeypatch, {URL: archive(rgb, annotations)}):
        data = TinyImagenet(verification_mode="no_checks")
        validation = sds.load_dataset("tiny_imagenet", split="validation", verification_mode="no_checks")
    train, test = data["train"], data["test"]
    assert set(train[0]) == {"image", "label"}
    assert train["label"] == [0, 199, 199]  # class folders sorted, then file names
    np.testing.assert_array_equal(train[0]["image"], rgb[2])
    np.testing.assert_array_equal(train[1]["image"], rgb[1])
    assert train[0]["image"].shape == (64, 64, 3) and train[0]["image"].dtype == np.uint8
    assert validation["label"] == [0, 199]  # val_annotations.txt's order
    np.testing.assert_array_equal(validation[1]["image"], rgb[3])
    assert test["label"] == [None, None]
    np.testing.assert_array_equal(test[0]["image"], rgb[6])
    assert train.features["label"].names[0] == FIRST and train.features["label"].names[-1] == LAST
    assert train.info.num_examples == {"train": 100_000, "validation": 10_000, "test": 10_000}


def test_tiny_imagenet_missing_validation_image_names_the_member(monkeypatch):
    gray, _ = digit_images(7, 64)
    with serve_urls(monkeypatch, {URL: archive(colour(gray), f"val_9.JPEG\t{FIRST}\n")}), \
            pytest.raises(StableDatasetsError, match=r"lacks the member tiny-imagenet-200/val/images/val_9\.JPEG"):
        TinyImagenet(split="validation", verification_mode="no_checks")
