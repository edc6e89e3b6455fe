"""CIFAR-100-C from a miniature tar of `.npy` arrays (the official layout) under the official URL."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import CIFAR100C
from tests.fixtures.catalog import serve_urls
from tests.images.test_cifar10_c import PER_LEVEL, corrupted_archive

URL = "https://zenodo.org/records/3555552/files/CIFAR-100-C.tar?download=1"


def test_cifar100_c_rows_labels_and_a_severity_config(monkeypatch):
    archive, arrays, labels = corrupted_archive("CIFAR-100-C", CIFAR100C._corruptions(), 100)
    with serve_urls(monkeypatch, {URL: archive}):
        data = CIFAR100C(split="test", verification_mode="no_checks")
        pixelate = sds.load_dataset("cifar100_c", split="test", name="pixelate_5", verification_mode="no_checks")
    assert len(data) == 19 * 5 * PER_LEVEL
    assert set(data[0]) == {"image", "label", "corruption_name", "corruption_level"}
    per_corruption = 5 * PER_LEVEL
    assert data["corruption_name"][::per_corruption] == CIFAR100C._corruptions()
    assert data["corruption_level"][per_corruption:2 * per_corruption] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert data["label"] == labels.tolist() * 19
    assert all(0 <= label < 100 for label in data["label"])
    np.testing.assert_array_equal(data[per_corruption + 3]["image"], arrays["speckle_noise"][3])
    assert pixelate["corruption_level"] == [5, 5] and pixelate["label"] == labels[-2:].tolist()
    np.testing.assert_array_equal(pixelate[0]["image"], arrays["pixelate"][4 * PER_LEVEL])
    assert data.features["label"].names[:2] == ["apple", "aquarium_fish"]
    assert data.features["label"].names[-1] == "worm"
    assert data.info.num_examples == {"test": 950_000} and pixelate.info.num_examples == {"test": 10_000}
