"""Megatron-Core's greedy blending index computed in bulk (stable_datasets.megatron.blend_index): equal, array for
array and tie for tie, to the plain one-step-per-sample loop (`stepwise_blending_indices`, the reference) and to
megatron-core's own C++ `build_blending_indices`, whatever the weights (equal, tiny, many sources) and whatever the
segment sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stable_datasets.megatron.blend import blending_indices, normalise
from stable_datasets.megatron.blend_index import _guess, stepwise_blending_indices
from stable_datasets.megatron.blend_index import blending_indices as bulk_indices
from tests.megatron.megatron_oracle import megatron_blending_indices


def plain_loop(weights, size):
    """The greedy one Python step per sample (the reference)."""
    return stepwise_blending_indices(normalise(weights), size)


def _assert_same(ours, theirs):
    assert ours[0].dtype == np.int16 and ours[1].dtype == np.int64
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


weight = st.floats(min_value=1e-6, max_value=1e3, allow_nan=False, allow_infinity=False)
weights = st.one_of(
    st.lists(weight, min_size=1, max_size=12),
    st.builds(lambda w, n: [w] * n, weight, st.integers(1, 16)),  # equal weights: every step a tie
    st.lists(st.sampled_from([1e-6, 1e-3, 0.1, 0.3, 0.7, 1.0, 3.0]), min_size=2, max_size=40),  # tiny and many
    st.lists(st.integers(1, 10), min_size=2, max_size=8),  # small integers: exact ratios, ties in real arithmetic
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weights=weights, size=st.integers(1, 10_000))
def test_bulk_equals_the_plain_loop(weights, size):
    _assert_same(blending_indices(weights, size), plain_loop(weights, size))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weights=weights, size=st.integers(1, 3_000), segment=st.integers(1, 64), warm_up=st.integers(0, 40),
       window=st.integers(1, 9))
def test_any_segments_warm_up_and_window_give_the_same_index(weights, size, segment, warm_up, window):
    _assert_same(bulk_indices(normalise(weights), size, segment=segment, warm_up=warm_up, window=window),
                 plain_loop(weights, size))


def test_wrong_guesses_are_stepped_again_from_the_exact_counts():
    """Without a warm-up, segment starts begin from the rounding guess; where it is not the greedy's counts the
    segment is redone from its predecessor's end, so the result is still exact."""
    shares = normalise([5, 3, 2, 1])
    dataset_index, _ = plain_loop(shares, 5_000)
    starts = np.arange(41, 5_000, 40, dtype=np.float64)  # segment starts for segment=40 from position 1
    exact = np.stack([np.bincount(dataset_index[:int(s)], minlength=4) for s in starts], axis=1)
    wrong = np.any(_guess(np.asarray(shares), starts) != exact, axis=0)
    assert wrong.sum() == 23  # 23 of 124 starts guessed wrong: the repair path runs
    _assert_same(bulk_indices(shares, 5_000, segment=40, warm_up=0, window=7), plain_loop(shares, 5_000))


@settings(max_examples=40, deadline=None)
@given(weights=weights, size=st.integers(1, 100_000))
def test_equal_to_megatron_cores_own_helpers(weights, size):
    pytest.importorskip("megatron.core")
    _assert_same(blending_indices(weights, size), megatron_blending_indices(normalise(weights), size))


@pytest.mark.parametrize("weights", [[0.3, 0.7], [1] * 10, [float(i) for i in range(1, 11)], [1e-5, 1, 1]])
def test_a_million_samples_equal_megatron_cores(weights):
    pytest.importorskip("megatron.core")
    _assert_same(blending_indices(weights, 1_000_000), megatron_blending_indices(normalise(weights), 1_000_000))


def test_edge_sizes_and_one_source():
    assert [a.tolist() for a in blending_indices([1.0], 5)] == [[0] * 5, [0, 1, 2, 3, 4]]
    assert [a.tolist() for a in blending_indices([1, 3], 0)] == [[], []]
    assert [a.tolist() for a in blending_indices([1, 3], 1)] == [[1], [0]]
    with pytest.raises(ValueError, match="fewer than 32767 sources, got 32767"):
        blending_indices([1.0] * 32767, 10)
