"""`Image()`: stored as encoded bytes (PNG by default), decoded to RGB uint8 HWC arrays.

Encoding accepts numpy arrays (HW, HW1, HW3 RGB, HW4 RGBA; uint8, or uint16 for PNG),
already-encoded bytes, file paths, `{"bytes": ..., "path": ...}` dicts, PIL images (which
expose `__array_interface__`; palette, 1-bit and CMYK images are converted first) and other
objects with `__array__`. Encoded inputs are checked (signature, header and end marker, and a
PNG's chunk CRCs; a full decode for formats without a cheap check), so a non-image, truncated
or damaged PNG fails the build instead of a training step months later. Damage inside a
JPEG's compressed data has no checksum to catch it and is found when the image is decoded.

`mode` picks what a cell decodes to: "RGB" (the default, HxWx3 uint8), "RGBA" (alpha kept,
255 where the file has none), "L" (HxW uint8 grayscale), "I;16" (HxW uint16, 16-bit PNGs
kept exact) or "unchanged" (channels and depth as stored, RGB order). Colour turns gray with
PIL's weights, 8-bit values stay as they are in "I;16", and a JPEG's EXIF orientation is
applied in every mode, so the pixels are the ones Hugging Face's `Image(mode=...)` gives. `decode_to="pil"`
returns PIL images instead of arrays (Pillow is then needed).
"""

from __future__ import annotations

import io
import os
import zlib
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import binary_values
from stable_datasets.env import max_image_pixels
from stable_datasets.errors import CorruptCellError, EncodingError, missing_extra
from stable_datasets.features.base import FeatureType, describe

#: "bmp" is lossless and uncompressed: for small images it encodes ~10x and decodes ~4x faster than PNG (CIFAR-size
#: 32x32 RGB: 3 KB a cell either way); PNG stays the default, smaller for anything larger or flatter
_FORMATS = {"png": ".png", "jpeg": ".jpg", "jpg": ".jpg", "webp": ".webp", "bmp": ".bmp"}


# OpenCV >= 4.10 decodes straight to RGB, saving a colour conversion and a copy per image.
READ_RGB = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR)


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header of a PNG, JPEG, GIF, BMP or WebP, without decoding; None if not found."""
    if data.startswith(_PNG_SIGNATURE) and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:2] == b"BM" and len(data) >= 26:
        return abs(int.from_bytes(data[18:22], "little", signed=True)), \
            abs(int.from_bytes(data[22:26], "little", signed=True))
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        if chunk == b"VP8 ":
            return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    if data.startswith(b"\xff\xd8"):
        position = 2
        while position + 9 <= len(data):
            if data[position] != 0xFF:
                return None
            marker = data[position + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                position += 1 if marker == 0xFF else 2
                continue
            if marker in _JPEG_FRAMES:
                return int.from_bytes(data[position + 7:position + 9], "big"), \
                    int.from_bytes(data[position + 5:position + 7], "big")
            position += 2 + int.from_bytes(data[position + 2:position + 4], "big")
    return None


_JPEG_FRAMES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def check_pixels(data: bytes, what: str) -> None:
    """Raise ValueError naming `what` when the header claims more pixels than STABLE_DATASETS_MAX_IMAGE_PIXELS:
    a decoder would allocate them all (a 20000x20000 PNG of a few bytes takes 1.2 GB) before failing."""
    size = image_size(data)
    limit = max_image_pixels()
    if size is not None and size[0] * size[1] > limit:
        raise ValueError(f"{what}: its header claims {size[0]}x{size[1]} pixels, over the limit of {limit} "
                         "(STABLE_DATASETS_MAX_IMAGE_PIXELS); raise it if the image is meant to be that big")


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
                and int.from_bytes(data[20:24], "big") > 0 and data.endswith(_PNG_IEND) and _png_chunks_intact(data))
    if data.startswith(b"\xff\xd8\xff"):
        return data.rfind(b"\xff\xd9", max(len(data) - 1024, 2)) != -1
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return int.from_bytes(data[4:8], "little") + 8 <= len(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return data.rstrip(b"\x00").endswith(b"\x3b")
    if data[:2] == b"BM" and len(data) >= 6:
        return int.from_bytes(data[2:6], "little") <= len(data)
    return None


def _png_chunks_intact(data: bytes) -> bool:
    """Every chunk of a PNG is in bounds and matches its CRC-32: a damaged byte anywhere (the
    compressed pixels too) is caught at zlib's speed, without decoding."""
    view = memoryview(data)
    position = len(_PNG_SIGNATURE)
    while position + 12 <= len(data):
        length = int.from_bytes(view[position:position + 4], "big")
        end = position + 12 + length
        if end > len(data) or zlib.crc32(view[position + 4:end - 4]) != int.from_bytes(view[end - 4:end], "big"):
            return False
        if view[position + 4:position + 8] == b"IEND":
            return end == len(data)
        position = end
    return False


