"""dSprites on The Scream from a miniature official `.npz` and a stand-in painting under the pinned URL: each image
a 64x64 patch of the resized painting at the row's seeded position, the shape's pixels inverted."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image as PILImage

from stable_datasets.images import DSpritesScream
from stable_datasets.images._dsprites import row_rng
from stable_datasets.images.dsprites_scream import SCREAM
from tests.fixtures.catalog import serve_urls
from tests.fixtures.dsprites import URL, dsprites_npz


def _painting() -> tuple[bytes, np.ndarray]:
    y, x = np.mgrid[0:300, 0:400]
    rgb = np.stack([x * 255 // 399, y * 255 // 299, (x + y) % 256], -1).astype(np.uint8)
    buf = io.BytesIO()
    PILImage.fromarray(rgb).save(buf, format="PNG")
    resized = np.asarray(PILImage.fromarray(rgb).resize((350, 274))).astype(np.float32) / 255.0
    return buf.getvalue(), resized


def test_dsprites_scream_patches(monkeypatch):
    data, shapes, classes, _ = dsprites_npz(3)
    painting, scream = _painting()
    with serve_urls(monkeypatch, {URL: data, SCREAM.url: painting}):
        train = DSpritesScream(split="train", verification_mode="no_checks")
    assert len(train) == 3
    for index in range(3):
        rng = row_rng(index)
        top, left = int(rng.integers(0, 274 - 64)), int(rng.integers(0, 350 - 64))
        patch = scream[top:top + 64, left:left + 64].copy()
        mask = shapes[index] == 1
        patch[mask] = 1.0 - patch[mask]
        row = train[index]
        assert row["image"].shape == (64, 64, 3)
        np.testing.assert_array_equal(row["image"], (patch * 255).astype(np.uint8))
        assert row["label"] == classes[index].tolist()
