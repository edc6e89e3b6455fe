"""Country211 from a miniature official archive: country211/<split>/<country code>/<file>.jpg."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.images import Country211
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "https://openaipublic.azureedge.net/clip/data/country211.tgz"


def test_country211_labels_are_the_country_folders(monkeypatch):
    jpgs = photos(5)
    archive = tar_bytes({"country211/train/ZW/1.jpg": jpgs[0], "country211/test/AD/2.jpg": jpgs[1],
                         "country211/train/AD/3.jpg": jpgs[2], "country211/valid/FR/4.jpg": jpgs[3],
                         "country211/train/FR/5.jpg": jpgs[4]})
    with serve_urls(monkeypatch, {URL: archive}):
        data = Country211(verification_mode="no_checks")
        valid = sds.load_dataset("country211", split="valid", verification_mode="no_checks")
    assert data.num_rows == {"train": 3, "valid": 1, "test": 1}
    train = data["train"]
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[0], jpgs[2], jpgs[4]]  # archive order, the JPEG bytes as published
    codes = train.features["label"].names
    assert [codes[i] for i in train["label"]] == ["ZW", "AD", "FR"] and train["label"][:2] == [210, 0]
    assert [codes[i] for i in valid["label"]] == ["FR"]
    np.testing.assert_array_equal(data["test"][0]["image"], decoded(jpgs[1]))
    assert len(codes) == 211 and codes[0] == "AD" and codes[-1] == "ZW"
    assert train.info.num_examples == {"train": 31_650, "valid": 10_550, "test": 21_100}


def test_country211_unknown_country_folder_is_an_error(monkeypatch):
    archive = tar_bytes({"country211/test/XX/1.jpg": photos(1)[0]})
    with serve_urls(monkeypatch, {URL: archive}), pytest.raises(StableDatasetsError, match="no known class folder"):
        Country211(split="test", verification_mode="no_checks")
