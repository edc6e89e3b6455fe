"""Rock Paper Scissors from miniature official zips of RGBA PNGs: rps/<class>/<file>.png."""

from __future__ import annotations

import cv2
import numpy as np

import stable_datasets as sds
from stable_datasets.images import RockPaperScissor
from tests.fixtures.catalog import colour, digit_images, serve_urls, zip_bytes
from tests.fixtures.image_archives import stored_images

BASE = "https://storage.googleapis.com/download.tensorflow.org/data/"


def _rgba_png(rgb: np.ndarray) -> bytes:
    bgra = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGRA)
    ok, data = cv2.imencode(".png", bgra)
    assert ok
    return data.tobytes()


def test_rock_paper_scissor_rgba_pngs_decode_to_rgb(monkeypatch):
    gray, _ = digit_images(4, 20)
    rgb = colour(gray)
    pngs = [_rgba_png(image) for image in rgb]
    files = {BASE + "rps.zip": zip_bytes({"rps/scissors/scissors01-000.png": pngs[0],
                                          "rps/rock/rock01-000.png": pngs[1], "rps/paper/paper01-000.png": pngs[2]}),
             BASE + "rps-test-set.zip": zip_bytes({"rps-test-set/rock/testrock01-00.png": pngs[3]})}
    with serve_urls(monkeypatch, files):
        train = RockPaperScissor(split="train", verification_mode="no_checks")
        test = sds.load_dataset("rock_paper_scissor", split="test", verification_mode="no_checks")
    assert len(train) == 3 and len(test) == 1
    assert set(train[0]) == {"image", "label"}
    assert stored_images(train) == pngs[:3]  # the PNG bytes as published
    assert train["label"] == [2, 0, 1] and test["label"] == [0]
    for row, expected in zip(train, rgb[:3]):
        np.testing.assert_array_equal(row["image"], expected)  # RGB, the alpha dropped
    assert train.features["label"].names == ["rock", "paper", "scissors"]
    assert train.info.num_examples == {"train": 2_520, "test": 372}
