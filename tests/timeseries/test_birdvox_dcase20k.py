"""BirdVoxDCASE20k from a miniature audio zip and metadata CSV at the official URLs: rows in the CSV's order."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import BirdVoxDCASE20k
from tests.fixtures.audio import as_series, bird_detection_files
from tests.fixtures.catalog import serve_urls

ITEMS = [("00053d90-e4b9-4045-a2f1-f39efc90cfa9", 1),
         ("00206d5c-eca8-4ab6-b263-34c7a3b85b20", 0), ("002a7e7c-41e5-4d1f-9c29-9b1f3a6a4d43", 1)]


def test_birdvox_dcase20k_rows_follow_the_metadata(monkeypatch, tmp_path):
    files, samples = bird_detection_files("https://zenodo.org/record/1208080/files/BirdVox-DCASE-20k.zip?download=1", "https://ndownloader.figshare.com/files/10853300",
                                          "BirdVox-DCASE-20k/wav", "itemid,datasetid,hasbird", ITEMS)
    with serve_urls(monkeypatch, files):
        ds = BirdVoxDCASE20k(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("birdvox_dcase20k", split="train", verification_mode="no_checks",
                                cache_dir=str(tmp_path))
    assert ds["recording_id"] == [rid for rid, _ in ITEMS]
    assert ds["label"] == [1, 0, 1]
    assert ds["filename"] == [f"{rid}.wav" for rid, _ in ITEMS]
    for i, (rid, _) in enumerate(ITEMS):
        np.testing.assert_array_equal(np.asarray(ds[i]["series"], dtype=np.float32), as_series(samples[rid]))
    assert ds.features["label"].names == ["no_bird", "bird"]
    assert same.to_dict() == ds.to_dict()
    assert BirdVoxDCASE20k.create().info.num_examples == {"train": BirdVoxDCASE20k.ROWS}
