"""VoiceGenderDetection from a miniature VoxCeleb_gender.zip of M4A (AAC) clips in males/ and females/ (written and
read with PyAV, the `audio` extra)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.timeseries import VoiceGenderDetection
from tests.fixtures.catalog import serve_urls, zip_bytes

av = pytest.importorskip("av")  # the `audio` extra (pyproject's test extra installs it)

URL = "https://drive.google.com/u/0/uc?id=1HRbWocxwClGy9Fj1MQeugpR4vOaL9ebO&export=download"


def m4a_bytes(signal: np.ndarray, rate: int = 16000) -> bytes:
    """An M4A file of mono float `signal` in [-1, 1], AAC-encoded (with the edit list that trims the priming)."""
    buf = io.BytesIO()
    with av.open(buf, "w", format="ipod") as container:
        stream = container.add_stream("aac", rate=rate)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(signal.astype(np.float32)[None, :], format="fltp", layout="mono")
        frame.sample_rate, frame.pts = rate, 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buf.getvalue()


def test_voice_gender_detection_labels_and_decoded_speech(monkeypatch, tmp_path):
    t = np.arange(6000) / 16000
    signals = {"VoxCeleb_gender/males/id10001_a.m4a": 0.3 * np.sin(2 * np.pi * 300 * t),
               "VoxCeleb_gender/females/id10002_b.m4a": 0.25 * np.sin(2 * np.pi * 520 * t)}
    members = {name: m4a_bytes(s) for name, s in signals.items()}
    members["VoxCeleb_gender/males/notes.txt"] = b"x"
    members["VoxCeleb_gender/others/id3.m4a"] = members["VoxCeleb_gender/males/id10001_a.m4a"]
    with serve_urls(monkeypatch, {URL: zip_bytes(members)}):
        ds = VoiceGenderDetection(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("voice_gender_detection", split="train", verification_mode="no_checks",
                                cache_dir=str(tmp_path))
    assert ds["filename"] == ["id10002_b.m4a", "id10001_a.m4a"]  # sorted: females/ before males/
    assert ds["label"] == [1, 0] and ds["gender"] == ["female", "male"]
    for row, name in enumerate(["VoxCeleb_gender/females/id10002_b.m4a", "VoxCeleb_gender/males/id10001_a.m4a"]):
        series = np.asarray(ds[row]["series"], dtype=np.float32)
        assert series.shape[1] == 1 and 6000 <= len(series) < 6000 + 1024  # priming trimmed, last frame padded
        assert np.all(series == np.round(series))  # 16-bit sample values
        wrote = signals[name] * 32768
        assert np.corrcoef(series[:6000, 0], wrote)[0, 1] > 0.999  # AAC is lossy: the same tone, not the same bits
    assert ds.features["label"].names == ["male", "female"]
    assert same.to_dict() == ds.to_dict()
