"""Picidae from a miniature PicidaeDataset.zip (<root>/<class>/<xc id>-<n>.wav, macOS forks beside them)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import Picidae
from tests.fixtures.audio import as_series, tone, wav_bytes
from tests.fixtures.catalog import serve_urls, zip_bytes

URL = "https://zenodo.org/record/574438/files/PicidaeDataset.zip?download=1"


def test_picidae_rows_in_sorted_order_without_forks(monkeypatch, tmp_path):
    clips = {"PicidaeDataset/PicusViridis-song/XC12345-1.wav": tone(70, seed=1)[:, 0],
             "PicidaeDataset/BackgroundNoise/XC999-3.wav": tone(40, seed=2)[:, 0],
             "PicidaeDataset/DendrocoposMajor-drumming/XC7-0.wav": tone(55, seed=3)[:, 0]}
    members = {name: wav_bytes(s, 44100) for name, s in clips.items()}
    members["__MACOSX/PicidaeDataset/BackgroundNoise/._XC999-3.wav"] = b"fork"
    members["PicidaeDataset/Unknown/XC1-1.wav"] = wav_bytes(tone(10)[:, 0])
    with serve_urls(monkeypatch, {URL: zip_bytes(members)}):
        ds = Picidae(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("picidae", split="train", verification_mode="no_checks", cache_dir=str(tmp_path))
    order = sorted(clips)
    assert ds["label_name"] == ["BackgroundNoise", "DendrocoposMajor-drumming", "PicusViridis-song"]
    assert ds["label"] == [0, 4, 12]
    assert ds["xc_identifier"] == ["XC999", "XC7", "XC12345"]
    assert ds["filename"] == ["XC999-3.wav", "XC7-0.wav", "XC12345-1.wav"]
    for i, name in enumerate(order):
        np.testing.assert_array_equal(np.asarray(ds[i]["series"], dtype=np.float32), as_series(clips[name]))
    assert ds.features["label"].names[0] == "BackgroundNoise" and ds.features["label"].names[-1] == "PicusViridis-song"
    assert same.to_dict() == ds.to_dict()
