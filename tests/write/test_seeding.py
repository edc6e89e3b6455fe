"""`map` in parallel parts: random numbers are not repeated across parts, and a seed makes them reproducible."""

from __future__ import annotations

import random

import numpy as np
import pytest

import stable_datasets as sds

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
