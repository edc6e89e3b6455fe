"""JapaneseVowels from a miniature JapaneseVowels.zip holding its .ts files (12 dimensions of varying length)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import JapaneseVowels
from tests.fixtures.catalog import serve_urls, zip_bytes

URL = "http://www.timeseriesclassification.com/Downloads/JapaneseVowels.zip"
HEADER = ("#The Japanese Vowels dataset\n@problemName JapaneseVowels\n@timeStamps false\n@missing false\n"
          "@univariate false\n@dimensions 12\n@equalLength false\n@seriesLength 29\n"
          "@classLabel true 1 2 3 4 5 6 7 8 9\n@data\n")


def _ts(cases: list[tuple[np.ndarray, str]]) -> bytes:
    lines = [":".join(",".join(repr(float(v)) for v in series[:, d]) for d in range(12)) + f":{label}"
             for series, label in cases]
    return (HEADER + "\n".join(lines) + "\n").encode()


def test_japanese_vowels_pads_to_29_frames(monkeypatch, tmp_path):
    rng = np.random.default_rng(3)
    train = [(rng.normal(size=(7, 12)), "3"), (rng.normal(size=(29, 12)), "1"), (rng.normal(size=(12, 12)), "9")]
    test = [(rng.normal(size=(20, 12)), "2")]
    files = {URL: zip_bytes({"JapaneseVowels_TRAIN.ts": _ts(train), "JapaneseVowels_TEST.ts": _ts(test),
                             "JapaneseVowels_TRAIN.arff": b"@relation x\n"})}
    with serve_urls(monkeypatch, files):
        data = JapaneseVowels(verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("japanese_vowels", split="train", verification_mode="no_checks",
                                cache_dir=str(tmp_path))
    assert data.num_rows == {"train": 3, "test": 1}
    assert data["train"]["label"] == [1, 0, 2]  # sorted class strings of the split: "1", "3", "9"
    for i, (series, _) in enumerate(train):
        got = np.asarray(data["train"][i]["series"], dtype=np.float32)
        assert got.shape == (29, 12)
        np.testing.assert_array_equal(got[: len(series)], series.astype(np.float32))
        assert not got[len(series):].any()
    assert data["test"]["label"] == [0]
    assert data["train"].features["label"].names[-1] == "speaker_8"
    assert same.to_dict() == data["train"].to_dict()
