"""EMNIST from a miniature `matlab.zip` (MATLAB v5 members `matlab/emnist-<config>.mat`, each a `dataset` struct
of train/test structs of images (N, 784) and labels (N, 1), as the official ones) under the official URL. Ports
upstream's checks: keys, (28, 28) uint8, label ranges (letters shifted to 0-25), split sizes."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.io

import stable_datasets as sds
from stable_datasets.images import EMNIST
from stable_datasets.images.emnist import CONFIGS
from tests.fixtures.catalog import digit_images, serve_urls, zip_bytes

URL = "https://biometrics.nist.gov/cs_links/EMNIST/matlab.zip"


def _mat(train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]) -> bytes:
    def part(images: np.ndarray, labels: np.ndarray) -> dict:
        return {"images": images.reshape(len(images), 784), "labels": labels.reshape(-1, 1).astype(np.float64)}

    buf = io.BytesIO()
    scipy.io.savemat(buf, {"dataset": {"train": part(*train), "test": part(*test)}}, do_compression=True)
    return buf.getvalue()


@pytest.fixture
def archive():
    images, digits = digit_images(10, 28, offset=7)
    letters = digits.astype(np.int64) * 2 + 1  # the file's letters are numbered 1-26
    members = {"matlab/emnist-digits.mat": _mat((images[:6], digits[:6]), (images[6:], digits[6:])),
               "matlab/emnist-letters.mat": _mat((images[:4], letters[:4]), (images[4:], letters[4:]))}
    return zip_bytes(members), images, digits, letters


def test_emnist_digits_rows_as_upstream_reads_them(monkeypatch, archive):
    data, images, digits, _ = archive
    with serve_urls(monkeypatch, {URL: data}):
        train = EMNIST(config_name="digits", split="train", verification_mode="no_checks")
        test = sds.load_dataset("emnist", name="digits", split="test", verification_mode="no_checks")
    assert len(train) == 6 and len(test) == 4
    assert set(train[0]) == {"image", "label"}
    assert train[1]["image"].shape == (28, 28) and train[1]["image"].dtype == np.uint8
    np.testing.assert_array_equal(train[1]["image"], images[1])  # the 784 values in the file's order
    np.testing.assert_array_equal(test[3]["image"], images[9])
    assert train["label"] == digits[:6].tolist() and test["label"] == digits[6:].tolist()
    assert train.features["label"].num_classes == 10
    assert train.info.num_examples == {"train": 240_000, "test": 40_000}


def test_emnist_letters_are_shifted_to_zero(monkeypatch, archive):
    data, images, _, letters = archive
    with serve_urls(monkeypatch, {URL: data}):
        data = EMNIST(config_name="letters", verification_mode="no_checks")
    assert data["train"]["label"] == (letters[:4] - 1).tolist()
    assert data["test"]["label"] == (letters[4:] - 1).tolist()
    assert data["train"].features["label"].num_classes == 26
    np.testing.assert_array_equal(data["test"][0]["image"], images[4])


def test_emnist_has_upstreams_six_configs_with_their_row_counts():
    assert [c.name for c in EMNIST.BUILDER_CONFIGS] == ["byclass", "bymerge", "balanced", "letters", "digits",
                                                        "mnist"]
    assert EMNIST.create().config.name == "byclass"  # upstream's default: its first config
    counts = {name: EMNIST.create(name).info.num_examples for name in CONFIGS}
    assert counts["balanced"] == {"train": 112_800, "test": 18_800}
    assert counts["byclass"] == counts["bymerge"] == {"train": 697_932, "test": 116_323}
    assert EMNIST.create("byclass").info.features["label"].num_classes == 62
