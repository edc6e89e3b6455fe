"""ClassLabel's "no label" id: -1 is accepted, as Hugging Face's ClassLabel accepts it (STL-10's unlabeled split),
row by row and column by column; -2 and num_classes are still errors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel
from stable_datasets.features.columnar import encode_column


def test_minus_one_is_no_label_and_other_ids_out_of_range_are_errors():
    label = ClassLabel(names=["a", "b"])
    assert label.encode(-1, "label") == -1
    assert label.encode(1, "label") == 1
    with pytest.raises(StableDatasetsError, match=r"label -2 is out of range \[0, 2\)"):
        label.encode(-2, "label")
    with pytest.raises(StableDatasetsError, match=r"label 2 is out of range"):
        label.encode(2, "label")


def test_a_column_with_minus_one_encodes_as_a_whole():
    label = ClassLabel(names=["a", "b"])
    assert encode_column(label, pa.array([0, -1, 1]), "label").to_pylist() == [0, -1, 1]
    with pytest.raises(StableDatasetsError, match="-2"):
        encode_column(label, pa.array([0, -2]), "label")
