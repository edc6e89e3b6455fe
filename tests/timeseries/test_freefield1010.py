"""Freefield1010 from a miniature audio zip and metadata CSV at the official URLs: rows in the CSV's order."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import Freefield1010
from tests.fixtures.audio import as_series, bird_detection_files
from tests.fixtures.catalog import serve_urls

ITEMS = [("64486", 1), ("2525", 0), ("44981", 1)]


def test_freefield1010_rows_follow_the_metadata(monkeypatch, tmp_path):
    files, samples = bird_detection_files("https://archive.org/download/ff1010bird/ff1010bird_wav.zip", "https://ndownloader.figshare.com/files/6035814",
                                          "wav", "itemid,datasetid,hasbird", ITEMS)
    with serve_urls(monkeypatch, files):
        ds = Freefield1010(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("freefield1010", split="train", verification_mode="no_checks", cache_dir=str(tmp_path))
    assert ds["recording_id"] == [rid for rid, _ in ITEMS]
    assert ds["label"] == [1, 0, 1]
    assert ds["filename"] == [f"{rid}.wav" for rid, _ in ITEMS]
    for i, (rid, _) in enumerate(ITEMS):
        np.testing.assert_array_equal(np.asarray(ds[i]["series"], dtype=np.float32), as_series(samples[rid]))
    assert ds.features["label"].names == ["no_bird", "bird"]
    assert same.to_dict() == ds.to_dict()
    assert Freefield1010.create().info.num_examples == {"train": Freefield1010.ROWS}
