"""Linnaeus 5 from a miniature RAR archive (stored members, the real container format) under the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import Linnaeus5
from tests.fixtures.catalog import serve_urls
from tests.fixtures.image_archives import decoded, photos, rar_bytes, stored_images

URL = "http://chaladze.com/l5/img/Linnaeus%205%20256X256.rar"
ROOT = "Linnaeus 5 256X256/"


def test_linnaeus5_reads_the_rar_in_place(monkeypatch):
    jpgs = photos(5)
    archive = rar_bytes({f"{ROOT}train/other/1_256.jpg": jpgs[0], f"{ROOT}test/dog/2_256.jpg": jpgs[1],
                         f"{ROOT}train/berry/3_256.jpg": jpgs[2], f"{ROOT}train/bird/4_256.jpg": jpgs[3],
                         f"{ROOT}readme.txt": b"Linnaeus 5", f"{ROOT}test/flower/5_256.jpg": jpgs[4]})
    with serve_urls(monkeypatch, {URL: archive}):
        train = Linnaeus5(split="train", verification_mode="no_checks")
        test = sds.load_dataset("linnaeus5", split="test", verification_mode="no_checks")
    assert len(train) == 3 and len(test) == 2
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[0], jpgs[2], jpgs[3]]  # archive order, the JPEG bytes as published
    assert train["label"] == [4, 0, 1] and test["label"] == [2, 3]
    np.testing.assert_array_equal(test[1]["image"], decoded(jpgs[4]))
    assert train.features["label"].names == ["berry", "bird", "dog", "flower", "other"]
    assert train.info.num_examples == {"train": 6_000, "test": 2_000}
