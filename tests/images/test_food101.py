"""Food-101 from a miniature official archive: images/<class>/<id>.jpg listed in meta/{train,test}.txt."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import Food101
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz"


def test_food101_splits_follow_the_meta_lists_in_archive_order(monkeypatch):
    jpgs = photos(5)
    # stored order: waffles before apple_pie; the meta lists name other orders and leave 1 image unlisted
    archive = tar_bytes({"food-101/images/waffles/11.jpg": jpgs[0], "food-101/images/apple_pie/7.jpg": jpgs[1],
                         "food-101/images/apple_pie/3.jpg": jpgs[2], "food-101/images/sushi/5.jpg": jpgs[3],
                         "food-101/images/sushi/9.jpg": jpgs[4],
                         "food-101/meta/classes.txt": b"apple_pie\n",
                         "food-101/meta/train.txt": b"apple_pie/3\napple_pie/7\nwaffles/11\n",
                         "food-101/meta/test.txt": b"sushi/5\n"})
    with serve_urls(monkeypatch, {URL: archive}):
        train = Food101(split="train", verification_mode="no_checks")
        test = sds.load_dataset("food101", split="test", verification_mode="no_checks")
    assert len(train) == 3 and len(test) == 1
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[0], jpgs[1], jpgs[2]]  # the JPEG bytes as published
    names = train.features["label"].names
    assert [names[i] for i in train["label"]] == ["waffles", "apple_pie", "apple_pie"]
    assert train["label"] == [100, 0, 0] and test["label"] == [names.index("sushi")]
    image = test[0]["image"]
    assert image.dtype == np.uint8 and image.shape == (16, 16, 3)
    np.testing.assert_array_equal(image, decoded(jpgs[3]))
    assert len(names) == 101 and names[0] == "apple_pie" and names[-1] == "waffles"
    assert train.info.num_examples == {"train": 75_750, "test": 25_250}
