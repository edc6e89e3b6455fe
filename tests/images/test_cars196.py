"""Cars196 from miniature files in both real formats: upstream's repackaged zips (the default: the class in each
file name) and the official image archives with the devkit's MATLAB annotations (the `stanford` config)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.io

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.images import Cars196
from tests.fixtures.catalog import serve_urls, tar_bytes, zip_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

BASE = "http://ai.stanford.edu/~jkrause/car196/"
REPACK = "https://huggingface.co/datasets/haodoz0118/cars196-img/resolve/main/"


def _annotations(fnames: list[str], classes: list[int]) -> bytes:
    fields = ["bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "fname"]
    records = np.zeros((1, len(fnames)), dtype=[(f, object) for f in fields])
    for i, (name, label) in enumerate(zip(fnames, classes)):
        records[0, i] = (np.uint8(1), np.uint8(2), np.uint8(10), np.uint8(12), np.uint8(label), name)
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"annotations": records})
    return buf.getvalue()


def test_cars196_reads_upstreams_repackaged_zips_by_default(monkeypatch):
    jpgs = photos(5)
    files = {
        REPACK + "cars196_train.zip": zip_bytes({
            "train/00002_Smart-fortwo-Convertible-2012.jpg": jpgs[0], "train/readme.txt": b"not a photo",
            "train/00001_AM-General-Hummer-SUV-2000.jpg": jpgs[1],
            "__MACOSX/train/._00001_AM-General-Hummer-SUV-2000.jpg": b"resource fork",
            "train/00003_Mercedes-Benz-C-Class-Sedan-2012.jpg": jpgs[2]}),
        REPACK + "cars196_test.zip": zip_bytes({"test/00009_Ram-C-V-Cargo-Van-Minivan-2012.jpg": jpgs[3],
                                                "test/00010_Chevrolet-Corvette-ZR1-2012.jpg": jpgs[4]}),
    }
    with serve_urls(monkeypatch, files):
        train = Cars196(split="train", verification_mode="no_checks")
        test = sds.load_dataset("cars196", split="test", verification_mode="no_checks")
    labels = train.features["label"].names
    assert [labels[i] for i in train["label"]] == ["smart_fortwo_convertible_2012", "am_general_hummer_suv_2000",
                                                   "mercedes_benz_c_class_sedan_2012"]  # the archive's order
    assert train["label"] == [195, 0, 161]
    assert [labels[i] for i in test["label"]] == ["ram_c_v_cargo_van_minivan_2012", "chevrolet_corvette_zr1_2012"]
    assert stored_images(train) == jpgs[:3]  # the JPEG bytes as stored
    np.testing.assert_array_equal(test[1]["image"], decoded(jpgs[4]))


def test_cars196_repack_member_naming_no_class_is_an_error_naming_it(monkeypatch, tmp_path):
    files = {REPACK + "cars196_train.zip": zip_bytes({"train/00001_Flying-Car-2030.jpg": photos(1)[0]}),
             REPACK + "cars196_test.zip": zip_bytes({})}
    with serve_urls(monkeypatch, files), pytest.raises(StableDatasetsError, match=r"member 'train/00001_Flying-Car-"
                                                                                   r"2030.jpg' names no Cars196 class"):
        Cars196(split="train", verification_mode="no_checks", cache_dir=str(tmp_path))


def test_cars196_stanford_config_reads_the_mat_annotations(monkeypatch):
    jpgs = photos(5)
    files = {
        BASE + "cars_train.tgz": tar_bytes({f"cars_train/0000{i}.jpg": jpgs[i - 1] for i in (1, 2, 3)}),
        BASE + "cars_test.tgz": tar_bytes({"cars_test/00001.jpg": jpgs[3], "cars_test/00002.jpg": jpgs[4]}),
        "https://ai.stanford.edu/~jkrause/cars/car_devkit.tgz": tar_bytes({
            "devkit/README.txt": b"devkit", "devkit/cars_meta.mat": b"",
            "devkit/cars_train_annos.mat": _annotations(["00003.jpg", "00001.jpg", "00002.jpg"], [196, 1, 14])}),
        BASE + "cars_test_annos_withlabels.mat": _annotations(["00002.jpg", "00001.jpg"], [2, 3]),
    }
    with serve_urls(monkeypatch, files):
        train = Cars196(split="train", config_name="stanford", verification_mode="no_checks")
        test = sds.load_dataset("cars196", config_name="stanford", split="test", verification_mode="no_checks")
    assert len(train) == 3 and len(test) == 2
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == [jpgs[2], jpgs[0], jpgs[1]]  # annotation order, the JPEG bytes as published
    assert train["label"] == [195, 0, 13] and test["label"] == [1, 2]
    np.testing.assert_array_equal(test[0]["image"], decoded(jpgs[4]))
    names = train.features["label"].names
    assert len(names) == 196 and names[0] == "am_general_hummer_suv_2000"
    assert names[-1] == "smart_fortwo_convertible_2012"
    assert train.info.num_examples == {"train": 8_144, "test": 8_041}
