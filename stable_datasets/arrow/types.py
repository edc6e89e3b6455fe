"""Arrow type predicates shared by features and datasets, so that one question has one answer."""

from __future__ import annotations

import pyarrow as pa


def is_list_type(arrow_type: pa.DataType) -> bool:
    """Whether `arrow_type` is a list of any of Arrow's three kinds (list, large_list, fixed_size_list): the kinds
    a `Sequence` feature is stored as, or that a foreign table may bring for one."""
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)
