"""Output formats (dataset/formatting.py): the numpy format as Hugging Face's gives it, HF side by side."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.dataset.formatting import consolidate, numpy_batch, numpy_row

datasets = pytest.importorskip("datasets")


def shape_of(value: Any) -> Any:
    """What a formatted value is made of: its type, and for arrays their dtype and shape (object arrays
    with what they hold), so HF's and our outputs compare exactly."""
    if isinstance(value, np.ndarray):
        inner = [shape_of(v) for v in value] if value.dtype == object else None
        return ("ndarray", value.dtype.str, value.shape, inner)
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return ["list", *[shape_of(v) for v in value]]
    return type(value).__name__


COLUMNS = {  # HF's cases: test_set_format_numpy_multiple_columns, test_format_vectors, test_format_ragged_vectors
    "text": ["a", "bb", "c"],
    "text_with_null": ["a", None, "c"],
    "ragged": [[1, 2], [3], [4, 5, 6]],
    "equal": [[1, 2], [3, 4], [5, 6]],
    "strings": [["a"], ["b", "c"], []],
    "equal_nested": [[[1, 2]], [[3, 4]], [[5, 6]]],
    "ragged_nested": [[[1], [2, 3]], [[4]], []],
    "ints": [3, 2, 1],
}


@pytest.mark.parametrize("name", list(COLUMNS))
def test_numpy_format_gives_what_hugging_face_gives(name):
    data = {name: COLUMNS[name]}
    theirs = datasets.Dataset.from_dict(data).with_format("numpy")
    ours = sds.StableDataset.from_dict(data).with_format("numpy")
    assert shape_of(ours[0][name]) == shape_of(theirs[0][name])  # a row
    assert shape_of(ours[:3][name]) == shape_of(theirs[:3][name])  # a batch
    assert shape_of(ours[name]) == shape_of(theirs[name][:])  # a column
    assert shape_of(next(iter(ours))[name]) == shape_of(next(iter(theirs))[name])  # iteration
    assert shape_of(ours.__getitems__([0, 1])[1][name]) == shape_of(theirs.__getitems__([0, 1])[1][name])
    assert ours.with_format("python")[:] == theirs.with_format(None)[:]


