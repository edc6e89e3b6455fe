"""Random nested features and random rows round-trip through every layout unchanged."""

from __future__ import annotations

import math
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from tests.fixtures.rows_builder import rows_builder

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def scalar_cases():
    ints = [st.tuples(st.just(sds.Value(d)), st.integers(int(np.iinfo(d).min), int(np.iinfo(d).max)))
            for d in INT_TYPES]
    return st.one_of(
        *ints,
        st.tuples(st.just(sds.Value("bool")), st.booleans()),
        st.tuples(st.just(sds.Value("float64")), st.floats(allow_nan=False)),
        st.tuples(st.just(sds.Value("float32")), st.floats(width=32, allow_nan=False)),
        st.tuples(st.just(sds.Value("string")), st.text(max_size=30)),
        st.tuples(st.just(sds.Value("binary")), st.one_of(st.binary(max_size=40),
                                                          st.binary(min_size=200_000, max_size=300_000))),
        st.tuples(st.just(sds.ClassLabel(names=["a", "b", "c"])), st.integers(0, 2)),
    )


@st.composite
def feature_and_values(draw, depth=0):
    """(feature, strategy of values for it): nested structs, lists and arrays of scalars."""
    kind = draw(st.sampled_from(["scalar", "scalar", "list", "struct", "array"] if depth < 2 else ["scalar"]))
    if kind == "scalar":
        feature, _ = draw(scalar_cases())
        values = {  # rebuild the value strategy for the drawn feature
            "Value": None, "ClassLabel": st.integers(0, 2)}.get(type(feature).__name__)
        if values is None:
            values = _value_strategy(feature)
        return feature, st.one_of(values, values, values, st.none())  # nulls sometimes, not half the time
    if kind == "array":
        shape = draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
        dtype = draw(st.sampled_from(["float32", "int16", "uint8"]))
        elements = st.integers(0, 200) if dtype != "float32" else st.floats(-1e6, 1e6, width=32)
        values = st.lists(elements, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]).map(
            lambda v, s=shape, d=dtype: np.asarray(v, dtype=d).reshape(s))
        return sds.Array2D(shape, dtype), values
    if kind == "list":
        inner, inner_values = draw(feature_and_values(depth + 1))
        return sds.Sequence(inner), st.one_of(st.lists(inner_values, max_size=4), st.lists(inner_values, max_size=4),
                                              st.none())
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=3, unique=True))
    parts = [draw(feature_and_values(depth + 1)) for _ in names]
    feature = sds.Features({n: f for n, (f, _) in zip(names, parts)})
    return feature, st.fixed_dictionaries({n: v for n, (_, v) in zip(names, parts)})


def _value_strategy(feature):
    dtype = feature.dtype
    if dtype in INT_TYPES:
        return st.integers(int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    return {"bool": st.booleans(), "float64": st.floats(allow_nan=False),
            "float32": st.floats(width=32, allow_nan=False), "string": st.text(max_size=30),
            "binary": st.one_of(st.binary(max_size=40), st.binary(min_size=200_000, max_size=300_000))}[dtype]


@st.composite
def datasets(draw):
    names = draw(st.lists(st.text("xyzuvw", min_size=1, max_size=3), min_size=1, max_size=3, unique=True))
    parts = [draw(feature_and_values()) for _ in names]
    features = sds.Features({n: f for n, (f, _) in zip(names, parts)})
    rows = draw(st.lists(st.fixed_dictionaries({n: v for n, (_, v) in zip(names, parts)}), max_size=6))
    return features, rows


def same(expected, actual) -> bool:
    if expected is None or actual is None:
        return expected is actual
    if isinstance(expected, np.ndarray):
        return isinstance(actual, np.ndarray) and expected.shape == actual.shape and np.array_equal(expected, actual)
    if isinstance(expected, dict):
        return expected.keys() == actual.keys() and all(same(expected[k], actual[k]) for k in expected)
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(same(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, float):
        return expected == actual or (math.isinf(expected) and expected == actual)
    return expected == actual and type(expected) is type(actual)


@pytest.mark.parametrize("storage_format", ["arrow", "lance", "parquet"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=datasets())
def test_random_features_and_rows_round_trip(storage_format, case):
    features, rows = case

    Generated = rows_builder(features, rows)
    with tempfile.TemporaryDirectory() as cache:
        ds = sds.load_dataset(Generated, split="train", storage_format=storage_format, cache_dir=cache)
        assert len(ds) == len(rows)
        assert sds.Features.from_dict(ds.features.to_dict()) == features
        for index, row in enumerate(rows):
            assert same(row, ds[index]), (index, row, ds[index])
        assert all(same(r, got) for r, got in zip(rows, ds))  # iteration path too
