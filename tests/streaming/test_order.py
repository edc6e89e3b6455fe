"""The lazy epoch order: a permutation of the rows built from blocks, windows of whole blocks, O(blocks) memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.streaming.order import (
    BlockOrder,
    Lanes,
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


def consumer_indices(n, start, rank, world, worker, workers, unit, drop_last, rows=None):
    """Global positions consumer (rank, worker) serves in a pass from `start` (its first `rows`), as the stream
    deals them: rank stripes, then units of the rank sequence to workers in turn."""
    count = worker_rows(rows_per_rank(n, world, drop_last, start), unit, worker, workers)
    k = np.arange(count if rows is None else min(rows, count))
    return rank_indices(worker_indices(k, unit, worker, workers), start, rank, world, n)


@settings(max_examples=120, deadline=None)
@given(n=st.integers(0, 400), world=st.integers(1, 6), workers=st.integers(1, 4), unit=st.integers(1, 7),
       drop_last=st.booleans())
def test_lanes_give_each_consumer_one_contiguous_stretch_of_the_order(n, world, workers, unit, drop_last):
    lanes = Lanes(world, workers, unit)
    assert sorted(lanes.to_order(np.arange(n), n, drop_last).tolist()) == list(range(n))  # a permutation
    bounds = lanes.lane_bounds(n, drop_last)
    served = n if not drop_last else world * (n // world)
    assert bounds[0] == 0 and bounds[-1] == served and np.all(np.diff(bounds) >= 0)
    for rank in range(world):
        for worker in range(workers):
            g = consumer_indices(n, 0, rank, world, worker, workers, unit, drop_last)
            lane = rank * workers + worker
            real = g[: bounds[lane + 1] - bounds[lane]]  # its real rows come first, then padding (if any)
            assert lanes.to_order(real, n, drop_last).tolist() == list(range(bounds[lane], bounds[lane + 1]))
            assert len(g) - len(real) <= 1  # at most one row of padding per consumer
    if drop_last:  # the dropped tail keeps its place at the end of the order
        assert lanes.to_order(np.arange(served, n), n, True).tolist() == list(range(served, n))


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 300), first=st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 6)),
       second=st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 6)), stop=st.floats(0, 1),
       drop_last=st.booleans())
def test_a_resume_on_another_topology_serves_the_rest_of_the_saved_lanes(n, first, second, stop, drop_last):
    """(N, V, u) serves a prefix of G_{N,V,u} (the rows the loop received: a prefix of each rank's sequence);
    (M, V', u') resumes, striping the rest of the same G: every row of the epoch once (plus padding)."""
    (world, workers, unit), (world2, workers2, unit2) = first, second
    lanes = Lanes(world, workers, unit)
    steps = int(stop * rows_per_rank(n, world, drop_last))
    if drop_last and 0 < n - consumed_after(n, 0, world, steps) < world2:
        return  # refused by the stream (drop_last would drop every row left)
    served = [lanes.to_order(rank_indices(np.arange(steps), 0, r, world, n), n, drop_last) for r in range(world)]
    start = consumed_after(n, 0, world, steps)
    served += [lanes.to_order(consumer_indices(n, start, r, world2, w, workers2, unit2, drop_last), n, drop_last)
               for r in range(world2) for w in range(workers2)]
    counts = np.bincount(np.concatenate(served).astype(np.int64), minlength=n)
    if drop_last:
        assert counts.max() <= 1 and n - counts.sum() < max(world, world2)
    else:
        padded_by = world2 if rows_per_rank(n, world2, False, start) else world  # the topology of the last step
        assert counts.min() >= 1 and counts.sum() - n < padded_by  # every row, plus the padding of the last step


def test_lanes_of_a_billion_rows_cost_nothing_per_row():
    lanes = Lanes(64, 8, 32)
    tracemalloc.start()
    try:
        head = lanes.to_order(consumer_indices(10**9, 0, 63, 64, 7, 8, 32, False, rows=1024), 10**9, False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    start = int(lanes.lane_bounds(10**9, False)[-2])  # the last consumer's lane
    assert head.tolist() == list(range(start, start + 1024))
    with pytest.raises(ValueError, match="lanes: workers must be a positive int, got 0"):
        Lanes(2, 0, 4)
