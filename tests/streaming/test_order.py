"""The lazy epoch order: a permutation of the rows built from blocks, windows of whole blocks, O(blocks) memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.streaming.order import (
    BlockOrder,
    consumed_after,
    rank_indices,
    rows_per_rank,
    worker_indices,
    worker_rows,
)


@st.composite
def layouts(draw):
    sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=30))
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return int(bounds[-1]), bounds


@settings(max_examples=60, deadline=None)
@given(layout=layouts(), seed=st.integers(0, 10**6), window=st.integers(1, 5), epoch=st.integers(0, 3))
def test_an_epoch_is_a_permutation_whose_windows_hold_whole_blocks(layout, seed, window, epoch):
    n, bounds = layout
    order = BlockOrder(n, bounds, seed=seed, window_blocks=window).epoch(epoch)
    positions = order.positions
    assert sorted(positions.tolist()) == list(range(n))
    block_of = np.searchsorted(bounds, positions, side="right") - 1
    windows = order.block_window[block_of]
    assert np.all(np.diff(windows) >= 0)  # windows are read one after another
    for w in np.unique(windows):  # each window is `window` whole blocks (the last may hold fewer)
        blocks = np.unique(block_of[windows == w])
        assert len(blocks) <= window
        assert sum(int(bounds[b + 1] - bounds[b]) for b in blocks) == int((windows == w).sum())
    some = np.array(sorted({0, n - 1, n // 2}))
    assert order.positions_at(some).tolist() == positions[some].tolist()  # any row alone, same answer


def test_the_order_uses_its_own_rng_and_depends_on_seed_and_epoch():
    state = np.random.get_state()
    bounds = np.arange(0, 1001, 100)
    a = BlockOrder(1000, bounds, seed=5, window_blocks=3)
    first = a.epoch(0).positions.tolist()
    assert np.array_equal(np.random.get_state()[1], state[1])
    assert first == BlockOrder(1000, bounds, seed=5, window_blocks=3).epoch(0).positions.tolist()
    assert first != a.epoch(1).positions.tolist()
    assert first != BlockOrder(1000, bounds, seed=6).epoch(0).positions.tolist()
    assert BlockOrder(1000, None, seed=5).epoch(0).positions.tolist() != list(range(1000))  # a full permutation
    assert sorted(BlockOrder(1000, None, seed=5).epoch(0).positions.tolist()) == list(range(1000))
    assert BlockOrder(1000, bounds, shuffle=False).epoch(4).positions.tolist() == list(range(1000))


def test_a_billion_row_epoch_costs_blocks_not_rows():
    rows, block = 10**9, 8192
    bounds = np.append(np.arange(0, rows, block, dtype=np.int64), rows)
    tracemalloc.start()
    try:
        order = BlockOrder(rows, bounds, seed=1, window_blocks=8).epoch(0)
        head = order.positions_at(np.arange(1024))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20  # arrays over the 122,071 blocks, never over the rows
    assert len(set(head.tolist())) == 1024 and ((head >= 0) & (head < rows)).all()
    blocks = np.unique(np.searchsorted(bounds, head, side="right") - 1)
    assert len(blocks) <= 8  # the first rows come from the first window's blocks


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 300), start_frac=st.floats(0, 1), world=st.integers(1, 7), drop_last=st.booleans())
def test_rank_sequences_stripe_the_rest_of_the_epoch(n, start_frac, world, drop_last):
    start = int(start_frac * n)
    per_rank = rows_per_rank(n, world, drop_last, start)
    served = [rank_indices(np.arange(per_rank), start, r, world, n).tolist() for r in range(world)]
    flat = sorted(sum(served, []))
    if drop_last:
        assert flat == list(range(start, start + world * per_rank))
    else:
        padding = [g % n for g in range(n, start + world * per_rank)]  # wraps to the start of the order
        assert flat == sorted(list(range(start, n)) + padding) and len(padding) < world
    for rows in range(per_rank + 1):  # every rank at `rows`: the rows before the position were all served
        position = consumed_after(n, start, world, rows)
        assert {i for s in served for i in s[:rows] if i >= start} == set(range(start, position))


@settings(max_examples=80, deadline=None)
@given(count=st.integers(0, 200), unit=st.integers(1, 9), workers=st.integers(1, 5))
def test_workers_are_dealt_units_in_the_order_a_dataloader_returns_them(count, unit, workers):
    shares = [worker_indices(np.arange(worker_rows(count, unit, w, workers)), unit, w, workers).tolist()
              for w in range(workers)]
    assert sorted(sum(shares, [])) == list(range(count))
    batches = [[s[i:i + unit] for i in range(0, len(s), unit)] for s in shares]
    returned = [b for k in range(max(map(len, batches))) for b in
                (batches[w][k] for w in range(workers) if k < len(batches[w]))]  # round robin, as a DataLoader
    assert sum(returned, []) == list(range(count))
