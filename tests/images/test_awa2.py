"""AwA2 from a miniature official zip: Animals_with_Attributes2/JPEGImages/<class>/<file>.jpg."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import AWA2
from tests.fixtures.catalog import serve_urls, zip_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "https://cvml.ista.ac.at/AwA2/AwA2-data.zip"
ROOT = "Animals_with_Attributes2/"


def test_awa2_rows_come_class_by_class_in_label_order(monkeypatch):
    jpgs = photos(5)
    archive = zip_bytes({f"{ROOT}classes.txt": b"1\tantelope\n",
                         f"{ROOT}JPEGImages/dolphin/dolphin_10001.jpg": jpgs[0],
                         f"{ROOT}JPEGImages/antelope/antelope_10002.jpg": jpgs[1],
                         f"{ROOT}JPEGImages/ox/ox_10001.jpg": jpgs[2],
                         f"{ROOT}JPEGImages/antelope/antelope_10001.jpg": jpgs[3],
                         f"{ROOT}JPEGImages/grizzly+bear/grizzly+bear_10001.jpg": jpgs[4]})
    with serve_urls(monkeypatch, {URL: archive}):
        train = AWA2(split="train", verification_mode="no_checks")
        again = sds.load_dataset("awa2", split="train[3:]", verification_mode="no_checks")
    assert len(train) == 5 and len(again) == 2
    assert set(train[0]) == {"image", "label"}
    # antelope (0) in zip order, grizzly+bear (1), ox (20), dolphin (49): upstream's class-by-class order
    assert stored_images(train) == [jpgs[1], jpgs[3], jpgs[4], jpgs[2], jpgs[0]]
    assert train["label"] == [0, 0, 1, 20, 49] and again["label"] == [20, 49]
    np.testing.assert_array_equal(train[2]["image"], decoded(jpgs[4]))
    names = train.features["label"].names
    assert len(names) == 50 and names[0] == "antelope" and names[20] == "ox" and names[-1] == "dolphin"
    assert train.info.num_examples == {"train": 37_322}
