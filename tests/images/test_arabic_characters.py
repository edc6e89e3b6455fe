"""Arabic Handwritten Characters from miniature zips of grayscale PNGs named as the official ones (upstream's test,
ported: keys, (32, 32) uint8, labels 0-27 from the names, split sizes)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import ArabicCharacters
from tests.fixtures.catalog import digit_images, png_bytes, serve_urls, zip_bytes

BASE = "https://github.com/mloey/Arabic-Handwritten-Characters-Dataset/raw/master/"


def test_arabic_characters_png_bytes_and_labels_from_names(monkeypatch):
    images, _ = digit_images(7, 32)
    classes = [1, 28, 5, 14, 2, 3, 27]  # as in the names: 1-based
    train = {f"Train Images 13440x32x32/train/id_{i + 1}_label_{classes[i]}.png": png_bytes(images[i])
             for i in range(5)}
    test = {f"Test Images 3360x32x32/test/id_{i - 4}_label_{classes[i]}.png": png_bytes(images[i])
            for i in range(5, 7)}
    files = {BASE + "Train%20Images%2013440x32x32.zip": zip_bytes(train),
             BASE + "Test%20Images%203360x32x32.zip": zip_bytes(test)}
    with serve_urls(monkeypatch, files):
        data = ArabicCharacters(verification_mode="no_checks")
        test_split = sds.load_dataset("arabic_characters", split="test", verification_mode="no_checks")
    assert data.num_rows == {"train": 5, "test": 2}
    sample = data["train"][1]
    assert set(sample) == {"image", "label"}
    assert sample["image"].shape == (32, 32) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], images[1])
    assert data["train"]["label"] == [0, 27, 4, 13, 1]
    assert test_split["label"] == [2, 26]
    np.testing.assert_array_equal(test_split[1]["image"], images[6])
    assert data["train"].features["label"].names[-1] == "27"
    assert data["train"].info.num_examples == {"train": 13_440, "test": 3_360}
