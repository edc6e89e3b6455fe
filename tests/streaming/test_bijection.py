"""Keyed permutations evaluated element by element: bijections on [0, size), seeded, independent per key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.streaming.bijection import invert, mix_keys, permute


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 3000), seed=st.integers(0, 2**40))
def test_permute_is_a_bijection_of_the_range_and_invert_undoes_it(size, seed):
    key = mix_keys(seed)
    image = permute(np.arange(size), size, key)
    assert sorted(image.tolist()) == list(range(size))
    assert invert(image, size, key).tolist() == list(range(size))


def test_each_element_may_carry_its_own_size_and_key():
    sizes = np.array([5] * 5 + [7] * 7)
    index = np.concatenate([np.arange(5), np.arange(7)])
    keys = mix_keys(1, np.array([0] * 5 + [1] * 7))
    image = permute(index, sizes, keys)
    assert sorted(image[:5].tolist()) == list(range(5)) and sorted(image[5:].tolist()) == list(range(7))
    assert image[5:].tolist() == permute(np.arange(7), 7, mix_keys(1, 1)).tolist()


def test_keys_are_deterministic_and_different_keys_give_different_orders():
    a = permute(np.arange(1000), 1000, mix_keys(3, 0)).tolist()
    assert a == permute(np.arange(1000), 1000, mix_keys(3, 0)).tolist()
    assert a != permute(np.arange(1000), 1000, mix_keys(3, 1)).tolist()
    assert a != list(range(1000))


def test_a_billion_row_domain_is_evaluated_without_arrays_of_its_size():
    image = permute(np.array([0, 1, 999_999_999]), 10**9, mix_keys(0))
    assert ((image >= 0) & (image < 10**9)).all() and len(set(image.tolist())) == 3
    assert invert(image, 10**9, mix_keys(0)).tolist() == [0, 1, 999_999_999]


def test_an_index_outside_the_range_is_an_error():
    with pytest.raises(IndexError, match=r"index outside \[0, size\): \[10\]"):
        permute(np.array([10]), 10, mix_keys(0))
