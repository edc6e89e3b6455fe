"""Small PNG pictures of decoded cells: an image thumbnail, a strip of a video's frames.

One job: turn the arrays rows decode to (RGB/gray/RGBA uint8 HWC images, THWC frame windows)
into PNG bytes a browser or a notebook shows. The viewer serves them; `_repr_html_` inlines
them. Encoding goes through OpenCV, which the package already depends on.
"""

from __future__ import annotations

import cv2
import numpy as np

#: a thumbnail's longer side at most this many pixels (smaller images keep their size)
THUMBNAIL_SIDE = 160
#: frames a video strip shows, and each frame's height in it
STRIP_FRAMES = 8
STRIP_HEIGHT = 96


def as_uint8_image(array: np.ndarray) -> np.ndarray:
    """An HW, HW1, HW3 or HW4 array as uint8 (floats in [0, 1] are scaled); other shapes are an error."""
    array = np.asarray(array)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)) or 0 in array.shape[:2]:
        raise ValueError(f"expected an image array (H, W), (H, W, 3) or (H, W, 4), got shape {array.shape}")
    if array.dtype == np.uint8:
        return array
    if array.dtype.kind == "f":
        return (np.clip(array, 0.0, 1.0) * 255).round().astype(np.uint8)
    return np.clip(array, 0, 255).astype(np.uint8)


def fit(array: np.ndarray, side: int) -> np.ndarray:
    """Shrunk so its longer side is at most `side` (aspect kept); never enlarged."""
    h, w = array.shape[:2]
    scale = side / max(h, w)
    if scale >= 1:
        return array
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(array, size, interpolation=cv2.INTER_AREA)


def png_bytes(array: np.ndarray) -> bytes:
    """PNG of an RGB(A) or gray uint8 image (OpenCV wants BGR, so channels are swapped here)."""
    array = as_uint8_image(array)
    if array.ndim == 3:
        array = cv2.cvtColor(array, cv2.COLOR_RGB2BGR if array.shape[2] == 3 else cv2.COLOR_RGBA2BGRA)
    ok, buf = cv2.imencode(".png", array)
    if not ok:
        raise ValueError(f"OpenCV could not encode a {array.shape} image as PNG")
    return buf.tobytes()


def image_thumbnail(array: np.ndarray, side: int = THUMBNAIL_SIDE) -> bytes:
    """PNG of an image, shrunk to fit `side` pixels."""
    return png_bytes(fit(as_uint8_image(array), side))


def strip_frames(frames: np.ndarray, count: int = STRIP_FRAMES) -> np.ndarray:
    """`count` frames of a (T, H, W[, C]) window, evenly spread (all of them when there are fewer)."""
    frames = np.asarray(frames)
    if frames.ndim not in (3, 4) or frames.shape[0] == 0:
        raise ValueError(f"expected frames (T, H, W) or (T, H, W, C), got shape {frames.shape}")
    picks = np.unique(np.linspace(0, frames.shape[0] - 1, min(count, frames.shape[0])).round().astype(int))
    return frames[picks]


def video_strip(frames: np.ndarray, count: int = STRIP_FRAMES, height: int = STRIP_HEIGHT) -> bytes:
    """PNG of up to `count` frames side by side, each scaled to `height` pixels, 2 white pixels apart."""
    tiles = []
    for frame in strip_frames(frames, count):
        frame = as_uint8_image(frame)
        if frame.ndim == 2:
            frame = np.repeat(frame[:, :, None], 3, axis=2)
        frame = frame[:, :, :3]
        h, w = frame.shape[:2]
        width = max(1, round(w * height / h))
        tiles.append(cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA if h > height
                                else cv2.INTER_NEAREST))
        tiles.append(np.full((height, 2, 3), 255, np.uint8))
    return png_bytes(np.concatenate(tiles[:-1], axis=1))
