"""`Image()`: stored as encoded bytes (PNG by default), decoded to RGB uint8 HWC arrays.

Encoding accepts numpy arrays (HW, HW1, HW3 RGB, HW4 RGBA; uint8), already-encoded bytes,
file paths, `{"bytes": ..., "path": ...}` dicts and objects with `__array__` (PIL images).
Encoded inputs are checked (signature, header and end marker; a full decode for formats
without a cheap check), so a non-image or truncated file fails the build instead of a
training step months later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pyarrow as pa

from stable_datasets.errors import CorruptCellError, EncodingError
from stable_datasets.features.base import FeatureType, describe

_FORMATS = {"png": ".png", "jpeg": ".jpg", "jpg": ".jpg", "webp": ".webp"}


# OpenCV >= 4.10 decodes straight to RGB, saving a colour conversion and a copy per image.
READ_RGB = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR)


def decode_image_bytes(data: bytes) -> np.ndarray | None:
    """Decode encoded image bytes to RGB uint8 HWC, or None if OpenCV cannot read them."""
    if not data:
        return None
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), READ_RGB)
    if image is None:
        return None
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if READ_RGB == cv2.IMREAD_COLOR else image


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"


def looks_complete(data: bytes) -> bool | None:
    """Cheap structural check of common formats: True/False, or None for formats it cannot judge.

    It reads the signature, the header and the end marker (or the declared size), so it
    catches non-images and truncated files without decoding pixels.
    """
    if data.startswith(_PNG_SIGNATURE):
        return (len(data) > 33 and data[12:16] == b"IHDR" and int.from_bytes(data[16:20], "big") > 0
                and int.from_bytes(data[20:24], "big") > 0 and data.endswith(_PNG_IEND))
    if data.startswith(b"\xff\xd8\xff"):
        return data.rfind(b"\xff\xd9", max(len(data) - 1024, 2)) != -1
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return int.from_bytes(data[4:8], "little") + 8 <= len(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return data.rstrip(b"\x00").endswith(b"\x3b")
    if data[:2] == b"BM" and len(data) >= 6:
        return int.from_bytes(data[2:6], "little") <= len(data)
    return None


def is_decodable(data: bytes) -> bool:
    """Structural check where the format allows it, else a full decode."""
    verdict = looks_complete(data)
    return verdict if verdict is not None else decode_image_bytes(data) is not None


def encode_image_array(array: np.ndarray, fmt: str = "png", quality: int | None = None) -> bytes:
    """Encode an RGB/RGBA/grayscale uint8 array; raises ValueError on anything else."""
    if array.dtype != np.uint8:
        raise ValueError(f"image arrays must be uint8, got {array.dtype}")
    if array.size == 0:
        raise ValueError(f"an image needs at least one pixel, got shape {array.shape}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim == 3 and array.shape[2] == 3:
        array = cv2.cvtColor(array, cv2.COLOR_RGB2BGR)
    elif array.ndim == 3 and array.shape[2] == 4:
        array = cv2.cvtColor(array, cv2.COLOR_RGBA2BGRA)
    elif array.ndim != 2:
        raise ValueError(f"image arrays must be HxW, HxWx1, HxWx3 or HxWx4, got shape {array.shape}")
    params: list[int] = []
    if quality is not None:
        if fmt in ("jpeg", "jpg"):
            params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
        elif fmt == "webp":
            params = [cv2.IMWRITE_WEBP_QUALITY, int(quality)]
    try:
        ok, buf = cv2.imencode(_FORMATS[fmt], array, params)
    except cv2.error as exc:  # OpenCV's own limits (e.g. a side over 65535 pixels for JPEG or WebP)
        raise ValueError(f"OpenCV could not encode a {array.shape} image as {fmt}: "
                         f"{str(exc).strip().splitlines()[-1]}") from None
    if not ok:
        raise ValueError(f"OpenCV could not encode a {array.shape} image as {fmt}")
    return buf.tobytes()


class Image(FeatureType):
    """An image cell. `format`/`quality` apply to arrays being encoded; bytes are kept as given."""

    type_name = "Image"

    def __init__(self, format: str = "png", quality: int | None = None):
        format = format.lower()
        if format not in _FORMATS:
            raise ValueError(f"unsupported image format {format!r}; choose one of {sorted(set(_FORMATS))}")
        self.format = "jpeg" if format == "jpg" else format
        self.quality = None if quality is None else int(quality)

    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def to_dict(self) -> dict[str, Any]:
        return {"_type": "Image", "format": self.format, "quality": self.quality}

    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        if type(value) is bytes and looks_complete(value):  # the common case, checked cheaply
            return value
        if isinstance(value, dict):
            if value.get("bytes") is not None:
                value = value["bytes"]
            elif value.get("path") is not None:
                value = value["path"]
            else:
                raise EncodingError(field, "image dict has neither 'bytes' nor 'path'")
        if isinstance(value, (str, os.PathLike)):
            path = Path(value)
            try:
                value = path.read_bytes()
            except OSError as exc:
                raise EncodingError(field, f"cannot read image file {str(path)!r}: {exc.strerror}") from None
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            if not is_decodable(data):
                head = data[:8].hex()
                raise EncodingError(field, f"undecodable image: {len(data)} bytes starting with 0x{head}")
            return data
        if not isinstance(value, np.ndarray) and hasattr(value, "__array__"):
            value = np.asarray(value)
        if isinstance(value, np.ndarray):
            try:
                return encode_image_array(value, self.format, self.quality)
            except ValueError as exc:
                raise EncodingError(field, str(exc)) from None
        raise EncodingError(field, f"expected an image (array, bytes, path), got {describe(value)}")

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None or not decode:
            return raw
        image = decode_image_bytes(raw)
        if image is None:
            raise CorruptCellError(f"stored image of {len(raw)} bytes could not be decoded (the cache is damaged: "
                                   "`stable-datasets verify` finds the file)")
        return image

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        from stable_datasets.arrow.cells import binary_values

        values = binary_values(array)
        if not decode:
            return values
        return [self.decode(v) for v in values]
