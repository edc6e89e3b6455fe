"""`Sequence(Value)` columns decode to Python lists in one Arrow call, equal to the cell-by-cell decode."""

from __future__ import annotations

import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.features.base import FeatureType


@pytest.mark.parametrize("dtype,values", [
    ("int64", [[1, 2, 3], [], None, [4], [None, 5]]),
    ("float32", [[0.5, 1.5], None, [], [2.0]]),
    ("string", [["a", "bc"], [], None, ["", "d"]]),
    ("bool", [[True, False], None, [False]]),
])
def test_a_list_of_values_decodes_like_cell_by_cell(dtype, values):
    feature = sds.Sequence(sds.Value(dtype))
    array = pa.array(values, feature.arrow_type())
    whole = feature.decode_array(array)
    assert whole == FeatureType.decode_array(feature, array) == values  # the per-cell path of the base class
    assert all(type(row) is list for row in whole if row is not None)
