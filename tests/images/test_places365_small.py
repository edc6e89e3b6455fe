"""Places365-Standard (small) from miniature official tars (train, val, file lists) under the official URLs."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import Places365Small
from tests.fixtures.catalog import colour, digit_images, jpeg_bytes, png_bytes, serve_urls, tar_bytes

BASE = "http://data.csail.mit.edu/places/places365/"


def test_places365_small_labels_from_folders_and_the_val_list(monkeypatch):
    gray, _ = digit_images(6, 32)
    rgb = colour(gray)
    train = tar_bytes({"data_256/z/zen_garden/00000001.jpg": png_bytes(rgb[0]),
                       "data_256/a/apartment_building/outdoor/00000002.jpg": png_bytes(rgb[1]),
                       "data_256/a/airfield/00000003.jpg": jpeg_bytes(rgb[2])}, mode="w")
    val = tar_bytes({"val_256/Places365_val_00000002.jpg": png_bytes(rgb[3]),
                     "val_256/Places365_val_00000001.jpg": png_bytes(rgb[4]),
                     "val_256/Places365_val_00000009.jpg": png_bytes(rgb[5])}, mode="w")  # not listed: skipped
    filelist = tar_bytes({"categories_places365.txt": b"/a/airfield 0\n",
                          "places365_train_standard.txt": b"/a/airfield/00000003.jpg 0\n",
                          "places365_val.txt": b"Places365_val_00000001.jpg 165\nPlaces365_val_00000002.jpg 364\n"},
                         mode="w")
    files = {BASE + "train_256_places365standard.tar": train, BASE + "val_256.tar": val,
             BASE + "filelist_places365-standard.tar": filelist}
    with serve_urls(monkeypatch, files):
        data = Places365Small(verification_mode="no_checks")
        validation = sds.load_dataset("places365_small", split="validation", verification_mode="no_checks")
    train_rows = data["train"]
    assert sorted(data) == ["train", "validation"] and set(train_rows[0]) == {"image", "label"}
    names = train_rows.features["label"].names
    assert [names[i] for i in train_rows["label"]] == ["/z/zen_garden", "/a/apartment_building/outdoor",
                                                       "/a/airfield"]
    np.testing.assert_array_equal(train_rows[1]["image"], rgb[1])
    assert validation["label"] == [364, 165]
    np.testing.assert_array_equal(validation[1]["image"], rgb[4])
    assert names[0] == "/a/airfield" and names[-1] == "/z/zen_garden" and len(names) == 365
    assert validation.info.num_examples == {"train": 1_803_460, "validation": 36_500}
