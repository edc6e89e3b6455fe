"""MosquitoSound from a miniature MosquitoSound.zip holding its ARFF files, at the official URL."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.timeseries import MosquitoSound
from tests.fixtures.arff import uea_zip_files
from tests.fixtures.catalog import serve_urls

CLASSES = ["Ae. aegypti", "Ae. albopictus", "An. arabiensis", "An. gambiae", "C. pipiens", "C. quinquefasciatus"]


def test_mosquito_sound_rows_are_the_arff_rows(monkeypatch, tmp_path):
    rng = np.random.default_rng(7)
    train, test = rng.normal(size=(4, 9)), rng.normal(size=(2, 9))
    train_labels = [CLASSES[1], CLASSES[0], CLASSES[-1], CLASSES[1]]
    test_labels = [CLASSES[-1], CLASSES[0]]
    with serve_urls(monkeypatch, uea_zip_files("MosquitoSound", (train, train_labels), (test, test_labels), CLASSES)):
        data = MosquitoSound(verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("mosquito_sound", split="test", verification_mode="no_checks", cache_dir=str(tmp_path))
    assert sorted(data) == ["test", "train"]
    assert data["train"]["label"] == [1, 0, len(CLASSES) - 1, 1]
    assert data["test"]["label"] == [len(CLASSES) - 1, 0]
    for split, values in (("train", train), ("test", test)):
        for i, row in enumerate(values):
            series = np.asarray(data[split][i]["series"], dtype=np.float32)
            assert series.shape == (9, 1)
            np.testing.assert_array_equal(series[:, 0], row.astype(np.float32))
    features = data["train"].features
    assert set(features) == {"series", "label"} and features["label"].num_classes == 6
    assert same.to_dict() == data["test"].to_dict()


def test_an_archive_with_more_classes_than_the_dataset_holds_is_an_error_naming_them(monkeypatch, tmp_path):
    classes = [*CLASSES, "Mansonia"]
    rows = np.zeros((1, 3))
    with serve_urls(monkeypatch, uea_zip_files("MosquitoSound", (rows, ["Mansonia"]), (rows, ["Mansonia"]), classes)),\
            pytest.raises(StableDatasetsError, match=r"MosquitoSound_TRAIN.arff: 7 classes \('Ae. aegypti', .*"
                                                     r"'Mansonia'\) do not fit MosquitoSound's 6"):
        MosquitoSound(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
