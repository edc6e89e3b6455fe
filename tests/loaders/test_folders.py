"""Walking data folders: a folder reached again through a symlink is read once, whatever form the path has."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.loaders.folders import list_files


def _class_folders(root):
    for name, value in (("cat", 10), ("dog", 200)):
        (root / name).mkdir(parents=True)
        for i in range(2):
            cv2.imwrite(str(root / name / f"{i}.png"), np.full((2, 2), value + i, np.uint8))
    os.symlink("../cat", root / "cat" / "loop")  # a link back to its own folder


@pytest.mark.parametrize("relative", [True, False])
def test_a_class_folder_linking_to_itself_keeps_four_rows_and_their_labels(tmp_path, monkeypatch, relative):
    """Before: with a relative data_dir the loop was walked once more: 6 rows and no label column."""
    _class_folders(tmp_path / "imgs")
    monkeypatch.chdir(tmp_path)
    data_dir = "imgs" if relative else str(tmp_path / "imgs")
    assert [os.path.relpath(p, data_dir) for p in list_files(data_dir)] == ["cat/0.png", "cat/1.png", "dog/0.png",
                                                                          "dog/1.png"]
    ds = sds.load_dataset("imagefolder", data_dir=data_dir, split="train")
    assert ds.features["label"] == sds.ClassLabel(names=["cat", "dog"])
    assert ds["label"] == [0, 0, 1, 1]
    assert [int(ds[i]["image"][0, 0, 0]) for i in range(4)] == [10, 11, 200, 201]


def test_files_at_mixed_depths_say_why_they_get_no_label(tmp_path, warnings_logged):
    _class_folders(tmp_path / "imgs")
    os.unlink(tmp_path / "imgs" / "cat" / "loop")
    (tmp_path / "imgs" / "dog" / "old").mkdir()
    cv2.imwrite(str(tmp_path / "imgs" / "dog" / "old" / "9.png"), np.zeros((2, 2), np.uint8))
    ds = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")
    assert "label" not in ds.features and len(ds) == 5
    assert any("the 'imagefolder' loader: files sit in 3 folders at different depths, so they get no label column; "
               "pass drop_labels=False to label each by its folder name" in m for m in warnings_logged), warnings_logged
