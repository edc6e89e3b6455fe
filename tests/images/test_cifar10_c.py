"""CIFAR-10-C from a miniature tar of `.npy` arrays (the official layout) under the official URL."""

from __future__ import annotations

import io

import numpy as np

import stable_datasets as sds
from stable_datasets.images import CIFAR10C
from tests.fixtures.catalog import colour, digit_images, serve_urls, tar_bytes

URL = "https://zenodo.org/records/2535967/files/CIFAR-10-C.tar?download=1"
PER_LEVEL = 2


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def corrupted_archive(folder: str, corruptions: list[str], num_classes: int) -> tuple[bytes, dict, np.ndarray]:
    """A tar laid out as the official one: <folder>/labels.npy (the test labels once per severity) and one
    (5 x PER_LEVEL, 32, 32, 3) uint8 array per corruption, each with its own pixels."""
    labels = np.tile((np.arange(PER_LEVEL) * 7 + 3) % num_classes, 5).astype(np.int64)
    arrays = {}
    for number, name in enumerate(corruptions):
        gray, _ = digit_images(5 * PER_LEVEL, 32, offset=number * 10)
        arrays[name] = colour(gray)
    members = {f"{folder}/labels.npy": npy_bytes(labels)}
    members.update({f"{folder}/{name}.npy": npy_bytes(array) for name, array in arrays.items()})
    return tar_bytes(members, mode="w"), arrays, labels


def test_cifar10_c_every_corruption_and_severity_in_upstream_order(monkeypatch):
    names = CIFAR10C._corruptions()
    archive, arrays, labels = corrupted_archive("CIFAR-10-C", names, 10)
    with serve_urls(monkeypatch, {URL: archive}):
        data = CIFAR10C(split="test", verification_mode="no_checks")
        fog3 = sds.load_dataset("cifar10_c", split="test", name="fog_3", verification_mode="no_checks")
        snow = CIFAR10C(split="test", config_name="snow", verification_mode="no_checks", storage_format="lance")
    assert len(data) == 19 * 5 * PER_LEVEL
    assert set(data[0]) == {"image", "label", "corruption_name", "corruption_level"}
    assert data["corruption_name"][:11] == ["zoom_blur"] * 10 + ["speckle_noise"]
    assert data["corruption_level"][:10] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert data["label"][:10] == labels.tolist()
    np.testing.assert_array_equal(data[0]["image"], arrays["zoom_blur"][0])
    np.testing.assert_array_equal(data[-1]["image"], arrays["brightness"][-1])
    assert data[0]["image"].shape == (32, 32, 3) and data[0]["image"].dtype == np.uint8
    assert fog3["corruption_name"] == ["fog", "fog"] and fog3["corruption_level"] == [3, 3]
    np.testing.assert_array_equal(fog3[1]["image"], arrays["fog"][2 * PER_LEVEL + 1])
    assert fog3["label"] == labels[2 * PER_LEVEL:3 * PER_LEVEL].tolist()
    assert snow["corruption_level"] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    np.testing.assert_array_equal(snow[9]["image"], arrays["snow"][9])
    assert data.features["label"].names[0] == "airplane" and data.features["label"].names[-1] == "truck"
    assert data.info.num_examples == {"test": 950_000}
    assert fog3.info.num_examples == {"test": 10_000} and snow.info.num_examples == {"test": 50_000}


def test_cifar10_c_configs_cover_each_corruption_and_severity():
    names = [c.name for c in CIFAR10C.BUILDER_CONFIGS]
    assert len(names) == 1 + 19 + 19 * 5 and names[:2] == ["all", "zoom_blur"] and names[-1] == "brightness_5"

