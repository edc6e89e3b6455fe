"""GrooveMIDI from a miniature groove-v1.0.0.zip (groove/info.csv, WAV renderings, MIDI files)."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.timeseries import GrooveMIDI
from tests.fixtures.audio import audio_bytes, tone
from tests.fixtures.catalog import serve_urls, zip_bytes

URL = "https://storage.googleapis.com/magentadata/datasets/groove/groove-v1.0.0.zip"
HEADER = "drummer,session,id,style,bpm,beat_type,time_signature,midi_filename,audio_filename,duration,split\n"
ROWS = [
    "drummer1,drummer1/eval_session,drummer1/eval_session/1,funk/groove1,138,beat,4-4,"
    "drummer1/eval_session/1_funk-groove1_138_beat_4-4.mid,drummer1/eval_session/1_funk-groove1_138_beat_4-4.wav,"
    "27.87,test",
    "drummer1,drummer1/session1,drummer1/session1/1,funk,95,fill,4-4,drummer1/session1/1_funk_95_fill_4-4.mid,,"
    "2.5,train",  # MIDI only: no row
    "drummer3,drummer3/session2,drummer3/session2/7,rock,120,beat,4-4,drummer3/session2/7_rock_120_beat_4-4.mid,"
    "drummer3/session2/7_rock_120_beat_4-4.wav,4.0,train",
    "drummer5,drummer5/session1,drummer5/session1/2,jazz,100,beat,3-4,drummer5/session1/2_jazz_100_beat_3-4.mid,"
    "drummer5/session1/2_jazz_100_beat_3-4.wav,3.1,validation",
]
MIDI = b"MThd\x00\x00\x00\x06\x00\x00\x00\x01\x01\xe0MTrk\x00\x00\x00\x04\x00\xff\x2f\x00"


def test_groove_midi_splits_audio_and_midi(monkeypatch, tmp_path):
    stereo = tone(64, 2, seed=3)
    members = {"groove/info.csv": (HEADER + "\n".join(ROWS) + "\n").encode(), "groove/LICENSE": b"CC BY 4.0"}
    for i, row in enumerate(ROWS):
        fields = row.split(",")
        members[f"groove/{fields[7]}"] = MIDI + bytes([i])
        if fields[8]:
            members[f"groove/{fields[8]}"] = audio_bytes(stereo[: 32 + 8 * i], 44100, subtype="PCM_16")
    with serve_urls(monkeypatch, {URL: zip_bytes(members)}):
        data = GrooveMIDI(verification_mode="no_checks", processed_cache_dir=str(tmp_path))
        same = sds.load_dataset("groove_midi", split="test", verification_mode="no_checks", cache_dir=str(tmp_path))
    assert data.num_rows == {"train": 1, "validation": 1, "test": 1}
    train = data["train"][0]
    assert train["example_id"] == "drummer3/session2/7" and train["midi"] == MIDI + bytes([2])
    assert train["style"] == "rock" and train["bpm"] == "120" and train["duration"] == "4.0"
    assert train["split"] == "train" and train["time_signature"] == "4-4" and train["beat_type"] == "beat"
    np.testing.assert_array_equal(np.asarray(train["series"], dtype=np.float32),
                                  stereo[:48].astype(np.float32) / 32768)  # soundfile's scale, as upstream
    assert data["validation"][0]["drummer"] == "drummer5"
    assert data["test"][0]["audio_filename"] == "drummer1/eval_session/1_funk-groove1_138_beat_4-4.wav"
    assert list(data["train"].features) == ["series", "midi", "drummer", "session", "example_id", "style", "bpm",
                                            "beat_type", "time_signature", "duration", "split", "audio_filename",
                                            "midi_filename"]
    assert same.to_dict() == data["test"].to_dict()
