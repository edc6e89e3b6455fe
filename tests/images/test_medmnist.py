"""MedMNIST from miniature `.npz` files laid out as the official ones (`<split>_images`, `<split>_labels` of train,
val, test; labels (N, 1), or (N, 14) for chestmnist) under the official URLs. Ports upstream's checks: keys,
shapes (28, 28), (28, 28, 3) or (28, 28, 28), 1D multi-label for chestmnist, all three splits non-empty."""

from __future__ import annotations

import io

import numpy as np

import stable_datasets as sds
from stable_datasets.images import MedMNIST
from stable_datasets.images.medmnist import CONFIGS
from tests.fixtures.catalog import colour, digit_images, serve_urls


def _url(name: str) -> str:
    return f"https://zenodo.org/records/10519652/files/{name}.npz?download=1"


def _npz(images: np.ndarray, labels: np.ndarray, cut: tuple[int, int]) -> bytes:
    a, b = cut
    buf = io.BytesIO()
    np.savez_compressed(buf, train_images=images[:a], train_labels=labels[:a], val_images=images[a:b],
                        val_labels=labels[a:b], test_images=images[b:], test_labels=labels[b:])
    return buf.getvalue()


def test_medmnist_2d_grayscale_colour_and_multi_label(monkeypatch):
    gray, digits = digit_images(7, 28)
    rgb = colour(gray)
    flags = (np.arange(7 * 14).reshape(7, 14) % 3 == 0).astype(np.uint8)
    files = {_url("pneumoniamnist"): _npz(gray, (digits % 2).reshape(-1, 1), (4, 5)),
             _url("bloodmnist"): _npz(rgb, (digits % 8).reshape(-1, 1), (4, 5)),
             _url("chestmnist"): _npz(gray, flags, (4, 5))}
    with serve_urls(monkeypatch, files):
        pneumonia = MedMNIST(config_name="pneumoniamnist", verification_mode="no_checks")
        blood = sds.load_dataset("medmnist", name="bloodmnist", split="test", verification_mode="no_checks")
        chest = MedMNIST(config_name="chestmnist", split="validation", verification_mode="no_checks")
    assert pneumonia.num_rows == {"train": 4, "validation": 1, "test": 2}
    sample = pneumonia["train"][3]
    assert set(sample) == {"image", "label"}
    assert sample["image"].shape == (28, 28)
    np.testing.assert_array_equal(sample["image"], gray[3])
    assert pneumonia["test"]["label"] == (digits[5:] % 2).tolist()
    assert blood[1]["image"].shape == (28, 28, 3)
    np.testing.assert_array_equal(blood[1]["image"], rgb[6])
    assert blood["label"] == (digits[5:] % 8).tolist()
    assert chest[0]["label"] == flags[4].tolist() and len(chest[0]["label"]) == 14
    assert pneumonia["train"].info.num_examples == {"train": 4_708, "validation": 524, "test": 624}


def test_medmnist_3d_volumes(monkeypatch):
    volumes = np.random.default_rng(0).integers(0, 256, size=(5, 28, 28, 28), dtype=np.uint8)
    labels = np.array([[0], [2], [1], [2], [0]], dtype=np.uint8)
    with serve_urls(monkeypatch, {_url("fracturemnist3d"): _npz(volumes, labels, (2, 3))}):
        data = MedMNIST(config_name="fracturemnist3d", verification_mode="no_checks")
    assert data.num_rows == {"train": 2, "validation": 1, "test": 2}
    np.testing.assert_array_equal(np.asarray(data["test"][1]["image"]), volumes[4])
    assert np.asarray(data["test"][1]["image"]).shape == (28, 28, 28)
    assert data["train"]["label"] == [0, 2] and data["validation"]["label"] == [1]
    assert data["train"].features["label"].num_classes == 3


def test_medmnist_has_upstreams_eighteen_configs():
    assert list(CONFIGS)[:2] == ["pathmnist", "chestmnist"] and len(CONFIGS) == 18
    assert [c.name for c in MedMNIST.BUILDER_CONFIGS] == list(CONFIGS)
    assert MedMNIST.create().config.name == "pathmnist"
    assert MedMNIST.create("dermamnist").info.license == "CC BY-NC 4.0"
    assert MedMNIST.create("organmnist3d").info.num_examples == {"train": 971, "validation": 161, "test": 610}