def is_decodable(data: bytes) -> bool:
    """Structural check where the format allows it, else a full decode."""
    verdict = looks_complete(data)
    return verdict if verdict is not None else decode_image_bytes(data) is not None


MODES = ("RGB", "RGBA", "L", "I;16", "unchanged")
_READ_FLAGS = {"RGB": READ_RGB, "L": cv2.IMREAD_COLOR, "RGBA": cv2.IMREAD_UNCHANGED,
               "I;16": cv2.IMREAD_UNCHANGED, "unchanged": cv2.IMREAD_UNCHANGED}


def decode_image_mode(data: bytes, mode: str) -> np.ndarray | None:
    """Decode encoded bytes to the array layout of `mode` (see the module docstring), or None."""
    if mode == "RGB":
        return decode_image_bytes(data)
    if not data:
        return None
    flags = _READ_FLAGS[mode]
    if mode == "L" and _is_8bit_gray_png(data):
        flags = cv2.IMREAD_GRAYSCALE  # the stored values as they are: no colour decode and luma to undo it
    if flags == cv2.IMREAD_UNCHANGED and data.startswith(b"\xff\xd8"):
        # a JPEG has no alpha nor 16 bits, and IMREAD_UNCHANGED would skip its EXIF orientation (PIL, so
        # Hugging Face, applies it): read its channels as stored, turned upright
        flags = cv2.IMREAD_ANYCOLOR | cv2.IMREAD_ANYDEPTH
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flags)
    if image is None:
        return None
    if mode == "L":
        if image.dtype != np.uint8:
            image = (image >> 8).astype(np.uint8)
        return pil_luma(image) if image.ndim == 3 else image
    if mode == "I;16":
        if image.ndim == 3 and image.dtype == np.uint8:
            image = pil_luma(image)
        elif image.ndim == 3:
            image = cv2.cvtColor(image, cv2.COLOR_BGRA2GRAY if image.shape[2] == 4 else cv2.COLOR_BGR2GRAY)
        return image.astype(np.uint16)  # 8-bit values kept as they are, as PIL converts "L" to "I;16"
    channels = 1 if image.ndim == 2 else image.shape[2]
    if mode == "RGBA":
        if image.dtype != np.uint8:
            image = (image >> 8).astype(np.uint8)
        code = {1: cv2.COLOR_GRAY2RGBA, 3: cv2.COLOR_BGR2RGBA, 4: cv2.COLOR_BGRA2RGBA}[channels]
        return cv2.cvtColor(image, code)
    if channels == 3:  # "unchanged": only the channel order changes
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if channels == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)
    return image


def _is_8bit_gray_png(data: bytes) -> bool:
    """A PNG whose header says 8-bit grayscale (colour type 0): read as is, it gives what PIL's "L" gives."""
    return data.startswith(_PNG_SIGNATURE) and len(data) > 25 and data[24] == 8 and data[25] == 0


