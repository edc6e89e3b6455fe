"""SONYCUST from a miniature audio-dev.tar.gz and annotations-dev.csv (several annotators per clip)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import SONYCUST
from tests.fixtures.audio import as_series, tone, wav_bytes
from tests.fixtures.catalog import serve_urls, tar_bytes

BASE = "https://zenodo.org/record/3233082/files/"
FINE = [f"{i}-{j}_fine{i}{j}_presence" for i, n in enumerate([4, 5, 1, 4, 5, 4, 5, 1], 1) for j in range(1, n + 1)]
COARSE = [f"{i}_coarse_presence" for i in range(1, 9)]


def _line(split: str, clip: str, annotator: str, fine: list[int]) -> str:
    coarse = [0] * 8
    return ",".join([split, "7", clip, annotator, *map(str, fine), *map(str, coarse)])


def test_sonycust_rows_per_annotation_with_coarse_labels(monkeypatch, tmp_path):
    a, b = tone(60, seed=1)[:, 0], tone(45, seed=2)[:, 0]
    fine_a = [0] * 29
    fine_a[5] = 1  # machinery-impact (fine columns 4..8)
    fine_b = [0] * 29
    fine_b[28] = 1  # dog
    lines = ["split,sensor_id,audio_filename,annotator_id," + ",".join(FINE + COARSE),
             _line("validate", "01_000.wav", "0", fine_b),
             _line("train", "00_001.wav", "3", fine_a),
             _line("train", "00_001.wav", "-1", [0] * 29),
             "train,7,short_row.wav"]
    files = {BASE + "audio-dev.tar.gz?download=1": tar_bytes({"train/00_001.wav": wav_bytes(a, 44100),
                                                                "validate/01_000.wav": wav_bytes(b, 44100)}),
             BASE + "annotations-dev.csv?download=1": ("\n".join(lines) + "\n").encode()}
    with serve_urls(monkeypatch, files):
        ds = SONYCUST(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("sonycust", split="train", verification_mode="no_checks", cache_dir=str(tmp_path))
    assert len(ds) == 3  # the short line is left out
    assert ds["relative_path"] == ["train/00_001.wav", "train/00_001.wav", "validate/01_000.wav"]  # the tar's order
    assert ds["metadata"] == [["train", "7", "00_001.wav", "3"], ["train", "7", "00_001.wav", "-1"],
                              ["validate", "7", "01_000.wav", "0"]]
    assert ds["fine_labels"][0] == fine_a and ds["fine_labels"][2] == fine_b
    assert ds["coarse_labels"] == [[0, 1, 0, 0, 0, 0, 0, 0], [0] * 8, [0, 0, 0, 0, 0, 0, 0, 1]]
    assert ds[0]["fine_label_names"] == FINE and ds[0]["coarse_label_names"][-1] == "dog"
    assert ds["filename"] == ["00_001.wav", "00_001.wav", "01_000.wav"]
    np.testing.assert_array_equal(np.asarray(ds[1]["series"], dtype=np.float32), as_series(a))
    np.testing.assert_array_equal(np.asarray(ds[2]["series"], dtype=np.float32), as_series(b))
    assert same.to_dict() == ds.to_dict()
