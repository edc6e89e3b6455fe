"""CUB-200-2011 from a miniature official archive: images/ and the three id tables."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import CUB200
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1"
FILES = ["001.Black_footed_Albatross/Black_Footed_Albatross_0046_18.jpg",
         "001.Black_footed_Albatross/Black_Footed_Albatross_0009_34.jpg",
         "200.Common_Yellowthroat/Common_Yellowthroat_0055_190967.jpg",
         "017.Cardinal/Cardinal_0001_17057.jpg"]


def test_cub200_splits_and_labels_from_the_id_tables(monkeypatch):
    jpgs = photos(len(FILES))
    root = "CUB_200_2011/"
    archive = tar_bytes({
        "attributes.txt": b"1 has_bill_shape::curved\n",
        **{f"{root}images/{name}": data for name, data in zip(FILES, jpgs)},
        f"{root}images.txt": "".join(f"{i} {name}\n" for i, name in enumerate(FILES, 1)).encode(),
        f"{root}image_class_labels.txt": b"1 1\n2 1\n3 200\n4 17\n",
        f"{root}train_test_split.txt": b"1 1\n2 0\n3 1\n4 0\n",
    })
    with serve_urls(monkeypatch, {URL: archive}) as server:
        server.files["/data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1"] = archive  # the query
        train = CUB200(split="train", verification_mode="no_checks")
        test = sds.load_dataset("cub200", split="test", verification_mode="no_checks")
    assert len(train) == 2 and len(test) == 2
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[0], jpgs[2]] and stored_images(test) == [jpgs[1], jpgs[3]]
    assert train["label"] == [0, 199] and test["label"] == [0, 16]
    np.testing.assert_array_equal(test[1]["image"], decoded(jpgs[3]))
    names = train.features["label"].names
    assert len(names) == 200 and names[0] == "Black_footed_Albatross" and names[16] == "Cardinal"
    assert train.info.num_examples == {"train": 5_994, "test": 5_794}
