"""Tiny ImageNet-C from a miniature uncompressed tar of JPEGs (the official layout) under the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import TinyImagenetC
from stable_datasets.images.tiny_imagenet_c import CORRUPTIONS
from tests.fixtures.catalog import colour, digit_images, png_bytes, serve_urls, tar_bytes

URL = "https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar?download=1"
FIRST, LAST = "n02124075", "n02504458"


def test_tiny_imagenet_c_rows_in_upstream_order_whatever_the_tar_order(monkeypatch):
    gray, _ = digit_images(2 * 75, 64)
    rgb = colour(gray)
    expected, members = [], {}
    for c_number, corruption in enumerate(CORRUPTIONS):
        for level in range(1, 6):
            for w_number, wnid in enumerate((FIRST, LAST)):
                image = rgb[(c_number * 5 + level - 1) * 2 + w_number]
                expected.append((corruption, level, wnid, image))
                members[f"Tiny-ImageNet-C/{corruption}/{level}/{wnid}/test_{w_number}.JPEG"] = png_bytes(image)
    archive = tar_bytes(dict(reversed(members.items())), mode="w")  # the tar's order is not the rows' order
    with serve_urls(monkeypatch, {URL: archive}):
        data = TinyImagenetC(split="test", verification_mode="no_checks")
        fog2 = sds.load_dataset("tiny_imagenet_c", split="test", name="fog_2", verification_mode="no_checks")
        both = TinyImagenetC(config_name="snow", verification_mode="no_checks")
    assert len(data) == 15 * 5 * 2
    assert set(data[0]) == {"image", "label", "corruption_name", "corruption_level"}
    assert data["corruption_name"] == [c for c, _, _, _ in expected]
    assert data["corruption_level"] == [lv for _, lv, _, _ in expected]
    assert data["label"][:2] == [0, 199]
    for row in (0, 1, 77, 149):
        np.testing.assert_array_equal(data[row]["image"], expected[row][3])
    assert data[0]["image"].shape == (64, 64, 3)
    assert fog2["corruption_name"] == ["fog", "fog"] and fog2["corruption_level"] == [2, 2]
    np.testing.assert_array_equal(fog2[1]["image"], expected[CORRUPTIONS.index("fog") * 10 + 3][3])
    assert list(both) == ["test"] and both["test"]["corruption_level"] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert data.features["label"].names[0] == FIRST and data.features["label"].names[-1] == LAST
    assert data.info.num_examples == {"test": 750_000} and fog2.info.num_examples == {"test": 10_000}
