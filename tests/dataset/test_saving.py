"""save_to_disk / load_from_disk: a view becomes a standalone folder of its own rows."""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError


def _source() -> sds.StableDataset:
    return sds.StableDataset.from_dict({"i": list(range(100)), "t": [f"row {i}" for i in range(100)],
                                        "label": [i % 3 for i in range(100)]},
                                       features={"i": sds.Value("int64"), "t": sds.Value("string"),
                                                 "label": sds.ClassLabel(names=["a", "b", "c"])})


def test_a_split_of_train_test_split_saves_only_its_rows_and_opens_without_its_source(tmp_path, cache_root):
    halves = _source().train_test_split(test_size=0.2, seed=3)
    test = halves["test"]
    assert len(test) == 20 and all(f["view"] and f["num_rows"] == 100 for f in test.cache_files)
    expected, split = test.to_dict(), test.split
    test.save_to_disk(tmp_path / "saved")
    del halves, test
    gc.collect()
    shutil.rmtree(cache_root)  # the source is gone
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "saved", moved)  # the folder is standalone: it moves whole
    loaded = sds.load_from_disk(moved)
    assert len(loaded) == 20 and loaded.to_dict() == expected
    assert loaded.features["label"] == sds.ClassLabel(names=["a", "b", "c"])
    assert loaded.split == split
    assert [f["view"] for f in loaded.cache_files] == [False] and loaded.cache_files[0]["num_rows"] == 20


def test_a_dataset_dict_saves_every_split(tmp_path):
    source = _source()
    kept = source.filter(lambda row: row["i"] % 2 == 0)
    dd = sds.DatasetDict({"train": kept.select(range(10)), "validation": source.shuffle(seed=1).select([5, 1])})
    dd.save_to_disk(tmp_path / "dd")
    loaded = sds.load_from_disk(tmp_path / "dd")
    assert isinstance(loaded, sds.DatasetDict) and list(loaded) == ["train", "validation"]
    assert loaded["train"]["i"] == list(range(0, 20, 2))
    assert loaded["validation"]["i"] == dd["validation"]["i"]


def test_saving_again_replaces_the_folder_and_other_folders_are_refused(tmp_path):
    source = _source()
    target = tmp_path / "saved"
    source.select([1, 2]).save_to_disk(target)
    opened = sds.load_from_disk(target)
    source.select([7]).save_to_disk(target)
    assert sds.load_from_disk(target)["i"] == [7]
    assert opened["i"] == [1, 2]  # a dataset opened before keeps serving what it opened
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError) as exc:
        source.save_to_disk(other)
    assert str(exc.value) == (f"save_to_disk: {other} is a folder that holds other files (no dataset.json); save "
                              "into a new or empty folder")
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_load_from_disk_of_a_folder_save_to_disk_did_not_write(tmp_path):
    with pytest.raises(CacheError) as exc:
        sds.load_from_disk(tmp_path)
    assert str(exc.value).startswith(f"load_from_disk: {tmp_path} is not a folder that save_to_disk wrote")


def test_a_saved_folder_opens_in_another_process(tmp_path):
    _source().select([3, 4]).save_to_disk(tmp_path / "saved")
    code = textwrap.dedent(f"""
        import stable_datasets as sds
        print(sds.load_from_disk({str(tmp_path / "saved")!r})["t"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['row 3', 'row 4']"


def _hf():
    return pytest.importorskip("datasets")


def test_load_from_disk_restores_the_saved_format_as_hugging_face_does(tmp_path):
    """Hugging Face's test_restore_saved_format, with its data: a numpy format of one column with the others as
    Python values comes back from disk as it was saved, rows included (HF side by side as the oracle)."""
    hf = _hf()
    data = {"col_1": [3, 2, 1, 0], "col_2": ["a", "b", "c", "d"], "col_3": [False, True, False, True]}
    theirs = hf.Dataset.from_dict(data)
    theirs.set_format(type="numpy", columns=["col_1"], output_all_columns=True)
    theirs.save_to_disk(str(tmp_path / "hf"))
    theirs = hf.load_from_disk(str(tmp_path / "hf"))
    ours = sds.StableDataset.from_dict(data)
    ours.set_format(type="numpy", columns=["col_1"], output_all_columns=True)
    ours.save_to_disk(tmp_path / "ours")
    loaded = sds.load_from_disk(tmp_path / "ours")
    assert loaded.format == ours.format == {"type": "numpy", "columns": ("col_1",), "decode": True,
                                            "output_all_columns": True}
    assert [theirs.format[k] for k in ("type", "columns", "output_all_columns")] == ["numpy", ["col_1"], True]
    row, their_row = loaded[0], theirs[0]
    assert list(row) == list(their_row) == ["col_1", "col_2", "col_3"]
    assert [type(row[k]) for k in row] == [type(their_row[k]) for k in their_row] == [np.int64, str, bool]
    assert row == {"col_1": 3, "col_2": "a", "col_3": False}


def test_load_from_disk_restores_torch_with_its_dtype_and_every_split_of_a_dict(tmp_path):
    torch = pytest.importorskip("torch")
    source = _source()
    dd = sds.DatasetDict({"train": source.with_format("torch", columns=["i"], dtype=torch.float64),
                          "test": source.select([5, 6]).with_format("numpy")})
    dd.save_to_disk(tmp_path / "dd")
    loaded = sds.load_from_disk(tmp_path / "dd")
    assert loaded["train"].format == {"type": "torch", "columns": ("i",), "decode": True, "output_all_columns": False}
    assert loaded["train"][:2]["i"].dtype == torch.float64 and loaded["train"][:2]["i"].tolist() == [0.0, 1.0]
    assert loaded["test"].format["type"] == "numpy"
    assert loaded["test"]["i"].tolist() == [5, 6]


def test_a_folder_saved_before_formats_were_saved_opens_in_python_format(tmp_path):
    source = _source().with_format("numpy")
    source.save_to_disk(tmp_path / "saved")
    listing = json.loads((tmp_path / "saved" / "dataset.json").read_text())
    del listing["output_format"]
    (tmp_path / "saved" / "dataset.json").write_text(json.dumps(listing))
    loaded = sds.load_from_disk(tmp_path / "saved")
    assert loaded.format["type"] == "python" and loaded[0] == {"i": 0, "t": "row 0", "label": 0}
