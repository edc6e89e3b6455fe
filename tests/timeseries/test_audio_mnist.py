"""AudioMNIST from a miniature AudioMNIST-master.zip (data/<speaker>/<digit>_<speaker>_<n>.wav); the samples are a
real digit's pixel rows."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import AudioMNIST
from tests.fixtures.audio import as_series, wav_bytes
from tests.fixtures.catalog import digit_images, serve_urls, zip_bytes

URL = "https://github.com/soerenab/AudioMNIST/archive/master.zip"


def test_audio_mnist_rows_in_sorted_member_order(monkeypatch, tmp_path):
    images, digits = digit_images(3, 16)
    samples = [(im.astype(np.int16).reshape(-1) - 128) * 100 for im in images]  # pixel rows as samples
    names = [f"AudioMNIST-master/data/{spk:02d}/{d}_{spk:02d}_{n}.wav" for d, spk, n in
             [(digits[0], 12, 4), (digits[1], 1, 0), (digits[2], 60, 49)]]
    members = {names[0]: wav_bytes(samples[0], 48000), "AudioMNIST-master/README.md": b"readme",
               names[1]: wav_bytes(samples[1], 48000), "AudioMNIST-master/data/audioMNIST_meta.wav": b"",
               names[2]: wav_bytes(samples[2], 48000)}
    with serve_urls(monkeypatch, {URL: zip_bytes(members)}):
        ds = AudioMNIST(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("audio_mnist", split="train", verification_mode="no_checks", cache_dir=str(tmp_path))
    order = [1, 0, 2]  # data/01 < data/12 < data/60
    assert len(ds) == 3
    assert ds["label"] == [int(digits[i]) for i in order]
    assert ds["speaker_id"] == [0, 11, 59]
    assert ds["utterance_id"] == [0, 4, 49]
    assert ds["filename"] == [names[i].rsplit("/", 1)[-1] for i in order]
    for row, i in enumerate(order):
        series = np.asarray(ds[row]["series"], dtype=np.float32)
        assert series.shape == (256, 1)
        np.testing.assert_array_equal(series, as_series(samples[i]))
    assert ds.features["label"].num_classes == 10
    assert same.to_dict() == ds.to_dict()
