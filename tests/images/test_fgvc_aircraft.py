"""FGVC-Aircraft from a miniature official archive: data/images/<id>.jpg and the per-level, per-split lists."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import FGVCAircraft
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/archives/fgvc-aircraft-2013b.tar.gz"
DATA = "fgvc-aircraft-2013b/data/"


def _archive(jpgs: list[bytes]) -> bytes:
    members = {f"{DATA}images/{1000 + i}.jpg": data for i, data in enumerate(jpgs)}
    lists = {"variant": {"train": "1002 Yak-42\n1000 707-320\n", "val": "1001 A300B4\n", "test": "1003 Tu-154\n"},
             "family": {"train": "1000 Boeing 707\n1002 Yak-42\n", "val": "1001 A300\n", "test": "1003 Tu-154\n"},
             "manufacturer": {"train": "1000 Boeing\n1002 Yakovlev\n", "val": "1001 Airbus\n",
                              "test": "1003 de Havilland\n"}}
    for level, splits in lists.items():
        members.update({f"{DATA}images_{level}_{split}.txt": text.encode() for split, text in splits.items()})
    return tar_bytes(members)


def test_fgvc_aircraft_crops_the_banner_and_labels_by_level(monkeypatch):
    jpgs = photos(4, 32)
    with serve_urls(monkeypatch, {URL: _archive(jpgs)}):
        data = FGVCAircraft(verification_mode="no_checks")
        family = sds.load_dataset("fgvc_aircraft", split="train", name="family", verification_mode="no_checks")
        maker = FGVCAircraft(split="test", config_name="manufacturer", verification_mode="no_checks")
    assert data.num_rows == {"train": 2, "validation": 1, "test": 1}
    train = data["train"]
    assert set(train[0]) == {"image", "label"}
    variants = train.features["label"].names
    assert len(variants) == 100 and variants[0] == "707-320" and variants[-1] == "Yak-42"
    assert train["label"] == [0, 99]  # archive order: image 1000, then 1002
    assert [variants[i] for i in data["validation"]["label"]] == ["A300B4"]
    for row, jpg in zip(train, [jpgs[0], jpgs[2]]):
        assert row["image"].shape == (12, 32, 3)  # 32 rows less the 20-row banner
        np.testing.assert_array_equal(row["image"], decoded(jpg)[:-20])
    assert stored_images(train)[0].startswith(b"\x89PNG")  # the crop, losslessly
    families = family.features["label"].names
    assert len(families) == 70 and [families[i] for i in family["label"]] == ["Boeing 707", "Yak-42"]
    makers = maker.features["label"].names
    assert len(makers) == 30 and [makers[i] for i in maker["label"]] == ["de Havilland"]
    assert train.info.num_examples == {"train": 3_334, "validation": 3_333, "test": 3_333}
