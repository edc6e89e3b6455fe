"""DTD from a miniature official archive: dtd/images/<class>/<file> and the partition lists in dtd/labels/."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.images import DTD
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "https://www.robots.ox.ac.uk/~vgg/data/dtd/download/dtd-r1.0.1.tar.gz"
FILES = ["banded/banded_0002.jpg", "banded/banded_0004.jpg", "zigzagged/zigzagged_0001.jpg",
         "dotted/dotted_0100.jpg"]


@pytest.fixture
def archive() -> tuple[bytes, list[bytes]]:
    jpgs = photos(len(FILES))
    members = {f"dtd/images/{name}": data for name, data in zip(FILES, jpgs)}
    members.update({"dtd/labels/train1.txt": f"{FILES[2]}\n{FILES[0]}\n".encode(),
                    "dtd/labels/val1.txt": f"{FILES[3]}\n".encode(), "dtd/labels/test1.txt": f"{FILES[1]}\n".encode(),
                    "dtd/labels/train2.txt": f"{FILES[1]}\n".encode(), "dtd/labels/val2.txt": f"{FILES[0]}\n".encode(),
                    "dtd/labels/test2.txt": f"{FILES[2]}\n{FILES[3]}\n".encode()})
    return tar_bytes(members), jpgs


def test_dtd_partition_1_rows_follow_the_lists(monkeypatch, archive):
    data, jpgs = archive
    with serve_urls(monkeypatch, {URL: data}):
        splits = DTD(verification_mode="no_checks")
        val = sds.load_dataset("dtd", split="validation", verification_mode="no_checks")
    assert splits.num_rows == {"train": 2, "validation": 1, "test": 1}
    train = splits["train"]
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[2], jpgs[0]]  # the list's order, the JPEG bytes as published
    assert train["label"] == [46, 0] and val["label"] == [10] and splits["test"]["label"] == [0]
    np.testing.assert_array_equal(val[0]["image"], decoded(jpgs[3]))
    names = train.features["label"].names
    assert len(names) == 47 and names[0] == "banded" and names[-1] == "zigzagged"
    assert train.info.num_examples == {"train": 1_880, "validation": 1_880, "test": 1_880}


def test_dtd_other_partitions_are_configs(monkeypatch, archive):
    data, jpgs = archive
    with serve_urls(monkeypatch, {URL: data}):
        test = DTD(split="test", config_name="partition_2", verification_mode="no_checks")
    assert stored_images(test) == [jpgs[2], jpgs[3]] and test["label"] == [46, 10]
    assert [c.name for c in DTD.BUILDER_CONFIGS] == [f"partition_{k}" for k in range(1, 11)]
