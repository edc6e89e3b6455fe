"""`map` in parallel parts: random numbers are not repeated across parts, and a seed makes them reproducible."""

from __future__ import annotations

import random

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError

ROWS = 4000


def _draw(row):
    return {"np": int(np.random.randint(0, 2**62)), "py": random.getrandbits(62)}


def _draw_torch(row):
    import torch

    return {"t": int(torch.randint(0, 2**62, (1,)).item())}


@pytest.fixture
def rows():
    return sds.StableDataset.from_dict({"i": list(range(ROWS))})


def test_parallel_parts_draw_distinct_random_numbers(rows):
    """Before: the forked parts inherited numpy's state: row i equal to row i + 2000 (2,000 distinct of 4,000)."""
    out = rows.map(_draw, num_proc=2, load_from_cache_file=False)
    assert len(set(out["np"])) == ROWS and len(set(out["py"])) == ROWS


def test_parallel_parts_draw_distinct_torch_numbers(rows):
    pytest.importorskip("torch")
    out = rows.map(_draw_torch, num_proc=2, load_from_cache_file=False)
    assert len(set(out["t"])) == ROWS


def test_a_seeded_map_gives_the_same_rows_with_any_num_proc(rows):
    one = rows.map(_draw, seed=7)
    two = rows.map(_draw, seed=7, num_proc=2)
    three = rows.map(_draw, seed=7, num_proc=3, batched=False)
    assert one["np"] == two["np"] == three["np"] and one["py"] == two["py"] == three["py"]
    assert len(set(one["np"])) == ROWS
    assert rows.map(_draw, seed=8)["np"] != one["np"]
    with pytest.raises(ValueError, match=r"^map: seed must be a non-negative int or None, got -1$"):
        rows.map(_draw, seed=-1)


def test_a_new_column_whose_first_results_are_none_takes_the_type_of_later_ones():
    """Before: 15,000 None results of 20,000 made 'cannot infer the type of new column'."""
    rows = sds.StableDataset.from_dict({"i": list(range(20_000))})
    out = rows.map(lambda r: {"v": None if r["i"] < 15_000 else r["i"] * 1.5})
    assert out.features["v"] == sds.Value("float64")
    assert out["v"][14_999] is None and out["v"][15_000] == 22_500.0 and out[19_999]["v"] == 29_998.5
    with pytest.raises(StableDatasetsError,
                       match=r"^map: new column 'w' is None in all of the first 20000 rows, so its type cannot be "
                             r"inferred; pass features= naming its type$"):
        rows.map(lambda r: {"w": None})
