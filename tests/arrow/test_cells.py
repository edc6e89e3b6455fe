"""List cells are numpy slices of the child array, for whole arrays and slices alike."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from stable_datasets.arrow.cells import cell_getter


@pytest.mark.parametrize("list_type", [pa.list_(pa.int32()), pa.large_list(pa.int32())])
@pytest.mark.parametrize("child_null", [False, True])
def test_list_cells_of_slices_are_numpy_views_of_the_right_values(list_type, child_null):
    rows = [[9, None] if child_null else [9, 8], [], [1, 2, 3], [4], [5, 6]]
    sliced = pa.array(rows, list_type).slice(1, 3)  # the null (if any) is outside the slice
    get = cell_getter(sliced)
    cells = [get(k) for k in range(3)]
    assert all(isinstance(c, np.ndarray) and c.dtype == np.int32 for c in cells)
    assert [c.tolist() for c in cells] == [[], [1, 2, 3], [4]]
