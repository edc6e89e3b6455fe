"""dataset/combine.py: views made of views (concatenation, a split label, column views), off the public surface."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets.dataset.combine import concatenate, with_backends, with_split_name


@pytest.fixture(scope="module")
def parts():
    first = sds.StableDataset.from_dict({"x": [0, 1, 2]}, split="train")
    second = sds.StableDataset.from_dict({"x": [10, 11]}, split="test")
    return first, second


def test_concatenate_serves_each_view_in_turn_and_names_the_splits(parts):
    first, second = parts
    both = concatenate([first.select([2, 0]), second])
    assert both["x"] == [2, 0, 10, 11] and both.split == "train+test"
    assert concatenate([first, second]).cache_files[0]["view"] is False  # whole parts: no row selection
    with pytest.raises(ValueError, match="at least one"):
        concatenate([])
    with pytest.raises(ValueError, match="different features"):
        concatenate([first, sds.StableDataset.from_dict({"y": [1]})])


def test_a_split_label_and_other_backends_keep_rows_format_and_transform(parts):
    first, _ = parts
    view = first.select([1, 2]).with_format("numpy")
    labelled = with_split_name(view, "train[1:]")
    assert labelled.split == "train[1:]" and labelled["x"].tolist() == [1, 2] and view.split == "train"
    shown = first.with_transform(lambda batch: {"x": [v * 2 for v in batch["x"]]})
    again = with_backends(shown, shown.backends, shown.features)
    assert [again[i]["x"] for i in range(3)] == [0, 2, 4]
