"""HASYv2 from a miniature `.tar.bz2` laid out as the official one (hasy-data/v2-*.png, the folds' CSVs under
classification-task/) under the official URL. Ports upstream's checks: keys, (32, 32, 3) uint8, labels in range,
default config fold-1, another fold giving another test set."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import HASYv2
from stable_datasets.images.hasy_v2 import SYMBOL_IDS
from tests.fixtures.catalog import digit_images, png_bytes, serve_urls, tar_bytes

URL = "https://zenodo.org/record/259444/files/HASYv2.tar.bz2?download=1"
SYMBOLS = ["31", "1400", "70", "512", "31", "917"]


def _csv(rows: list[int]) -> bytes:
    lines = ["path,symbol_id,latex,user_id"]
    lines += [f"../../hasy-data/v2-{i:05d}.png,{SYMBOLS[i]},A,{10 + i}" for i in rows]
    return ("\n".join(lines) + "\n").encode()


def _archive(images: np.ndarray) -> bytes:
    members = {f"hasy-data/v2-{i:05d}.png": png_bytes(image) for i, image in enumerate(images)}
    members["classification-task/fold-1/train.csv"] = _csv([0, 1, 2, 3])
    members["classification-task/fold-1/test.csv"] = _csv([4, 5])
    members["classification-task/fold-2/train.csv"] = _csv([0, 1, 4, 5])
    members["classification-task/fold-2/test.csv"] = _csv([2, 3])
    return tar_bytes(members, mode="w:bz2")


def test_hasy_v2_folds_labels_and_pixels(monkeypatch):
    gray, _ = digit_images(6, 32)
    with serve_urls(monkeypatch, {URL: _archive(gray)}):
        fold1 = HASYv2(verification_mode="no_checks")
        fold2_test = sds.load_dataset("hasy_v2", name="fold-2", split="test", verification_mode="no_checks")
    train, test = fold1["train"], fold1["test"]
    assert fold1.num_rows == {"train": 4, "test": 2}
    sample = train[2]
    assert set(sample) == {"image", "label"}
    assert sample["image"].shape == (32, 32, 3) and sample["image"].dtype == np.uint8  # read as RGB, as upstream
    np.testing.assert_array_equal(sample["image"][..., 1], gray[2])
    names = train.features["label"].names
    assert [names[i] for i in train["label"]] == ["31", "1400", "70", "512"]
    assert [names[i] for i in test["label"]] == ["31", "917"]
    assert [names[i] for i in fold2_test["label"]] == ["70", "512"]
    np.testing.assert_array_equal(fold2_test[0]["image"][..., 0], gray[2])
    assert (len(names), names[0], names[-1]) == (369, "31", "1400") and names == SYMBOL_IDS


def test_hasy_v2_has_ten_folds_fold_1_first():
    assert [c.name for c in HASYv2.BUILDER_CONFIGS] == [f"fold-{i}" for i in range(1, 11)]
    assert HASYv2.create().config.name == "fold-1"
