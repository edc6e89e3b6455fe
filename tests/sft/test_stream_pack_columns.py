"""pack_stream's columnar read (token columns as numpy, all packs of a read laid out at once) gives exactly the
packs of the row-by-row read (forced here by a map, which needs Python rows) and of `pack_row`."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.sft import pack_stream
from stable_datasets.sft.pack import pack_row

pytest.importorskip("torch")


def tokenized(rows: int, seed: int, with_mask: bool = True) -> sds.StableDataset:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 40, rows)
    columns = {"input_ids": [rng.integers(3, 1000, n).tolist() for n in lengths]}
    if with_mask:
        columns["loss_mask"] = [rng.integers(0, 2, n).tolist() for n in lengths]
    return sds.StableDataset.from_dict(columns)


def same(first, second) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert sorted(a) == sorted(b) == ["input_ids", "loss_mask", "seq_start_id"]
        for name in a:
            assert np.asarray(a[name]).dtype == np.asarray(b[name]).dtype, name
            assert np.asarray(a[name]).tolist() == np.asarray(b[name]).tolist(), name


@pytest.mark.parametrize("options", [
    {"pack_size": 48, "algorithm": "first_fit_shuffle"},
    {"pack_size": 30, "algorithm": "first_fit_decreasing", "overlong": "truncate"},
    {"pack_size": 64, "algorithm": "best_fit_decreasing", "pad_seq_to_mult": 4, "pad_id": 2},
])
@pytest.mark.parametrize("with_mask", [True, False])
@pytest.mark.parametrize("shuffled", [False, True])
def test_the_columnar_read_equals_the_row_by_row_read(options, with_mask, shuffled):
    ds = tokenized(300, 1, with_mask)
    rows = ds.to_iterable()
    if shuffled:
        rows = rows.shuffle(seed=3, buffer_size=64)
    fast = list(pack_stream(rows, lookahead=50, seed=5, **options))
    slow = list(pack_stream(rows.map(lambda row: row), lookahead=50, seed=5, **options))
    same(fast, slow)
    assert len(fast) > 10


def test_pack_row_shifts_each_sequences_mask_and_ends_it_with_zero():
    ids = [np.array([5, 6, 7], np.int32), np.array([8, 9], np.int32), np.array([4], np.int32)]
    masks = [np.array([1, 1, 0], np.int8), np.array([0, 1], np.int8), np.array([1], np.int8)]
    pack = pack_row(list(zip(ids, masks)), limit=10)
    assert pack["input_ids"].tolist() == [5, 6, 7, 8, 9, 4] and pack["input_ids"].dtype == np.int32
    assert pack["loss_mask"].tolist() == [1, 0, 0, 1, 0, 0] and pack["loss_mask"].dtype == np.int8
    assert pack["seq_start_id"].tolist() == [0, 3, 5] and pack["seq_start_id"].dtype == np.int32
    cut = pack_row(list(zip(ids, masks)), limit=2)
    assert cut["input_ids"].tolist() == [5, 6, 8, 9, 4] and cut["loss_mask"].tolist() == [1, 0, 1, 0, 0]
