"""dSprites from a miniature `.npz` in the official layout (its pickled metadata member never read) under the
official URL. Ports upstream's checks: every key, (64, 64) uint8, the 6 factors and values in range and equal
to `label` / `label_values`."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import DSprites
from tests.fixtures.catalog import serve_urls
from tests.fixtures.dsprites import URL, dsprites_npz

KEYS = {"image", "index", "label", "label_values", "color", "shape", "scale", "orientation", "posX", "posY",
        "colorValue", "shapeValue", "scaleValue", "orientationValue", "posXValue", "posYValue"}


def test_dsprites_rows_are_the_arrays(monkeypatch):
    data, shapes, classes, values = dsprites_npz(6)
    with serve_urls(monkeypatch, {URL: data}):
        train = DSprites(split="train", verification_mode="no_checks")
        again = sds.load_dataset("dsprites", split="train[4:]", verification_mode="no_checks")
    assert len(train) == 6 and len(again) == 2
    sample = train[4]
    assert set(sample) == KEYS
    assert sample["image"].shape == (64, 64) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], shapes[4] * 255)
    assert set(np.unique(sample["image"]).tolist()) == {0, 255}
    assert sample["index"] == 4 and sample["label"] == classes[4].tolist()
    np.testing.assert_allclose(sample["label_values"], values[4], rtol=1e-6)  # stored as float32
    assert [sample[k] for k in ("color", "shape", "scale", "orientation", "posX", "posY")] == classes[4].tolist()
    assert sample["orientationValue"] == values[4, 3] and sample["colorValue"] == 1.0  # float64, exact
    assert again["index"] == [4, 5] and train["posY"] == classes[:, 5].tolist()
    assert train.info.num_examples == {"train": 737_280}
