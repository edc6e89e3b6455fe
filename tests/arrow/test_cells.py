"""List cells are numpy slices of the child array, for whole arrays and slices alike."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from stable_datasets.arrow.cells import cell_getter
from tests.fixtures.rows_builder import rows_builder


@pytest.mark.parametrize("list_type", [pa.list_(pa.int32()), pa.large_list(pa.int32())])
@pytest.mark.parametrize("child_null", [False, True])
def test_list_cells_of_slices_are_numpy_views_of_the_right_values(list_type, child_null):
    rows = [[9, None] if child_null else [9, 8], [], [1, 2, 3], [4], [5, 6]]
    sliced = pa.array(rows, list_type).slice(1, 3)  # the null (if any) is outside the slice
    get = cell_getter(sliced)
    cells = [get(k) for k in range(3)]
    assert all(isinstance(c, np.ndarray) and c.dtype == np.int32 for c in cells)
    assert [c.tolist() for c in cells] == [[], [1, 2, 3], [4]]


def test_rows_of_numbers_are_one_view_per_cell():
    """list<list<number>> (an audio clip's [T, C]): a rectangular cell is one 2-d view, a ragged one 1-d views."""
    import pyarrow as pa

    from stable_datasets.arrow.cells import cell_getter

    array = pa.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0], [8.0, 9.0]], []],
                     type=pa.list_(pa.list_(pa.float32())))
    get = cell_getter(array.slice(0, 3))
    assert get(0).shape == (3, 2) and get(0).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert [v.tolist() for v in get(1)] == [[7.0], [8.0, 9.0]]
    assert get(2) == []
    assert cell_getter(array.slice(1, 1))(0)[1].tolist() == [8.0, 9.0]  # a slice's offsets index the whole child


def test_a_time_series_cell_reads_as_python_lists_or_one_array():
    import numpy as np

    import stable_datasets as sds

    clip = np.arange(12, dtype=np.float32).reshape(6, 2)
    series = sds.Sequence(sds.Sequence(sds.Value("float32")))
    ds = sds.StableDataset.from_dict({"series": [clip, clip[:3, :1]]}, features=sds.Features({"series": series}))
    assert ds[0]["series"] == clip.tolist()  # python format: nested lists, as Hugging Face's
    numpy = ds.with_format("numpy")
    assert numpy[0]["series"].shape == (6, 2) and numpy[0]["series"].dtype == np.float32
    np.testing.assert_array_equal(numpy[1]["series"], clip[:3, :1])
    batch = numpy[0:2]["series"]
    np.testing.assert_array_equal(batch[0], clip)
    np.testing.assert_array_equal(batch[1], clip[:3, :1])


@pytest.mark.parametrize("storage_format", ["arrow", "lance", "parquet"])
def test_ragged_rows_of_numbers_read_as_python_ints_in_python_format(tmp_path, storage_format):
    """A ragged list<list<int>> cell comes from the getter as 1-d views; Python format gives plain ints (the
    round-trip property found `[[], [0]]` coming back as numpy arrays of np.int8)."""
    import stable_datasets as sds

    features = sds.Features({"uu": sds.Sequence(sds.Sequence(sds.Value("int8")))})
    rows = [{"uu": [[], [0]]}, {"uu": [[1, 2], [3]]}, {"uu": [[4], [5]]}]

    Ragged = rows_builder(features, rows)
    ds = sds.load_dataset(Ragged, split="train", storage_format=storage_format, cache_dir=str(tmp_path))
    got = [ds[k]["uu"] for k in range(3)]
    assert got == [[[], [0]], [[1, 2], [3]], [[4], [5]]]
    assert all(type(v) is int for cell in got for row in cell for v in row)
