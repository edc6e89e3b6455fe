"""FSDKaggle2018 from miniature Zenodo zips (audio_train/, audio_test/, FSDKaggle2018.meta/*.csv); upstream's smoke
test's checks, with exact values."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import FSDKaggle2018
from tests.fixtures.audio import as_series, wav_bytes
from tests.fixtures.catalog import serve_urls, zip_bytes

BASE = "https://zenodo.org/record/2552860/files/"
TRAIN_ROWS = "train_1.wav,Acoustic_guitar,1,101\ntrain_2.wav,Bark,0,102\n"
TEST_CSV = "fname,label,usage,fsID\ntest_1.wav,Bark,Public,202\n"


def test_fsd_kaggle2018_splits_metadata_and_samples(monkeypatch, tmp_path):
    train = [np.array([0, 1000, -1000, 500], np.int16), np.array([7, -7], np.int16)]
    test = [np.array([0, -500, 500], np.int16)]
    files = {
        BASE + "FSDKaggle2018.audio_train.zip?download=1": zip_bytes({
            "FSDKaggle2018.audio_train/train_2.wav": wav_bytes(train[1]),
            "FSDKaggle2018.audio_train/train_1.wav": wav_bytes(train[0]),
            "FSDKaggle2018.audio_train/unlisted.wav": wav_bytes(train[1])}),
        BASE + "FSDKaggle2018.audio_test.zip?download=1": zip_bytes({
            "FSDKaggle2018.audio_test/test_1.wav": wav_bytes(test[0])}),
        BASE + "FSDKaggle2018.meta.zip?download=1": zip_bytes({
            "FSDKaggle2018.meta/train_post_competition.csv": ("fname,label,manually_verified,fsID\n"
                                                              + TRAIN_ROWS).encode(),
            "FSDKaggle2018.meta/test_post_competition_scoring_clips.csv": TEST_CSV.encode()}),
    }
    with serve_urls(monkeypatch, files):
        data = FSDKaggle2018(verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("fsd_kaggle2018", split="test", verification_mode="no_checks",
                                cache_dir=str(tmp_path))
    assert sorted(data) == ["test", "train"]
    tr, te = data["train"], data["test"]
    assert set(tr[0]) == {"series", "label", "filename", "fsid", "verified", "usage"}
    assert tr["filename"] == ["train_2.wav", "train_1.wav"]  # the zip's order, unlisted clips left out
    assert tr["label"] == [1, 0]  # sorted names over both splits: Acoustic_guitar, Bark
    assert tr["fsid"] == ["102", "101"] and tr["verified"] == ["0", "1"] and tr["usage"] == ["", ""]
    np.testing.assert_array_equal(np.asarray(tr[1]["series"], np.float32), as_series(train[0]))
    assert len(tr[1]["series"]) == 4 and len(tr[1]["series"][0]) == 1
    assert te.to_dict() == same.to_dict()
    assert te[0]["filename"] == "test_1.wav" and te[0]["label"] == 1 and te[0]["usage"] == "Public"
    assert te[0]["fsid"] == "202" and te[0]["verified"] == ""
    np.testing.assert_array_equal(np.asarray(te[0]["series"], np.float32), as_series(test[0]))
