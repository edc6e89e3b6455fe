"""VocalSet from a miniature VocalSet11.zip (FULL/<singer>/<technique>/..._<vowel>.wav, excerpts beside them)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import VocalSet
from tests.fixtures.audio import audio_bytes, tone, wav_bytes
from tests.fixtures.catalog import serve_urls, zip_bytes

URL = "https://zenodo.org/record/1442513/files/VocalSet11.zip?download=1"


def test_vocalset_vowel_files_with_singer_and_gender(monkeypatch, tmp_path):
    stereo24 = tone(30, 2, seed=5).astype(np.int32) * 65536  # 24-bit stereo, left-justified in int32 as scipy reads it
    clips = {"FULL/male11/straight/m11_straight_o.wav": wav_bytes(tone(40, seed=1)[:, 0], 44100),
             "FULL/female2/vibrato/f2_vibrato_a.wav": audio_bytes(stereo24, 44100, subtype="PCM_24"),
             "FULL/female2/arpeggios/f2_arpeggios_c_fast.wav": wav_bytes(tone(20, seed=2)[:, 0]),
             "FULL/excerpts/f1_excerpt_a.wav": wav_bytes(tone(20, seed=3)[:, 0]),
             "__MACOSX/FULL/male11/._m11_straight_o.wav": b"fork"}
    with serve_urls(monkeypatch, {URL: zip_bytes(clips)}):
        ds = VocalSet(split="train", verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("vocalset", split="train", verification_mode="no_checks", cache_dir=str(tmp_path))
    assert ds["relative_path"] == ["FULL/female2/vibrato/f2_vibrato_a.wav", "FULL/male11/straight/m11_straight_o.wav"]
    assert ds["singer"] == ["female2", "male11"] and ds["gender"] == ["female", "male"]
    assert ds["vowel"] == ["a", "o"] and ds["filename"] == ["f2_vibrato_a.wav", "m11_straight_o.wav"]
    np.testing.assert_array_equal(np.asarray(ds[0]["series"], dtype=np.float32), stereo24.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(ds[1]["series"], dtype=np.float32)[:, 0], tone(40, seed=1)[:, 0])
    assert set(ds.features) == {"series", "singer", "gender", "vowel", "relative_path", "filename"}
    assert same.to_dict() == ds.to_dict()