def test_numpy_strings_and_arrays_with_their_values():
    ds = sds.StableDataset.from_dict({k: COLUMNS[k] for k in ("text", "text_with_null", "ragged", "equal")})
    ds.set_format("numpy")
    row = ds[0]
    assert type(row["text"]) is np.str_ and row["text"].item() == "a"
    batch = ds[:3]
    assert batch["text"].dtype == np.dtype("<U2") and batch["text"].tolist() == ["a", "bb", "c"]
    assert batch["text_with_null"].dtype == object and batch["text_with_null"].tolist() == ["a", None, "c"]
    assert batch["equal"].dtype == np.int64 and batch["equal"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert batch["ragged"].dtype == object and batch["ragged"].shape == (3,)
    assert [cell.tolist() for cell in batch["ragged"]] == [[1, 2], [3], [4, 5, 6]]
    assert [cell.dtype for cell in batch["ragged"]] == [np.int64] * 3


def test_a_struct_column_in_numpy_format_is_an_object_array_of_dicts_with_numpy_lists():
    ds = sds.StableDataset.from_dict({"nested": [{"foo": [1.0, 1.0, 1.0], "n": 1}, {"foo": [2.0, 2.0, 2.0], "n": 2}]})
    batch = ds.with_format("numpy")[:2]["nested"]
    assert batch.dtype == object and batch.shape == (2,)
    assert isinstance(batch[0]["foo"], np.ndarray) and batch[0]["foo"].tolist() == [1.0, 1.0, 1.0]
    assert type(batch[1]["n"]) is np.int64 and batch[1]["n"] == 2


def test_torch_format_keeps_python_strings_as_hugging_face_does():
    torch = pytest.importorskip("torch")
    ds = sds.StableDataset.from_dict({"text": ["a", "bb"], "vec": [[1.0], [2.0]]}).with_format("torch")
    assert type(ds[0]["text"]) is str and ds[:2]["text"] == ["a", "bb"]
    assert isinstance(ds[:2]["vec"], torch.Tensor) and ds[:2]["vec"].tolist() == [[1.0], [2.0]]


def test_consolidate_stacks_arrays_of_one_shape_and_keeps_the_rest_as_objects():
    stacked = consolidate([np.array([1, 2]), np.array([3, 4])])
    assert stacked.dtype == np.int64 and stacked.tolist() == [[1, 2], [3, 4]]
    mixed_dtypes = consolidate([np.array([1, 2]), np.array([3.0, 4.0])])
    assert mixed_dtypes.dtype == object and mixed_dtypes.shape == (2,)
    assert consolidate([]).dtype == object and consolidate([]).shape == (0,)
    assert consolidate([np.str_("a"), np.str_("b")]).dtype == object
    row = numpy_row({"t": "x", "l": [1, 2], "d": {"k": [1.5]}})
    assert type(row["t"]) is np.str_ and row["l"].dtype == np.int64 and row["l"].tolist() == [1, 2]
    assert row["d"]["k"].dtype == np.float64 and row["d"]["k"].tolist() == [1.5]
    batch = numpy_batch({"t": ["x", "yy"], "n": np.array([1, 2])})
    assert batch["t"].dtype == np.dtype("<U2") and batch["n"].tolist() == [1, 2]


NESTED = {"filename": ["a", "b"], "nested": [{"foo": [1.0, 1.0, 1.0]}, {"foo": [2.0, 2.0, 2.0]}]}


def test_set_format_takes_one_column_name_as_a_string_as_hugging_face_does():
    """HF's test_format_nested: `set_format("torch", columns="nested")` formats the struct column."""
    torch = pytest.importorskip("torch")
    theirs = datasets.Dataset.from_dict(NESTED)
    theirs.set_format("torch", columns="nested")
    ours = sds.StableDataset.from_dict(NESTED)
    ours.set_format("torch", columns="nested")
    assert ours.format["columns"] == ("nested",) and theirs.format["columns"] == ["nested"]
    row, batch, column = ours[0], ours[:2], ours["nested"]
    assert list(row) == list(theirs[0]) == ["nested"]
    assert isinstance(row["nested"]["foo"], torch.Tensor) and row["nested"]["foo"].tolist() == [1.0, 1.0, 1.0]
    assert isinstance(batch["nested"][1]["foo"], torch.Tensor) and batch["nested"][1]["foo"].tolist() == [2.0] * 3
    assert isinstance(column[0]["foo"], torch.Tensor) and isinstance(theirs["nested"][0]["foo"], torch.Tensor)
    ours.set_format("numpy", columns="nested")
    assert isinstance(ours[0]["nested"]["foo"], np.ndarray) and ours[:2]["nested"][0]["foo"].tolist() == [1.0] * 3


def test_set_format_of_a_struct_field_is_refused_as_hugging_face_refuses_it():
    theirs = datasets.Dataset.from_dict(NESTED)
    with pytest.raises(ValueError) as their_error:
        theirs.set_format("numpy", columns=["nested.foo"])
    assert "['nested.foo'] not in the dataset" in str(their_error.value)
    ours = sds.StableDataset.from_dict(NESTED)
    with pytest.raises(ValueError) as error:
        ours.set_format("numpy", columns=["nested.foo"])
    assert str(error.value).strip('"') == (
        "with_format: no column(s) ['nested.foo']; columns are ['filename', 'nested']; 'nested.foo' is a field of "
        "the struct column 'nested': format that column, or flatten() the dataset first")
    assert ours.format["type"] == "python"  # nothing changed
    assert ours.flatten().with_format("numpy", columns=["nested.foo"])[:2]["nested.foo"].tolist() == [[1.0] * 3,
                                                                                                       [2.0] * 3]
