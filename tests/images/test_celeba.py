"""CelebA from miniature official files: the image zip, the attribute list and the partition list."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import CelebA
from tests.fixtures.catalog import serve_urls, zip_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

USERCONTENT = "https://drive.usercontent.google.com/download?export=download&confirm=t&id="
DRIVE = "https://drive.google.com/uc?export=download&id="
NAMES = "5_o_Clock_Shadow Arched_Eyebrows " + " ".join(f"attr{i}" for i in range(37)) + " Young"


def _attributes(rows: dict[str, list[int]]) -> bytes:
    lines = [str(len(rows)), NAMES] + [f"{name} " + " ".join(f"{v:2d}" for v in values)
                                       for name, values in rows.items()]
    return ("\n".join(lines) + "\n").encode()


def test_celeba_attributes_and_official_partition(monkeypatch):
    jpgs = photos(4)
    names = [f"00000{i}.jpg" for i in range(1, 5)]
    rng = np.random.default_rng(0)
    values = {name: rng.choice([-1, 1], 40).tolist() for name in names}
    files = {USERCONTENT + "0B7EVK8r0v71pZjFTYXZWM3FlRnM":
             zip_bytes({f"img_align_celeba/{n}": data for n, data in zip(reversed(names), reversed(jpgs))}),
             DRIVE + "0B7EVK8r0v71pblRyaVFSWGxPY0U": _attributes(values),
             DRIVE + "0B7EVK8r0v71pY0NSMzRuSXJEVkk": b"000001.jpg 0\n000002.jpg 2\n000003.jpg 0\n000004.jpg 1\n"}
    with serve_urls(monkeypatch, files) as server:
        for url, data in files.items():  # served with their query strings, as Drive's addresses have them
            server.files["/" + url.split("//", 1)[1]] = data
        data = CelebA(verification_mode="no_checks")
        test = sds.load_dataset("celeba", split="test", verification_mode="no_checks")
    assert data.num_rows == {"train": 2, "validation": 1, "test": 1}
    train = data["train"]
    assert set(train[0]) == {"image", "attributes"}
    assert stored_images(train) == [jpgs[0], jpgs[2]]  # the partition list's order, the JPEG bytes as published
    assert train["attributes"] == [[(v + 1) // 2 for v in values[n]] for n in (names[0], names[2])]
    assert len(test[0]["attributes"]) == 40 and test[0]["attributes"] == [(v + 1) // 2 for v in values[names[1]]]
    np.testing.assert_array_equal(data["validation"][0]["image"], decoded(jpgs[3]))
    assert train.features["attributes"].feature.names == ["-1", "1"]
    assert train.info.num_examples == {"train": 162_770, "validation": 19_867, "test": 19_962}
