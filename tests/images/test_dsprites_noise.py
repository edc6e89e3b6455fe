"""dSprites on noise from a miniature official `.npz`: the shape white on the row's seeded uniform noise."""

from __future__ import annotations

import numpy as np

from stable_datasets.images import DSpritesNoise
from stable_datasets.images._dsprites import row_rng
from tests.fixtures.catalog import serve_urls
from tests.fixtures.dsprites import URL, dsprites_npz


def test_dsprites_noise_rows(monkeypatch):
    data, shapes, classes, values = dsprites_npz(4)
    with serve_urls(monkeypatch, {URL: data}):
        train = DSpritesNoise(split="train", verification_mode="no_checks")
    assert len(train) == 4
    row = train[2]
    noise = row_rng(2).uniform(0, 1, size=(64, 64, 3))
    expected = (np.minimum(shapes[2].astype(np.float32)[..., None] + noise, 1.0) * 255).astype(np.uint8)
    assert row["image"].shape == (64, 64, 3)
    np.testing.assert_array_equal(row["image"], expected)
    assert np.all(row["image"][shapes[2] == 1] == 255)  # the shape is white
    assert row["label"] == classes[2].tolist() and row["posXValue"] == values[2, 4]
