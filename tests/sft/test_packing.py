"""Megatron-Bridge's object packing: `first_fit` / `first_fit_decreasing` with `item_lengths=` (issue 25 item 5).

Inputs and expected bins are those of Megatron-Bridge's tests/unit_tests/data/packing/test_algorithms.py
(TestFirstFitItemLengths, TestFirstFitDecreasingItemLengths), including its linear-scan reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.sft import first_fit, first_fit_decreasing, pack_indices


def _linear_first_fit(lengths, pack_size, order):
    """The O(n^2) first fit Megatron-Bridge's tests compare against, keeping item indices."""
    bins, sums = [], []
    for item in order:
        for b, total in enumerate(sums):
            if total + lengths[item] <= pack_size:
                bins[b].append(item)
                sums[b] += lengths[item]
                break
        else:
            bins.append([item])
            sums.append(lengths[item])
    return bins


def _decreasing(lengths):
    return sorted(range(len(lengths)), key=lengths.__getitem__, reverse=True)


def _indices(bins, items):
    where = {id(item): i for i, item in enumerate(items)}
    return [[where[id(item)] for item in b] for b in bins]


def test_first_fit_packs_objects_and_returns_them():
    assert first_fit([5, 3, 2, 7, 4], 10) == first_fit([5, 3, 2, 7, 4], 10, item_lengths=[5, 3, 2, 7, 4])
    assert first_fit(["a", "b", "c", "d"], 10, item_lengths=[5, 3, 2, 7]) == [["a", "b", "c"], ["d"]]


def test_first_fit_decreasing_packs_objects_longest_first():
    items = ["a", "b", "c", "d", "e"]
    assert first_fit_decreasing(items, 10, item_lengths=[5, 3, 2, 7, 4]) == [["d", "b"], ["a", "e"], ["c"]]
    same = [object(), object(), object()]
    bins = first_fit_decreasing(same, 10, item_lengths=[6, 6, 4])
    assert bins[0][0] is same[0] and bins[0][1] is same[2] and bins[1][0] is same[1]  # stable among equals


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_object_packing_matches_integer_packing_and_the_linear_scan(seed):
    lengths = [int(x) for x in np.random.RandomState(seed).randint(1, 2048, size=500)]
    items = [object() for _ in lengths]
    assert [[lengths[i] for i in b] for b in _indices(first_fit(items, 2048, item_lengths=lengths), items)] == \
        first_fit(lengths, 2048)
    by_object = first_fit_decreasing(items, 2048, item_lengths=lengths)
    assert [[lengths[i] for i in b] for b in _indices(by_object, items)] == first_fit_decreasing(lengths, 2048)
    assert _indices(by_object, items) == _linear_first_fit(lengths, 2048, _decreasing(lengths))


@pytest.mark.parametrize(("lengths", "pack_size"), [
    ([], 100), ([0] * 10, 100), ([0, 5, 0, 95, 0, 1], 100), ([500], 100), ([500, 600, 700], 100),
    ([50, 50, 50, 50], 100)], ids=["empty", "all-zero", "zero-mixed", "single-oversize", "all-oversize", "exact-fit"])
def test_edge_cases_match_the_linear_scan(lengths, pack_size):
    items = [object() for _ in lengths]
    assert _indices(first_fit_decreasing(items, pack_size, item_lengths=lengths), items) == \
        _linear_first_fit(lengths, pack_size, _decreasing(lengths))
    assert _indices(first_fit(items, pack_size, item_lengths=lengths), items) == \
        _linear_first_fit(lengths, pack_size, range(len(lengths)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=60), st.integers(1, 256))
def test_any_lengths_match_the_linear_scan(lengths, pack_size):
    items = [f"item{i}" for i in range(len(lengths))]
    where = {item: i for i, item in enumerate(items)}
    got = first_fit(items, pack_size, item_lengths=lengths)
    assert [[where[x] for x in b] for b in got] == _linear_first_fit(lengths, pack_size, range(len(lengths)))
    got = first_fit_decreasing(items, pack_size, item_lengths=lengths)
    assert [[where[x] for x in b] for b in got] == _linear_first_fit(lengths, pack_size, _decreasing(lengths))


def test_errors_and_keyword_only():
    for fn in (first_fit, first_fit_decreasing):
        with pytest.raises(ValueError, match="seqlens and item_lengths must have the same number of entries, got 3 "
                                             "and 2"):
            fn([1, 2, 3], 10, item_lengths=[1, 2])
        with pytest.raises(TypeError):
            fn([1, 2, 3], 10, [1, 2, 3])


def test_pack_indices_is_unchanged_beside_them():
    # the pipeline-identical index packing our builder uses keeps its own contract (bins of indices)
    bins = pack_indices([5, 3, 2, 7], 10, "first_fit_decreasing")
    assert sorted(i for b in bins for i in b) == [0, 1, 2, 3] and all(
        sum([5, 3, 2, 7][i] for i in b) <= 10 for b in bins)
