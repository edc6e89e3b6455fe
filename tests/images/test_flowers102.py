"""Flowers-102 from a miniature image archive and `.mat` label/split files (MATLAB v5, as the official ones)."""

from __future__ import annotations

import io

import numpy as np
import scipy.io

import stable_datasets as sds
from stable_datasets.images import Flowers102
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

BASE = "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/"


def _mat(**variables: np.ndarray) -> bytes:
    buf = io.BytesIO()
    scipy.io.savemat(buf, variables)
    return buf.getvalue()


def test_flowers102_splits_from_setid_and_labels_from_imagelabels(monkeypatch):
    jpgs = photos(6)
    # the archive stores image 4 first; setid names each split's ids in another order
    archive = tar_bytes({"jpg/image_00004.jpg": jpgs[3], **{f"jpg/image_0000{i}.jpg": jpgs[i - 1] for i in (1, 2, 3)},
                         "jpg/image_00005.jpg": jpgs[4], "jpg/image_00006.jpg": jpgs[5]})
    files = {BASE + "102flowers.tgz": archive,
             BASE + "imagelabels.mat": _mat(labels=np.array([[77, 1, 102, 5, 9, 9]], dtype=np.uint8)),
             BASE + "setid.mat": _mat(trnid=np.array([[3, 1, 4]], np.uint16), valid=np.array([[6]], np.uint16),
                                      tstid=np.array([[5, 2]], np.uint16))}
    with serve_urls(monkeypatch, files):
        data = Flowers102(verification_mode="no_checks")
        val = sds.load_dataset("flowers102", split="validation", verification_mode="no_checks")
    assert data.num_rows == {"train": 3, "validation": 1, "test": 2}
    train = data["train"]
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[3], jpgs[0], jpgs[2]]  # archive order: image 4, 1, 3
    assert train["label"] == [4, 76, 101]
    assert data["test"]["label"] == [0, 8] and val["label"] == [8]
    np.testing.assert_array_equal(data["test"][0]["image"], decoded(jpgs[1]))
    names = train.features["label"].names
    assert len(names) == 102 and names[0] == "pink primrose" and names[-1] == "blackberry lily"
    assert train.info.num_examples == {"train": 1_020, "validation": 1_020, "test": 6_149}
