"""Audio files (WAV, FLAC, OGG, AIFF, ... whatever libsndfile reads) decoded to float32 `[T, C]` through
soundfile (the `audio` extra). A file is read from a path, bytes, or an open file object, such as an archive member
from `tarfile.extractfile` or `zipfile.open`, read in place (never extracted to disk).

Two scales, because the catalog's datasets were defined with two decoders:
- "pcm": the samples as the file stores them, as float32: int16 values for 16-bit PCM, 24-bit PCM left-justified in
  int32, 0..255 for 8-bit, floats as they are. This is what scipy.io.wavfile gives, and upstream stable-datasets
  decodes its WAV datasets that way.
- "unit": floats in [-1, 1], soundfile's own scale (upstream's decoder of FLAC and OGG files).

Containers libsndfile cannot read (M4A/AAC) go through FFmpeg's libraries with PyAV (`read_audio_ffmpeg`, also the
`audio` extra), converted to 16-bit samples as pydub's FFmpeg call (`-acodec pcm_s16le`) converts them.
"""

from __future__ import annotations

import io
import os
from typing import IO, Any, Literal

import numpy as np

from stable_datasets.errors import StableDatasetsError, missing_extra

Scale = Literal["pcm", "unit"]

#: soundfile subtype -> the dtype soundfile reads it as to give the stored sample values (scale "pcm")
_PCM_DTYPES = {"PCM_16": "int16", "PCM_24": "int32", "PCM_32": "int32", "PCM_S8": "int16", "PCM_U8": "int16",
               "FLOAT": "float32", "DOUBLE": "float64"}


def _soundfile() -> Any:
    try:
        import soundfile
    except ImportError:
        raise missing_extra("decoding audio files", "soundfile", "audio") from None
    return soundfile


def read_audio(source: str | os.PathLike | bytes | IO[bytes], *, scale: Scale = "pcm",
               name: str | None = None) -> tuple[np.ndarray, int]:
    """(samples as float32 `[T, C]`, sample rate) of one audio file; `name` says which file in an error (an archive
    member, say). A file libsndfile cannot decode is a StableDatasetsError naming it."""
    if scale not in ("pcm", "unit"):
        raise ValueError(f"read_audio: scale must be 'pcm' or 'unit', got {scale!r}")
    soundfile = _soundfile()
    label = name or (os.fspath(source) if isinstance(source, (str, os.PathLike)) else "audio data")
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(source)
    try:
        with soundfile.SoundFile(source) as audio:
            dtype = _PCM_DTYPES.get(audio.subtype, "int16") if scale == "pcm" else "float32"
            samples = audio.read(dtype=dtype, always_2d=True)
            subtype, rate = audio.subtype, audio.samplerate
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise StableDatasetsError(f"{label}: cannot decode audio ({exc})") from None
    if scale == "pcm" and subtype == "PCM_U8":  # scipy gives 8-bit WAV as its unsigned bytes, 0..255
        samples = (samples >> 8) + 128
    return np.ascontiguousarray(samples, dtype=np.float32), int(rate)


def read_series(source: str | os.PathLike | bytes | IO[bytes], *, scale: Scale = "pcm",
                name: str | None = None) -> np.ndarray:
    """Just the float32 `[T, C]` samples of `read_audio`."""
    return read_audio(source, scale=scale, name=name)[0]


def read_audio_ffmpeg(source: str | os.PathLike | bytes | IO[bytes], *,
                      name: str | None = None) -> tuple[np.ndarray, int]:
    """(16-bit samples as float32 `[T, C]`, sample rate) of the first audio stream of any file FFmpeg reads (M4A,
    AAC, MP3, ...): decoded, then converted to interleaved int16 by FFmpeg's resampler, the samples pydub gives."""
    try:
        import av
    except ImportError:
        raise missing_extra("decoding M4A/AAC audio", "av", "audio") from None
    label = name or (os.fspath(source) if isinstance(source, (str, os.PathLike)) else "audio data")
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(source)
    chunks: list[np.ndarray] = []
    try:
        with av.open(source) as container:
            if not container.streams.audio:
                raise StableDatasetsError(f"{label}: no audio stream")
            stream = container.streams.audio[0]
            channels, rate = stream.codec_context.channels, stream.codec_context.sample_rate
            resampler = av.AudioResampler(format="s16", layout=stream.codec_context.layout, rate=rate)
            for frame in container.decode(stream):
                chunks += [out.to_ndarray() for out in resampler.resample(frame)]
            chunks += [out.to_ndarray() for out in resampler.resample(None)]
    except av.error.FFmpegError as exc:
        raise StableDatasetsError(f"{label}: cannot decode audio ({exc})") from None
    samples = np.concatenate([c.reshape(-1) for c in chunks]) if chunks else np.empty(0, np.int16)
    return samples.reshape(-1, channels).astype(np.float32), int(rate)


__all__ = ["Scale", "read_audio", "read_audio_ffmpeg", "read_series"]
