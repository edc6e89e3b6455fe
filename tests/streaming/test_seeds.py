"""One rule for seeds: the eager, lazy (keyed) and stream shuffles, and mixes, accept the same seeds and refuse
the others with the same one-line SeedError (`streaming.seeds.check_seed`)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import SeedError

ROWS = 50


@pytest.fixture
def data():
    return sds.StableDataset.from_dict({"idx": list(range(ROWS))})


def shuffles(data):
    """Each shuffle taking a seed, as a function of the seed."""
    pytest.importorskip("torch")
    from stable_datasets.streaming import StreamingDataset

    return {
        "eager": lambda seed: data.shuffle(seed=seed, lazy=False),
        "lazy": lambda seed: data.shuffle(seed=seed, lazy=True),
        "stream": lambda seed: data.to_iterable().shuffle(seed=seed),
        "stream (constructor)": lambda seed: StreamingDataset(data, shuffle=True, seed=seed),
        "mix": lambda seed: sds.interleave_datasets([data, data], probabilities=[0.5, 0.5], seed=seed),
    }


REFUSED = [(-1, "-1 (int)"), (2**63, "9223372036854775808 (int)"), (2**64, "18446744073709551616 (int)"),
           (1.5, "1.5 (float)"), (2.0, "2.0 (float)"), ("3", "'3' (str)"), (True, "True (bool)"),
           (np.float64(4), f"{np.float64(4)!r} (float64)"), ([1, 2], "[1, 2] (list)")]


@pytest.mark.parametrize("seed, shown", REFUSED, ids=[repr(s) for s, _ in REFUSED])
def test_every_shuffle_refuses_the_same_seeds_with_the_same_error(data, seed, shown):
    """Before: the eager shuffle raised numpy's TypeError for 1.5 and ValueError for -1, the lazy one took
    int(seed) % 2**63 (so -1, 1.5, '3' and 2**63 were silently other seeds), the stream raised OverflowError
    for 2**63 when it first read, and a mix took any int."""
    for name, shuffle in shuffles(data).items():
        what = "interleave_datasets" if name == "mix" else "shuffle"
        expected = rf"^{what}: seed must be an int in \[0, 2\*\*63\), got {re.escape(shown)}$"
        with pytest.raises(SeedError, match=expected):
            shuffle(seed)


@pytest.mark.parametrize("seed", [0, 7, np.int64(7), 2**63 - 1])
def test_every_shuffle_accepts_the_same_seeds(data, seed):
    for name, shuffle in shuffles(data).items():
        made = shuffle(seed)
        rows = sorted(int(row["idx"]) for row in made)
        assert rows == list(range(ROWS)) if name != "mix" else set(rows) == set(range(ROWS)), name
    eager = [int(i) for i in data.shuffle(seed=seed, lazy=False)["idx"]]
    assert eager == np.random.default_rng(int(seed)).permutation(ROWS).tolist()  # Hugging Face's order
