"""ImageNet-1K from a manual-download folder laid out as the official files: a train tar of class tars, a flat
validation tar, and the devkit (meta.mat + validation ground truth)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import stable_datasets as sds
from stable_datasets.errors import ManualDownloadError
from stable_datasets.images import ImageNet1K
from stable_datasets.images._imagenet_wnids import IN1K_CLASSES, WNID_TO_IDX
from tests.fixtures.catalog import colour, digit_images, jpeg_bytes, png_bytes, tar_bytes


def devkit_bytes(id_to_wnid: dict[int, str], truth: list[int]) -> bytes:
    """ILSVRC2012_devkit_t12.tar.gz: data/meta.mat (a `synsets` struct array) and the ground truth list."""
    fields = [("ILSVRC2012_ID", "O"), ("WNID", "O"), ("words", "O"), ("num_children", "O")]
    synsets = np.zeros((len(id_to_wnid),), dtype=fields)
    for row, (number, wnid) in enumerate(sorted(id_to_wnid.items())):
        synsets[row] = (number, wnid, "", 0)
    meta = io.BytesIO()
    scipy.io.savemat(meta, {"synsets": synsets})
    return tar_bytes({"ILSVRC2012_devkit_t12/data/meta.mat": meta.getvalue(),
                      "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt":
                      "".join(f"{n}\n" for n in truth).encode()})


def imagenet_folder(folder: Path, train: dict[str, list[bytes]], val: list[bytes], id_to_wnid: dict[int, str],
                    truth: list[int]) -> Path:
    """The three official files in one folder, as MANUAL_DOWNLOAD says."""
    folder.mkdir()
    classes = {f"{wnid}.tar": tar_bytes({f"{wnid}_{n}.JPEG": image for n, image in enumerate(images)}, mode="w")
               for wnid, images in train.items()}
    (folder / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(classes, mode="w"))
    (folder / "ILSVRC2012_img_val.tar").write_bytes(
        tar_bytes({f"ILSVRC2012_val_{n:08d}.JPEG": image for n, image in enumerate(val, 1)}, mode="w"))
    (folder / "ILSVRC2012_devkit_t12.tar.gz").write_bytes(devkit_bytes(id_to_wnid, truth))
    return folder


def test_imagenet1k_train_and_validation_from_the_official_files(tmp_path):
    gray, _ = digit_images(7, 16)
    rgb = colour(gray)
    later, first = IN1K_CLASSES[500], IN1K_CLASSES[0]
    train = {later: [png_bytes(rgb[0]), png_bytes(rgb[1])], first: [png_bytes(rgb[2])]}
    val = [png_bytes(rgb[3]), jpeg_bytes(rgb[4]), png_bytes(rgb[5])]
    id_to_wnid = {17: IN1K_CLASSES[3], 88: IN1K_CLASSES[999], 213: first}  # ILSVRC ids are not label indices
    folder = imagenet_folder(tmp_path / "raw", train, val, id_to_wnid, [88, 17, 213])
    data = ImageNet1K(manual_dir=str(folder), verification_mode="no_checks")
    validation = sds.load_dataset("imagenet1k", split="validation", data_dir=str(folder),
                                  verification_mode="no_checks")
    assert sorted(data) == ["train", "validation"]
    assert set(data["train"][0]) == {"image", "label"}
    assert data["train"]["label"] == [500, 500, 0]  # the tar's order; labels by sorted wnid
    np.testing.assert_array_equal(data["train"][1]["image"], rgb[1])
    np.testing.assert_array_equal(data["train"][2]["image"], rgb[2])
    assert validation["label"] == [999, 3, 0]
    np.testing.assert_array_equal(validation[2]["image"], rgb[5])
    assert validation.features["label"].names[0] == "n01440764"
    assert validation.features["label"].names[-1] == "n15075141"
    assert WNID_TO_IDX["n15075141"] == 999
    assert validation.info.num_examples == {"train": 1_281_167, "validation": 50_000}


def test_imagenet1k_says_what_to_download(tmp_path):
    with pytest.raises(ManualDownloadError, match=r"imagenet1k: no data_dir was given\. Download "
                                                  r"ILSVRC2012_img_train\.tar, ILSVRC2012_img_val\.tar"):
        ImageNet1K(split="train")
    (tmp_path / "ILSVRC2012_img_train.tar").write_bytes(b"")
    with pytest.raises(ManualDownloadError, match=r"ILSVRC2012_img_val\.tar is missing"):
        ImageNet1K(split="train", manual_dir=str(tmp_path))
