"""concatenate_datasets (dataset/transforms.py), side by side with Hugging Face's."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds


def _three(lib, info_of):
    """HF's test_concatenate data: three datasets, the first two with descriptions."""
    data = [{"id": [0, 1, 2]}, {"id": [3, 4, 5]}, {"id": [6, 7]}]
    infos = [info_of("Dataset1"), info_of("Dataset2"), None]
    return [lib.from_dict(d, info=i) for d, i in zip(data, infos)]


def test_concatenate_datasets_joins_descriptions_and_resets_a_disparate_format_as_hugging_face_does():
    datasets = pytest.importorskip("datasets")
    theirs = _three(datasets.Dataset, lambda d: datasets.DatasetInfo(description=d))
    ours = _three(sds.StableDataset, lambda d: sds.DatasetInfo(features={"id": sds.Value("int64")}, description=d))
    their_joined, joined = datasets.concatenate_datasets(theirs), sds.concatenate_datasets(ours)
    assert joined["id"] == their_joined["id"][:] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert joined.info.description == their_joined.info.description == "Dataset1\n\nDataset2"
    for group in (theirs, ours):
        group[0].set_format("numpy")
    assert datasets.concatenate_datasets(theirs).format["type"] is None  # HF's "reset"
    reset = sds.concatenate_datasets(ours)
    assert reset.format["type"] == "python" and reset[:2]["id"] == [0, 1]
    for group in (theirs, ours):
        group[1].set_format("numpy")
        group[2].set_format("numpy")
    assert datasets.concatenate_datasets(theirs).format["type"] == "numpy"
    kept = sds.concatenate_datasets(ours)
    assert kept.format["type"] == "numpy" and kept["id"].tolist() == list(range(8))


def test_concatenate_datasets_keeps_a_shared_format_and_its_other_columns_and_takes_info_and_split():
    a = sds.StableDataset.from_dict({"x": [1, 2], "t": ["a", "b"]}).with_format("numpy", columns=["x"],
                                                                                 output_all_columns=True)
    b = sds.StableDataset.from_dict({"x": [3], "t": ["c"]}).with_format("numpy", columns=["x"],
                                                                         output_all_columns=True)
    joined = sds.concatenate_datasets([a, b])
    assert joined[2] == {"x": 3, "t": "c"} and type(joined[2]["x"]) is np.int64 and type(joined[2]["t"]) is str
    empty = b.select([]).with_format("python")  # without rows: left out of the format rule, as Hugging Face does
    assert sds.concatenate_datasets([a, empty]).format["type"] == "numpy"
    given = sds.DatasetInfo(features=a.features, description="mine")
    named = sds.concatenate_datasets([a, b], info=given, split="all")
    assert named.info.description == "mine" and named.split == "all"
    same = sds.concatenate_datasets([a, a])
    assert same.info == a.info and same.split == "train+train"
