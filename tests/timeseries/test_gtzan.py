"""GTZAN from a miniature genres.tar.gz (genres/<genre>/<genre>.<n>.wav) at the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.features import ClassLabel, Sequence
from stable_datasets.timeseries import GTZAN
from tests.fixtures.audio import as_series, tone, wav_bytes
from tests.fixtures.catalog import serve_urls, tar_bytes

URL = "http://opihi.cs.uvic.ca/sound/genres.tar.gz"


def test_gtzan_rows_and_features(monkeypatch, tmp_path):
    clips = {"genres/rock/rock.00007.wav": tone(100, seed=1)[:, 0],
             "genres/blues/blues.00000.wav": tone(60, seed=2)[:, 0],
             "genres/jazz/jazz.00042.wav": tone(80, seed=3)[:, 0]}
    members = {name: wav_bytes(s, 22050) for name, s in clips.items()}
    members["genres/bextract_single.mf"] = b"not audio"
    with serve_urls(monkeypatch, {URL: tar_bytes(members)}):
        ds = GTZAN(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("gtzan", split="train", verification_mode="no_checks", cache_dir=str(tmp_path))
    assert len(ds) == 3
    assert ds["genre"] == ["rock", "blues", "jazz"]
    assert ds["label"] == [9, 0, 5]
    assert ds["filename"] == ["rock.00007.wav", "blues.00000.wav", "jazz.00042.wav"]
    for i, samples in enumerate(clips.values()):
        np.testing.assert_array_equal(np.asarray(ds[i]["series"], dtype=np.float32), as_series(samples))
    assert isinstance(ds.features["series"], Sequence) and isinstance(ds.features["label"], ClassLabel)
    assert ds.features["label"].names[0] == "blues" and ds.features["label"].names[-1] == "rock"
    assert same.to_dict() == ds.to_dict()
    assert GTZAN.create().info.num_examples == {"train": 1_000}


def test_gtzan_checks_the_official_size_and_sha256(monkeypatch, tmp_path):
    import pytest

    from stable_datasets.errors import ChecksumError

    archive = tar_bytes({"genres/rock/rock.00000.wav": wav_bytes(tone(10)[:, 0])})
    with serve_urls(monkeypatch, {URL: archive}), pytest.raises(ChecksumError, match=r"genres\.tar\.gz") as info:
        GTZAN(split="train", processed_cache_dir=str(tmp_path))
    assert "wrong checksum or size" in str(info.value) and "1225571541" in str(info.value)
