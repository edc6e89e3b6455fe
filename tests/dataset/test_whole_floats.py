"""A map returning whole floats for an integer column (scalar, list, nested list, struct of lists) keeps the
column's feature, as Hugging Face `datasets` does; a fraction, NaN or a value out of range makes it float.
Hugging Face runs side by side as the oracle: exact features and values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.dataset.whole_floats import as_column_type, ints_as_floats
from stable_datasets.features.hf import from_hf_features, to_hf_features

datasets = pytest.importorskip("datasets")


def _floats(x):
    if isinstance(x, list):
        return [_floats(v) for v in x]
    if isinstance(x, dict):
        return {k: _floats(v) for k, v in x.items()}
    return None if x is None else float(x)


def _plus_half(x):
    if isinstance(x, list):
        return [_plus_half(v) for v in x]
    return x + 0.5


INT_LISTS = {"x": [[1, 2], [3], []]}
CASES = {  # name: (data, features (None: inferred), function of the row)
    "list of int64, whole floats": (INT_LISTS, None, lambda r: {"x": _floats(r["x"])}),
    "list of int64, fractions": (INT_LISTS, None, lambda r: {"x": _plus_half(r["x"])}),
    "list of int64, one fraction": (INT_LISTS, None,
                                    lambda r: {"x": [v + (0.5 if v == 3 else 0.0) for v in r["x"]]}),
    "list of int64, out of range": (INT_LISTS, None, lambda r: {"x": [1e20]}),
    "list of int64, numpy float32 arrays": (INT_LISTS, None, lambda r: {"x": np.asarray(r["x"], np.float32)}),
    "list of int64, a row None": (INT_LISTS, None, lambda r: {"x": None if r["x"] == [3] else _floats(r["x"])}),
    "list of int64, a new column of whole floats": (INT_LISTS, None, lambda r: {"y": _floats(r["x"])}),
    "list of lists of int64": ({"x": [[[1, 2], [3]], [[4]]]}, None, lambda r: {"x": _floats(r["x"])}),
    "list of lists, a fraction": ({"x": [[[1, 2], [3]], [[4]]]}, None, lambda r: {"x": _plus_half(r["x"])}),
    "list of int32": (INT_LISTS, {"x": sds.Sequence(sds.Value("int32"))}, lambda r: {"x": _floats(r["x"])}),
    "list of uint8": (INT_LISTS, {"x": sds.Sequence(sds.Value("uint8"))}, lambda r: {"x": _floats(r["x"])}),
    "list of length 2": ({"x": [[1, 2], [3, 4]]}, {"x": sds.Sequence(sds.Value("int64"), length=2)},
                         lambda r: {"x": _floats(r["x"])}),
    "struct of an int list": ({"s": [{"a": [1, 2]}, {"a": [3]}]}, None, lambda r: {"s": _floats(r["s"])}),
    "list of ClassLabel": ({"x": [[0, 1], [1]]}, {"x": sds.Sequence(sds.ClassLabel(names=["n", "p"]))},
                           lambda r: {"x": _floats(r["x"])}),
}


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_map_keeps_int_lists_for_whole_floats_as_hugging_face_does(name, batched):
    data, features, function = CASES[name]
    ours = sds.StableDataset.from_dict(data, features=None if features is None else sds.Features(features))
    theirs = datasets.Dataset.from_dict(data, features=None if features is None else to_hf_features(ours.features))
    if batched:
        def function_of_batches(batch, function=function):
            rows = [function(dict(zip(batch, cells))) for cells in zip(*batch.values())]
            return {k: [row[k] for row in rows] for k in rows[0]}
        mapped, their_mapped = ours.map(function_of_batches, batched=True), theirs.map(function_of_batches,
                                                                                        batched=True)
    else:
        mapped, their_mapped = ours.map(function), theirs.map(function)
    assert mapped.features == from_hf_features(their_mapped.features), name
    assert mapped[:] == their_mapped[:], name


def test_whole_floats_keep_the_column_across_write_batches_and_a_later_fraction_names_its_row():
    """The first rows decide the feature (1,000 rows per write batch, the write path's sample); a fraction in a
    later row is then refused by name, as a string among ints is."""
    ds = sds.StableDataset.from_dict({"x": [[i, i + 1] for i in range(2500)]})
    mapped = ds.map(lambda r: {"x": _floats(r["x"])})
    assert mapped.features == ds.features and mapped["x"][2499] == [2499, 2500]
    assert type(mapped[1234]["x"][0]) is int
    with pytest.raises(sds.errors.ExampleError, match=r"example key 2100, field 'x\[0\]'"):
        ds.map(lambda r: {"x": _plus_half(r["x"]) if r["x"][0] == 2100 else _floats(r["x"])})


@pytest.mark.parametrize(("given", "target", "expected"), [
    (pa.list_(pa.float64()), pa.list_(pa.int64()), True),
    (pa.list_(pa.list_(pa.float64())), pa.list_(pa.list_(pa.int32())), True),
    (pa.list_(pa.float64()), pa.list_(pa.int64(), 2), True),
    (pa.struct([("a", pa.list_(pa.float64())), ("b", pa.string())]),
     pa.struct([("b", pa.string()), ("a", pa.list_(pa.int64()))]), True),
    (pa.list_(pa.int64()), pa.list_(pa.int32()), False),
    (pa.null(), pa.list_(pa.int64()), False),
    (pa.list_(pa.float64()), pa.list_(pa.float32()), None),
    (pa.list_(pa.float64()), pa.list_(pa.string()), None),
    (pa.struct([("a", pa.float64())]), pa.struct([("b", pa.int64())]), None),
    (pa.float64(), pa.list_(pa.int64()), None),
])
def test_ints_as_floats_tells_a_whole_float_column_apart(given, target, expected):
    assert ints_as_floats(given, target) is expected


def test_as_column_type_casts_whole_columns_and_refuses_fractions_nan_and_overflow():
    target = pa.list_(pa.int64())
    assert as_column_type([[1.0, 2.0], None, []], target) == [[1, 2], None, []]
    assert as_column_type([[1, 2]], target) == [[1, 2]]  # nothing to cast: the values themselves
    for bad in ([[1.5]], [[float("nan")]], [[1e20]], [["a"]]):
        assert as_column_type(bad, target) is None
