"""The streaming ARFF reader gives what scipy.io.arff gives, a block at a time."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.io.arff

from stable_datasets.catalog.formats.arff import iter_arff
from stable_datasets.errors import StableDatasetsError
from tests.fixtures.arff import arff_bytes


def test_blocks_equal_scipy_and_classes_are_declared_in_order():
    rng = np.random.default_rng(0)
    series = rng.normal(size=(7, 5)).astype(np.float64)
    series[2, 3] = np.nan  # written as '?'
    labels = ["b", "a", "c", "a", "b", "b", "c"]
    data = arff_bytes("Demo", series, labels, ["c", "a", "b"])
    header, blocks = iter_arff(io.BytesIO(data), block_rows=3)
    got = list(blocks)
    assert [len(b[1]) for b in got] == [3, 3, 1]
    values = np.concatenate([b[0] for b in got])
    records, meta = scipy.io.arff.loadarff(io.StringIO(data.decode()))
    expected = np.stack([records[n] for n in meta.names()[:-1]], axis=1).astype(np.float32)
    assert values.dtype == np.float32
    np.testing.assert_array_equal(values, expected)
    assert [lab for b in got for lab in b[1]] == labels
    assert header.names == [f"att{i}" for i in range(1, 6)] + ["target"]
    assert header.class_values == ["c", "a", "b"] == list(meta["target"][1])


def test_string_class_has_no_declared_values_and_bad_rows_are_named():
    header, blocks = iter_arff(io.BytesIO(arff_bytes("S", np.ones((1, 2)), ["x"], None)), where="s.arff")
    assert header.class_values is None and next(blocks)[1] == ["x"]
    short = b"@relation r\n@attribute a numeric\n@attribute b numeric\n@attribute c {x}\n@data\n1,x\n"
    with pytest.raises(StableDatasetsError, match=r"^t\.arff: a data line has 1 values before its class, expected 2"):
        list(iter_arff(io.BytesIO(short), where="t.arff")[1])
    with pytest.raises(StableDatasetsError, match=r"^u\.arff: no @data section"):
        iter_arff(io.BytesIO(b"@relation r\n@attribute a numeric\n"), where="u.arff")
