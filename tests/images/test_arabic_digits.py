"""Arabic Handwritten Digits from a miniature CSV zip laid out as the official one (pixels in column-major order,
one label a line) under the official URL (upstream's test, ported: keys, (28, 28) uint8, labels 0-9, sizes)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import ArabicDigits
from tests.fixtures.catalog import digit_images, serve_urls, zip_bytes

URL = ("https://raw.githubusercontent.com/mloey/Arabic-Handwritten-Digits-Dataset/master/"
       "Arabic%20Handwritten%20Digits%20Dataset%20CSV.zip")


def _csv(rows: np.ndarray) -> bytes:
    return "".join(",".join(str(v) for v in row) + "\n" for row in rows).encode()


def test_arabic_digits_csv_rows_are_upright_images(monkeypatch):
    images, labels = digit_images(8, 28, offset=3)
    flat = images.transpose(0, 2, 1).reshape(8, 784)  # MATLAB writes each image column by column
    archive = zip_bytes({"csvTrainImages 60k x 784.csv": _csv(flat[:5]),
                         "csvTrainLabel 60k x 1.csv": _csv(labels[:5, None]),
                         "csvTestImages 10k x 784.csv": _csv(flat[5:]),
                         "csvTestLabel 10k x 1.csv": _csv(labels[5:, None])})
    with serve_urls(monkeypatch, {URL: archive}):
        train = ArabicDigits(split="train", verification_mode="no_checks")
        test = sds.load_dataset("arabic_digits", split="test", verification_mode="no_checks")
    assert len(train) == 5 and len(test) == 3
    assert set(train[0]) == {"image", "label"}
    assert train[4]["image"].shape == (28, 28) and train[4]["image"].dtype == np.uint8
    np.testing.assert_array_equal(train[4]["image"], images[4])
    np.testing.assert_array_equal(test[0]["image"], images[5])
    assert train["label"] == labels[:5].tolist() and test["label"] == labels[5:].tolist()
    assert train.info.num_examples == {"train": 60_000, "test": 10_000}
