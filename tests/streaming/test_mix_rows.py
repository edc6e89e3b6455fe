"""A mix places each source's rows whole, whatever they are (dicts, tuples, lists, arrays), at the positions
its plan gives them, and the orders it reads are the sources' own."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.streaming.iterable import StreamingDataset

pytest.importorskip("torch")


class Items:
    """A plain map-style dataset whose rows are what `make(i)` returns."""

    def __init__(self, n: int, make):
        self.n, self.make = n, make

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.make(int(i))


@pytest.mark.parametrize("make", [lambda i: (i, f"t{i}"), lambda i: [i, i + 1], lambda i: np.array([i, -i])])
def test_rows_that_are_sequences_stay_whole(make):
    first = StreamingDataset(Items(30, make), shuffle=True, seed=1)
    second = StreamingDataset(Items(20, lambda i: make(1000 + i)), shuffle=True, seed=2)
    mixed = sds.interleave_datasets([first, second], probabilities=[0.5, 0.5], seed=3,
                                    stopping_strategy="all_exhausted")
    rows = list(mixed)
    assert all(type(r) is type(make(0)) and len(r) == 2 for r in rows)
    keys = Counter(int(r[0]) for r in rows)
    assert set(range(30)) <= set(keys) and set(range(1000, 1020)) <= set(keys)
    # each source's rows come in that source's own shuffled order (passes start over)
    own = [int(r[0]) for r in rows if int(r[0]) < 1000]
    order = [int(r[0]) for r in first]
    assert own[:30] == order
