"""StableDataset slicing reads only the rows asked for."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds


@pytest.mark.scale
def test_a_slice_of_a_large_dataset_allocates_nothing_per_row():
    n = 2_000_000
    ds = sds.StableDataset.from_arrow(pa.table({"x": np.arange(n)}))
    ds[n - 20:n]  # warm
    tracemalloc.start()
    try:
        page = ds[n - 20:n]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page["x"] == list(range(n - 20, n))
    assert peak < 1_000_000  # an index of every row would be 16 MB


def test_slices_with_steps_and_negatives():
    ds = sds.StableDataset.from_dict({"x": list(range(10))})
    assert ds[::-1]["x"] == list(range(9, -1, -1))
    assert ds[-3:]["x"] == [7, 8, 9]
    assert ds[1:8:3]["x"] == [1, 4, 7]
    assert ds[5:2]["x"] == [] and ds[20:]["x"] == []
    assert ds.shuffle(seed=0)[2:4]["x"] == ds.shuffle(seed=0)["x"][2:4]


def test_to_iterable_names_the_options_of_the_stream_it_makes():
    """`to_iterable()` spells out StreamingDataset's options (names, defaults) instead of relaying `**options`: a
    misspelt option is a TypeError naming it, and an option added to the stream must be added here too."""
    import inspect

    from stable_datasets.streaming.iterable import StreamingDataset

    ours = inspect.signature(sds.StableDataset.to_iterable).parameters
    theirs = inspect.signature(StreamingDataset.__init__).parameters
    assert [(p.name, p.default) for p in ours.values() if p.name != "self"] == \
        [(p.name, p.default) for p in theirs.values() if p.name not in ("self", "dataset")]
    ds = sds.StableDataset.from_dict({"x": list(range(10))})
    with pytest.raises(TypeError, match="unexpected keyword argument 'suffle'"):
        ds.to_iterable(suffle=True)
    stream = ds.to_iterable(rows=(2, 6), max_block_rows=3)
    assert [row["x"] for row in stream] == [2, 3, 4, 5]
