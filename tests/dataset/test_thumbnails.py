"""PNG thumbnails and video strips."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from stable_datasets.dataset.thumbnails import image_thumbnail, png_bytes, strip_frames, video_strip


def _decode(png: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)


def test_png_round_trips_rgb_gray_and_rgba():
    rgb = np.random.default_rng(0).integers(0, 255, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(_decode(png_bytes(rgb))[:, :, ::-1], rgb)
    gray = rgb[:, :, 0]
    np.testing.assert_array_equal(_decode(png_bytes(gray)), gray)
    rgba = np.dstack([rgb, np.full((5, 7), 128, np.uint8)])
    decoded = _decode(png_bytes(rgba))
    np.testing.assert_array_equal(decoded[:, :, [2, 1, 0, 3]], rgba)
    np.testing.assert_array_equal(_decode(png_bytes(np.ones((2, 2), np.float32))), np.full((2, 2), 255))


def test_thumbnails_shrink_large_images_only():
    assert _decode(image_thumbnail(np.zeros((400, 200, 3), np.uint8))).shape == (160, 80, 3)
    assert _decode(image_thumbnail(np.zeros((8, 8, 3), np.uint8))).shape == (8, 8, 3)
    with pytest.raises(ValueError, match=r"expected an image array \(H, W\), \(H, W, 3\) or \(H, W, 4\), got shape "
                                         r"\(2, 2, 2\)"):
        image_thumbnail(np.zeros((2, 2, 2), np.uint8))


def test_video_strip_spreads_frames():
    frames = np.stack([np.full((16, 16, 3), i * 10, np.uint8) for i in range(20)])
    assert [int(f[0, 0, 0]) for f in strip_frames(frames, 4)] == [0, 60, 130, 190]
    strip = _decode(video_strip(frames, count=4, height=32))
    assert strip.shape == (32, 4 * 32 + 3 * 2, 3)
    assert [int(strip[0, x, 0]) for x in (0, 34, 68, 102)] == [0, 60, 130, 190]
    assert int(strip[0, 32, 0]) == 255  # the white gap
    with pytest.raises(ValueError, match=r"expected frames \(T, H, W\) or \(T, H, W, C\), got shape \(0, 4, 4, 3\)"):
        video_strip(np.zeros((0, 4, 4, 3), np.uint8))
