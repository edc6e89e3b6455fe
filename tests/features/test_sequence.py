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


def test_a_2d_array_for_a_list_of_numeric_lists_goes_to_arrow_whole():
    import numpy as np

    from stable_datasets.features.encoder import BatchEncoder

    features = sds.Features({"series": sds.Sequence(sds.Sequence(sds.Value("float32")))})
    clips = [np.arange(12, dtype=np.int16).reshape(6, 2), np.full((3, 1), 0.5), np.zeros((0, 4), np.float32)]
    encoder = BatchEncoder(features)
    for clip in clips:
        encoder.add({"series": clip})
    assert encoder._bytes == 6 * 2 * 4 + 3 * 4  # cast to float32; counted towards the batch's size
    batch = encoder.flush()
    assert batch.column(0).to_pylist() == [clip.astype(np.float32).tolist() for clip in clips]
    assert batch.column(0).type == features["series"].arrow_type()
    mixed = features["series"].to_arrow([clips[0], None, [[1.0], [2.0, 3.0]]])  # arrays beside lists and nulls
    assert mixed.to_pylist() == [clips[0].astype(np.float32).tolist(), None, [[1.0], [2.0, 3.0]]]


def test_a_large_2d_array_fills_a_batch_by_its_bytes():
    import numpy as np

    from stable_datasets.features.encoder import BatchEncoder

    features = sds.Features({"series": sds.Sequence(sds.Sequence(sds.Value("float32")))})
    encoder = BatchEncoder(features, batch_rows=1000, batch_bytes=1 << 20)
    encoder.add({"series": np.zeros((300_000, 1), np.float32)})  # 1.2 MB
    assert encoder.full


def test_a_2d_array_is_checked_like_a_list_of_lists():
    import numpy as np

    from stable_datasets.errors import EncodingError

    rows = sds.Sequence(sds.Sequence(sds.Value("int16"), length=2))
    with pytest.raises(EncodingError, match=r"'s\[0\]': expected a list of length 2, got length 3"):
        rows.encode_rows(np.zeros((4, 3), np.int16), "s")
    with pytest.raises(EncodingError, match=r"'s\[1\]\[0\]': value 40000 does not fit int16"):
        rows.encode_rows(np.array([[1, 2], [40000, 0]], np.int32), "s")
    with pytest.raises(EncodingError, match="cannot store"):
        rows.encode_rows(np.zeros((1, 2), np.complex64), "s")
    assert rows.encode_rows([[1, 2]], "s") == [[1, 2]]  # lists take the usual path


def test_rows_of_numbers_decode_to_a_2d_array_in_numpy_format_and_stay_lists_in_python():
    import numpy as np

    rows = sds.Sequence(sds.Sequence(sds.Value("int16")))
    cells = [[[1, 2], [3, 4]], [[1], [2, 3]], [[1], None], []]
    numpy_cells = [rows.decode(c, numpy=True) for c in cells]
    assert isinstance(numpy_cells[0], np.ndarray) and numpy_cells[0].dtype == np.int16
    np.testing.assert_array_equal(numpy_cells[0], [[1, 2], [3, 4]])  # as Hugging Face's numpy format
    assert [r.tolist() for r in numpy_cells[1]] == [[1], [2, 3]]  # ragged: a list of rows
    assert numpy_cells[2][0].tolist() == [1] and numpy_cells[2][1] is None and numpy_cells[3] == []
    assert [rows.decode(c) for c in cells] == cells
    assert rows.decode(cells[0]) is cells[0]  # Arrow's Python lists are the cell already: no copy per row
