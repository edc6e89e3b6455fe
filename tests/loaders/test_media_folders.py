"""imagefolder / videofolder: the opt-in column of each row's source file."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.loaders import LoaderError


def _folder(root: Path) -> list[str]:
    rng = np.random.default_rng(0)
    names = []
    for label in ("cat", "dog"):
        for i in range(3):
            path = root / label / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(cv2.imencode(".png", rng.integers(0, 255, (6, 5, 3), dtype=np.uint8))[1].tobytes())
            names.append(f"{label}/{i}.png")
    return names


def test_imagefolder_keeps_file_names_when_asked(tmp_path):
    names = _folder(tmp_path / "pets")
    ds = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "pets"), split="train", file_name_column="file_name")
    assert list(ds.features) == ["image", "label", "file_name"]
    assert sorted(ds["file_name"]) == names
    row = ds[ds["file_name"].index("dog/2.png")]
    assert ds.features["label"].int2str(row["label"]) == "dog"
    plain = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "pets"), split="train")
    assert list(plain.features) == ["image", "label"]  # off by default, and a cache of its own
    assert plain.cache_dirs[0] != ds.cache_dirs[0]


def test_file_names_with_a_metadata_file_are_relative_to_it(tmp_path):
    names = _folder(tmp_path / "pets")
    (tmp_path / "pets" / "metadata.jsonl").write_text(
        "\n".join(json.dumps({"file_name": n, "caption": f"picture {i}"}) for i, n in enumerate(names)))
    ds = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "pets"), split="train", file_name_column="source")
    assert list(ds.features) == ["image", "caption", "source"]
    assert ds["source"] == names and ds["caption"][1] == "picture 1"


def test_file_name_column_must_be_a_new_name(tmp_path):
    _folder(tmp_path / "pets")
    with pytest.raises(LoaderError, match=r"imagefolder: file_name_column='label' names a column the data already "
                                          r"has \(\['image', 'label'\]\); choose another name"):
        sds.load_dataset("imagefolder", data_dir=str(tmp_path / "pets"), split="train", file_name_column="label")
