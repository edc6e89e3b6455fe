"""Audio files (WAV, FLAC, OGG, AIFF, ... whatever libsndfile reads) decoded to float32 `[T, C]` through
soundfile (the `audio` extra). A file is read from a path, bytes, or an open file object, such as an archive member
from `tarfile.extractfile` or `zipfile.open`, read in place (never extracted to disk).

Two scales, because the catalog's datasets were defined with two decoders:
- "pcm": the samples as the file stores them, as float32: int16 values for 16-bit PCM, 24-bit PCM left-justified in
  int32, 0..255 for 8-bit, floats as they are. This is what scipy.io.wavfile gives, and upstream stable-datasets
  decodes its WAV datasets that way.
- "unit": floats in [-1, 1], soundfile's own scale (upstream's decoder of FLAC and OGG files).
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


__all__ = ["Scale", "read_audio", "read_series"]
