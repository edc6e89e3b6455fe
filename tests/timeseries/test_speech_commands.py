"""SpeechCommands from a miniature speech_commands_v0.01.tar.gz (WAV members under ./<word>/) at the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.features import ClassLabel, Sequence
from stable_datasets.timeseries import SpeechCommands
from tests.fixtures.audio import as_series, tone, wav_bytes
from tests.fixtures.catalog import serve_urls, tar_bytes

URL = "http://download.tensorflow.org/data/speech_commands_v0.01.tar.gz"
MIRROR = "https://storage.googleapis.com/download.tensorflow.org/data/speech_commands_v0.01.tar.gz"
CLIPS = [("./yes/0a7c2a8d_nohash_0.wav", 160), ("./_background_noise_/white_noise.wav", 40),
         ("./bed/1b4c9b89_nohash_3.wav", 120), ("./zero/c1d39ce8_nohash_1.wav", 90)]


def _archive() -> tuple[bytes, dict[str, np.ndarray]]:
    samples = {name: tone(n, seed=i)[:, 0] for i, (name, n) in enumerate(CLIPS)}
    members = {name: wav_bytes(s, 16000) for name, s in samples.items()}
    members["./README.md"] = b"Speech Commands"
    return tar_bytes(members), samples


def test_speech_commands_rows_features_and_both_entry_points(monkeypatch, tmp_path):
    archive, samples = _archive()
    with serve_urls(monkeypatch, {URL: archive}):
        ds = SpeechCommands(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("speech_commands", split="train", verification_mode="no_checks",
                                cache_dir=str(tmp_path))
    assert len(ds) == 3  # the background noise is not a word
    first = ds[0]
    assert set(first) == {"series", "label", "label_name", "speaker_id", "utterance_id", "filename"}
    np.testing.assert_array_equal(np.asarray(first["series"], dtype=np.float32),
                                  as_series(samples["./yes/0a7c2a8d_nohash_0.wav"]))
    assert [ds[i]["label_name"] for i in range(3)] == ["yes", "bed", "zero"]
    assert ds["label"] == [28, 0, 29]
    assert ds["speaker_id"] == ["0a7c2a8d", "1b4c9b89", "c1d39ce8"]
    assert ds["utterance_id"] == [0, 3, 1]
    assert ds["filename"] == ["0a7c2a8d_nohash_0.wav", "1b4c9b89_nohash_3.wav", "c1d39ce8_nohash_1.wav"]
    assert len(ds[1]["series"]) == 120 and len(ds[1]["series"][0]) == 1
    features = ds.features
    assert isinstance(features["series"], Sequence) and isinstance(features["label"], ClassLabel)
    assert features["label"].names[0] == "bed" and features["label"].names[-1] == "zero"
    assert same.to_dict() == ds.to_dict()
    assert SpeechCommands.create().info.num_examples == {"train": 64_727}


def test_speech_commands_checks_torchaudios_sha256(monkeypatch, tmp_path):
    import pytest

    from stable_datasets.errors import ChecksumError

    archive, _ = _archive()
    files = {URL: archive, MIRROR: archive}  # the mirror is served too: no test reaches the network
    with serve_urls(monkeypatch, files), pytest.raises(ChecksumError, match="speech_commands_v0.01") as info:
        SpeechCommands(split="train", processed_cache_dir=str(tmp_path))
    assert "743935421bb51cccdb6bdd152e04c5c70274e935c82119ad7faeec31780d811d" in str(info.value)
