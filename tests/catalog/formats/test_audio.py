"""The shared audio reader: WAV/FLAC/OGG to float32 [T, C], on scipy.io.wavfile's scale ("pcm") or soundfile's."""

from __future__ import annotations

import io
import tarfile
import zipfile

import numpy as np
import pytest
import scipy.io.wavfile

from stable_datasets.catalog.formats.audio import read_audio, read_series
from stable_datasets.errors import StableDatasetsError
from tests.fixtures.audio import audio_bytes, tone, wav_bytes


@pytest.mark.parametrize("subtype", ["PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"])
def test_pcm_scale_equals_scipy_wavfile(subtype):
    data = audio_bytes(tone(300, 2, seed=3).astype(np.float64) / 32768, 11025, subtype=subtype)
    rate, expected = scipy.io.wavfile.read(io.BytesIO(data))
    series, got_rate = read_audio(data)
    assert got_rate == rate == 11025
    assert series.dtype == np.float32 and series.shape == (300, 2)
    np.testing.assert_array_equal(series, expected.astype(np.float32))


def test_mono_is_one_column_and_16_bit_values_are_the_stored_integers():
    samples = tone(50, seed=1)
    series = read_series(wav_bytes(samples[:, 0]))
    assert series.shape == (50, 1)
    np.testing.assert_array_equal(series, samples.astype(np.float32))


def test_flac_unit_scale_and_pcm_scale():
    samples = tone(400, 1, seed=2)
    data = audio_bytes(samples, 16000, format="FLAC", subtype="PCM_16")
    np.testing.assert_array_equal(read_series(data), samples.astype(np.float32))  # lossless
    np.testing.assert_array_equal(read_series(data, scale="unit"), samples.astype(np.float32) / 32768)


def test_ogg_vorbis_decodes_to_unit_floats():
    samples = tone(4000, 1, seed=4)
    series, rate = read_audio(audio_bytes(samples, 8000, format="OGG", subtype="VORBIS"), scale="unit")
    assert rate == 8000 and series.shape == (4000, 1) and series.dtype == np.float32
    assert np.abs(series).max() <= 1.0


def test_members_read_in_place_from_tar_and_zip():
    samples = tone(120, 1, seed=5)
    data = wav_bytes(samples)
    tar_buf, zip_buf = io.BytesIO(), io.BytesIO()
    with tarfile.open(fileobj=tar_buf, mode="w:gz") as archive:
        info = tarfile.TarInfo("a/b.wav")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(zip_buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a/b.wav", data)
    tar_buf.seek(0)
    with tarfile.open(fileobj=tar_buf) as archive:
        from_tar = read_series(archive.extractfile("a/b.wav"))
    with zipfile.ZipFile(zip_buf) as archive, archive.open("a/b.wav") as member:
        from_zip = read_series(member)
    np.testing.assert_array_equal(from_tar, samples.astype(np.float32))
    np.testing.assert_array_equal(from_zip, samples.astype(np.float32))


def test_undecodable_file_names_itself():
    with pytest.raises(StableDatasetsError, match=r"^x\.zip:a\.wav: cannot decode audio"):
        read_series(b"not audio at all", name="x.zip:a.wav")
    with pytest.raises(ValueError, match="scale"):
        read_series(b"", scale="volts")


def test_ffmpeg_reader_names_the_extra_when_pyav_is_missing(monkeypatch):
    from stable_datasets.catalog.formats.audio import read_audio_ffmpeg
    from stable_datasets.errors import MissingExtraError

    monkeypatch.setitem(__import__("sys").modules, "av", None)  # `import av` raises ImportError
    with pytest.raises(MissingExtraError, match=r"needs av: pip install 'stable-datasets\[audio\]'"):
        read_audio_ffmpeg(b"")


def test_ffmpeg_reader_decodes_wav_to_the_same_16_bit_samples():
    pytest.importorskip("av")
    from stable_datasets.catalog.formats.audio import read_audio_ffmpeg

    samples = tone(700, 2, seed=6)
    series, rate = read_audio_ffmpeg(wav_bytes(samples), name="t.wav")
    assert rate == 8000
    np.testing.assert_array_equal(series, samples.astype(np.float32))
    with pytest.raises(StableDatasetsError, match=r"^bad\.m4a: cannot decode audio"):
        read_audio_ffmpeg(b"\x00" * 64, name="bad.m4a")
