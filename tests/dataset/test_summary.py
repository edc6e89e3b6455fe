"""describe(): bounded column statistics."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.dataset.summary import column_stats, histogram, sample_positions


def test_sample_positions_are_all_rows_or_an_even_spread():
    assert sample_positions(5, 10).tolist() == [0, 1, 2, 3, 4]
    assert sample_positions(100_000_000, 5).tolist() == [0, 25000000, 50000000, 74999999, 99999999]
    assert len(sample_positions(100_000_000, 10_000)) == 10_000
    with pytest.raises(ValueError, match="sample_size must be at least 1, got 0"):
        sample_positions(3, 0)


def test_histogram_counts():
    assert histogram(np.array([0, 1, 1, 2]), bins=2) == {"counts": [1, 3], "edges": [0.0, 1.0, 2.0]}
    assert histogram(np.array([5.0, 5.0])) == {"counts": [2], "edges": [5.0, 5.0]}
    assert histogram(np.array([], dtype=np.int64)) == {"counts": [], "edges": []}


def test_column_stats_by_kind():
    numbers = column_stats(pa.array([1, 2, None, 4]), sds.Value("int64"))
    assert {k: numbers[k] for k in ("nulls", "count", "kind", "min", "max")} == {
        "nulls": 1, "count": 4, "kind": "numeric", "min": 1, "max": 4}
    assert numbers["mean"] == pytest.approx(7 / 3) and sum(numbers["histogram"]["counts"]) == 3
    labels = column_stats(pa.array([0, 1, 1, None]), sds.ClassLabel(names=["cat", "dog"]))
    assert labels["counts"] == [["dog", 2], ["cat", 1]] and labels["nulls"] == 1
    text = column_stats(pa.array(["ab", "abcd", None]), sds.Value("string"))
    assert (text["kind"], text["min_length"], text["max_length"]) == ("text", 2, 4)
    seqs = column_stats(pa.array([[1, 2, 3], [], [4]]), sds.Sequence(sds.Value("int64")))
    assert (seqs["kind"], seqs["min_length"], seqs["max_length"]) == ("sequence", 0, 3)
    flags = column_stats(pa.array([True, False, True]), sds.Value("bool"))
    assert flags["counts"] == [["True", 2], ["False", 1]]
    assert column_stats(pa.array([b"x", None]), sds.Image())["kind"] == "media"


def test_describe_reads_a_bounded_sample():
    ds = sds.StableDataset.from_dict({"x": list(range(1000)), "name": [f"n{i}" for i in range(1000)]})
    whole = ds.describe()
    assert (whole.num_rows, whole.sample_size, whole.sampled) == (1000, 1000, False)
    assert whole.columns["x"]["min"] == 0 and whole.columns["x"]["max"] == 999
    part = ds.describe(sample_size=10)
    assert (part.sample_size, part.sampled) == (10, True)
    assert part.columns["x"]["min"] == 0 and part.columns["x"]["max"] == 999  # the spread reaches both ends
    text = str(part)
    assert text.splitlines()[0] == "statistics of a sample of 10 of 1,000 rows"
    assert "x       numeric  0      min 0  max 999" in text
    assert "a sample of 10 of 1,000 rows" in part._repr_html_()
    # describe of a selection follows the selection
    assert ds.select(range(500, 510)).describe().columns["x"]["min"] == 500
