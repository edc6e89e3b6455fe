"""ImageNet-100 from the ImageNet-1K manual-download layout: only the first 100 sorted wnids are kept."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import ImageNet100
from stable_datasets.images._imagenet_wnids import IN1K_CLASSES
from tests.fixtures.catalog import colour, digit_images, png_bytes
from tests.images.test_imagenet1k import imagenet_folder


def test_imagenet100_keeps_the_first_hundred_classes(tmp_path):
    gray, _ = digit_images(6, 16)
    rgb = colour(gray)
    kept, dropped = IN1K_CLASSES[99], IN1K_CLASSES[100]
    train = {dropped: [png_bytes(rgb[0])], kept: [png_bytes(rgb[1])], IN1K_CLASSES[2]: [png_bytes(rgb[2])]}
    val = [png_bytes(rgb[3]), png_bytes(rgb[4]), png_bytes(rgb[5])]
    id_to_wnid = {1: kept, 2: dropped, 3: IN1K_CLASSES[0]}
    folder = imagenet_folder(tmp_path / "raw", train, val, id_to_wnid, [2, 1, 3])
    data = ImageNet100(manual_dir=str(folder), verification_mode="no_checks", storage_format="lance")
    validation = sds.load_dataset("imagenet100", split="validation", data_dir=str(folder),
                                  verification_mode="no_checks")
    assert data["train"]["label"] == [99, 2]
    np.testing.assert_array_equal(data["train"][0]["image"], rgb[1])
    assert validation["label"] == [99, 0]
    np.testing.assert_array_equal(validation[0]["image"], rgb[4])
    names = validation.features["label"].names
    assert len(names) == 100 and names[0] == IN1K_CLASSES[0] and names[-1] == kept
    assert validation.info.num_examples == {"validation": 5_000}