def pil_luma(image: np.ndarray) -> np.ndarray:
    """Grayscale of a BGR(A) uint8 image exactly as PIL's `convert("L")` computes it (ITU-R 601-2
    luma, rounded), so `Image(mode="L")` gives Hugging Face's values: OpenCV's own grayscale decode
    uses other weights for PNG (and the raw Y plane for JPEG)."""
    b, g, r = (image[..., i].astype(np.uint32) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


# PIL modes whose pixels np.asarray gives as an image we can store; others are converted first.
_PIL_KEEP = {"RGB", "RGBA", "L", "I;16"}
_PIL_CONVERT = {"1": "L", "P": "RGBA", "PA": "RGBA", "LA": "RGBA", "La": "RGBA", "RGBa": "RGBA", "CMYK": "RGB",
                "YCbCr": "RGB", "LAB": "RGB", "HSV": "RGB", "RGBX": "RGB", "I;16B": "I;16", "I;16L": "I;16"}


def pil_to_array(image: Any) -> np.ndarray:
    """The pixels of a PIL image as an array `encode_image_array` stores (grayscale, alpha and 16 bits kept)."""
    mode = image.mode
    if mode == "P":
        mode = "RGBA" if "transparency" in image.info else "RGB"
        image = image.convert(mode)
    elif mode in _PIL_CONVERT:
        image = image.convert(_PIL_CONVERT[mode])
    elif mode == "I":  # 32-bit integers: 16-bit PNGs open this way
        array = np.asarray(image)
        if array.size and (array.min() < 0 or array.max() > 65535):
            raise ValueError(f"PIL image of mode 'I' has values in [{array.min()}, {array.max()}], beyond 16 bits")
        return array.astype(np.uint16)
    elif mode not in _PIL_KEEP:
        raise ValueError(f"PIL images of mode {mode!r} are not supported; convert to 'RGB', 'RGBA', 'L' or 'I;16'")
    return np.asarray(image)


def _pil_file_bytes(image: Any) -> bytes | None:
    """The encoded bytes of a PIL image opened from a file and not changed since (PIL's `format` is set only
    then): the file's own bytes when it can still be read, else the pixels saved again in that format
    (a JPEG with its own quantization tables); None for an image made in memory (its pixels are encoded)."""
    fmt = getattr(image, "format", None)
    if not fmt or fmt.lower() not in _FORMATS:
        return None
    filename = getattr(image, "filename", None)
    if filename:
        try:
            data = Path(filename).read_bytes()
        except OSError:
            data = None
        if data is not None and image_size(data) == tuple(image.size):  # not resized in place since it was opened
            return data
    buffer = io.BytesIO()
    try:
        image.save(buffer, format=fmt, **({"quality": "keep"} if fmt == "JPEG" else {}))
    except (OSError, ValueError):
        return None
    return buffer.getvalue()


def _is_pil_image(value: Any) -> bool:
    return hasattr(value, "__array_interface__") and hasattr(value, "mode") and hasattr(value, "convert")


def encode_image_array(array: np.ndarray, fmt: str = "png", quality: int | None = None) -> bytes:
    """Encode an RGB/RGBA/grayscale uint8 (or, as PNG, uint16) array; raises ValueError on anything else."""
    if array.dtype == np.uint16 and fmt != "png":
        raise ValueError(f"16-bit images can be stored as png only, not {fmt}; use Image(format='png')")
    if array.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"image arrays must be uint8 (or uint16 for png), got {array.dtype}")
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
    """An image cell. `format`/`quality` apply to arrays being encoded; bytes are kept as given.

    `mode` and `decode_to` choose what reading returns (see the module docstring).
    """

    type_name = "Image"

    def __init__(self, format: str = "png", quality: int | None = None, mode: str | None = None,
                 decode_to: str = "numpy", decode: bool = True):
        format = format.lower()
        if format not in _FORMATS:
            raise ValueError(f"unsupported image format {format!r}; choose one of {sorted(set(_FORMATS))}")
        if mode is not None and mode not in MODES:
            raise ValueError(f"unsupported image mode {mode!r}; choose one of {list(MODES)}")
        if decode_to not in ("numpy", "pil"):
            raise ValueError(f"decode_to must be 'numpy' or 'pil', got {decode_to!r}")
        self.format = "jpeg" if format == "jpg" else format
        self.quality = None if quality is None else int(quality)
        self.mode = mode
        self.decode_to = decode_to
        #: Hugging Face's `Image(decode=False)`: cells read as `{"bytes": stored bytes, "path": None}`, undecoded
        self.decode_images = bool(decode)

    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"_type": "Image", "format": self.format, "quality": self.quality}
        if self.mode is not None:  # only when set, so caches made before these options keep their fingerprint
            out["mode"] = self.mode
        if self.decode_to != "numpy":
            out["decode_to"] = self.decode_to
        if not self.decode_images:
            out["decode"] = False
        return out

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> Image:
        if "decode" in data or ("format" not in data and "quality" not in data):
            # Hugging Face's Image ({"mode", "decode"}): cells decode to arrays here, in its mode when it has one
            return cls(mode=data.get("mode"), decode=data.get("decode", True))
        return cls(**{k: v for k, v in data.items() if k != "_type"})

    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        if type(value) is bytes and looks_complete(value) and _within_pixels(value):  # the common case, cheaply
            return value
        if isinstance(value, dict):
            if value.get("bytes") is not None:
                value = value["bytes"]
            elif value.get("path") is not None:
                value = value["path"]
            else:
                raise EncodingError(field, "image dict has neither 'bytes' nor 'path'")
        what = f"image of {len(value)} bytes" if isinstance(value, (bytes, bytearray, memoryview)) else "image"
        if isinstance(value, (str, os.PathLike)):
            path = Path(value)
            what = f"image file {str(path)!r}"
            try:
                value = path.read_bytes()
            except OSError as exc:
                raise EncodingError(field, f"cannot read image file {str(path)!r}: {exc.strerror}") from None
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            try:
                check_pixels(data, what)
            except ValueError as exc:
                raise EncodingError(field, str(exc)) from None
            if not is_decodable(data):
                head = data[:8].hex()
                raise EncodingError(field, f"undecodable image: {len(data)} bytes starting with 0x{head}")
            return data
        try:
            if _is_pil_image(value):
                stored = _pil_file_bytes(value)
                if stored is not None:  # an image opened from a file keeps its file's bytes (a JPEG stays JPEG)
                    return self.encode(stored, field)
                value = pil_to_array(value)
            elif not isinstance(value, np.ndarray) and (hasattr(value, "__array__")
                                                        or hasattr(value, "__array_interface__")):
                value = np.asarray(value)
        except ValueError as exc:
            raise EncodingError(field, str(exc)) from None
        if isinstance(value, np.ndarray):
            try:
                return encode_image_array(value, self.format, self.quality)
            except ValueError as exc:
                raise EncodingError(field, str(exc)) from None
        raise EncodingError(field, f"expected an image (array, bytes, path), got {describe(value)}")

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None or not decode:
            return raw
        if not self.decode_images:
            return {"bytes": raw, "path": None}
        try:
            check_pixels(raw, f"stored image of {len(raw)} bytes")
        except ValueError as exc:
            raise CorruptCellError(str(exc)) from None
        image = decode_image_mode(raw, self.mode or "RGB")
        if image is None:
            if looks_complete(raw) is False:  # it passed this check when it was stored: the cache changed
                raise CorruptCellError(f"stored image of {len(raw)} bytes could not be decoded (the cache is damaged: "
                                       "`stable-datasets verify` finds the file)")
            raise CorruptCellError(f"stored image of {len(raw)} bytes could not be decoded (damaged before it was "
                                   "stored, as a JPEG's compressed data can be, or the cache is damaged: "
                                   "`stable-datasets verify` checks the cache)")
        if self.decode_to == "pil":
            return _to_pil(image)
        return image

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        values = binary_values(array)
        if not decode:
            return values
        if not self.decode_images:
            return [None if v is None else {"bytes": v, "path": None} for v in values]
        return [self.decode(v) for v in values]


def _within_pixels(data: bytes) -> bool:
    size = image_size(data)
    return size is None or size[0] * size[1] <= max_image_pixels()


def _to_pil(array: np.ndarray) -> Any:
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise missing_extra("Image(decode_to='pil')", "Pillow", "pil") from None
    return PILImage.fromarray(array)
