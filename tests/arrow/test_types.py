"""`is_list_type`: the one answer to "is this Arrow type a list" (list, large_list, fixed_size_list)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from stable_datasets.arrow.types import is_list_type


@pytest.mark.parametrize(("arrow_type", "expected"), [
    (pa.list_(pa.int64()), True),
    (pa.large_list(pa.string()), True),
    (pa.list_(pa.float32(), 3), True),
    (pa.list_(pa.list_(pa.int8())), True),
    (pa.struct([("a", pa.list_(pa.int64()))]), False),
    (pa.map_(pa.string(), pa.int64()), False),
    (pa.int64(), False),
    (pa.binary(), False),
    (pa.large_string(), False),
])
def test_is_list_type_answers_for_the_three_list_kinds_only(arrow_type, expected):
    assert is_list_type(arrow_type) is expected
