"""features/casting.py: the one whole-column cast. Here: a struct field the target does not name is never
dropped while it holds a value (Arrow's struct cast would drop it silently)."""

from __future__ import annotations

import pyarrow as pa

from stable_datasets.features.casting import dropped_field, safe_cast

TARGET = pa.struct([("a", pa.string())])


def test_a_field_holding_a_value_is_named_and_the_cast_refused():
    column = pa.chunked_array([pa.array([{"a": "x", "extra": None}, {"a": "y", "extra": 2}])])
    assert dropped_field(column, TARGET) == "extra"
    cast, problem = safe_cast(column, TARGET)
    assert cast is None and problem == "field 'extra' holds values and is not in the features"


def test_a_field_null_wherever_it_appears_drops_nothing_and_casts():
    column = pa.array([{"a": "x", "extra": None}, None])
    cast, problem = safe_cast(column, TARGET)
    assert problem is None and cast.to_pylist() == [{"a": "x"}, None]


def test_a_value_under_a_null_parent_or_outside_a_slice_is_not_counted():
    column = pa.StructArray.from_arrays([pa.array(["x", "y"]), pa.array([None, 5])], names=["a", "extra"],
                                        mask=pa.array([False, True]))
    assert dropped_field(column, TARGET) is None
    plain = pa.array([{"a": "x", "extra": None}, {"a": "y", "extra": 5}])
    assert dropped_field(plain.slice(0, 1), TARGET) is None
    assert dropped_field(plain.slice(1, 1), TARGET) == "extra"


def test_fields_inside_lists_and_nested_structs_are_named_by_their_path():
    deep = pa.array([{"s": [{"a": "x", "b": {"c": 1, "d": 2}}]}])
    target = pa.struct([("s", pa.list_(pa.struct([("a", pa.string()), ("b", pa.struct([("c", pa.int64())]))])))])
    assert dropped_field(deep, target) == "s/b/d"
    assert dropped_field(pa.array([[1, 2]]), pa.list_(pa.int32())) is None
