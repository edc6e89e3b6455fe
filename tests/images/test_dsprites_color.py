"""Coloured dSprites from a miniature official `.npz`: the shape in its row's colour (drawn in [0.5, 1) from the
row's seeded generator) on black, upstream's keys plus colorRGB, the same rows on every build."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import DSpritesColor
from stable_datasets.images._dsprites import row_rng
from tests.fixtures.catalog import serve_urls
from tests.fixtures.dsprites import URL, dsprites_npz


def test_dsprites_color_rows(monkeypatch):
    data, shapes, classes, _ = dsprites_npz(5)
    with serve_urls(monkeypatch, {URL: data}):
        train = DSpritesColor(split="train", verification_mode="no_checks")
        tail = sds.load_dataset("dsprites_color", split="train[3:]", verification_mode="no_checks")
    assert len(train) == 5
    assert list(train.features)[:3] == ["image", "index", "label"] and "colorRGB" in train.features
    for index in (0, 3):
        row = train[index]
        color = row_rng(index).uniform(0.5, 1.0, size=(3,))
        assert row["image"].shape == (64, 64, 3) and row["image"].dtype == np.uint8
        np.testing.assert_array_equal(row["image"], ((shapes[index][..., None] * color) * 255).astype(np.uint8))
        np.testing.assert_allclose(row["colorRGB"], color, rtol=1e-6)
        assert all(0.5 <= c < 1.0 for c in row["colorRGB"])
        assert np.all(row["image"][shapes[index] == 0] == 0)  # black background
    assert train["colorRGB"][0] != train["colorRGB"][1]  # each row draws its own colour
    np.testing.assert_array_equal(tail[0]["image"], train[3]["image"])  # seeded: the same rows build after build
    assert train["shape"] == classes[:, 1].tolist()
