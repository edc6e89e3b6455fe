"""Beans from miniature official zips: <split>/<class>/<file>.jpg."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import Beans
from tests.fixtures.catalog import serve_urls, zip_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

BASE = "https://storage.googleapis.com/ibeans/"


def test_beans_labels_are_the_class_folders(monkeypatch):
    jpgs = photos(5)
    files = {BASE + "train.zip": zip_bytes({"train/bean_rust/bean_rust_train.0.jpg": jpgs[0],
                                            "train/healthy/healthy_train.3.jpg": jpgs[1],
                                            "train/angular_leaf_spot/angular_leaf_spot_train.1.jpg": jpgs[2]}),
             BASE + "validation.zip": zip_bytes({"validation/healthy/healthy_val.0.jpg": jpgs[3]}),
             BASE + "test.zip": zip_bytes({"test/bean_rust/bean_rust_test.5.jpg": jpgs[4]})}
    with serve_urls(monkeypatch, files):
        data = Beans(verification_mode="no_checks")
        test = sds.load_dataset("beans", split="test", verification_mode="no_checks")
    assert data.num_rows == {"train": 3, "validation": 1, "test": 1}
    train = data["train"]
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == jpgs[:3]  # zip order, the JPEG bytes as published
    assert train["label"] == [2, 0, 1] and data["validation"]["label"] == [0] and test["label"] == [2]
    image = test[0]["image"]
    assert image.dtype == np.uint8 and image.shape == (16, 16, 3)
    np.testing.assert_array_equal(image, decoded(jpgs[4]))
    assert train.features["label"].names == ["healthy", "angular_leaf_spot", "bean_rust"]
    assert train.info.num_examples == {"train": 1_034, "validation": 133, "test": 128}
