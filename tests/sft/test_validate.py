"""Megatron-Bridge's packed-row rule on read (issue 25 item 5): sft/validate.py.

The rows are Megatron-Bridge's own `TestValidateRow` inputs (tests/unit_tests/data/packing/
test_parquet.py) with its messages, plus the cases its `validate_row` decides without a test of
its own: equal starts (an empty sequence) pass, a pack with no tokens fails, the bound is named
before the order at the same index, the first-start message shows at most five values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.sft.validate import bad_packs, row_fault

CASES = [
    # Megatron-Bridge's tests
    ([1, 2, 3, 4], [1, 1, 0, 1], [0, 2], None),
    ([1, 2, 3], [1, 1], [0], "loss_mask length (2) != input_ids length (3)"),
    ([1, 2, 3], [1, 1, 1], [1], "seq_start_id must start with 0, got [1]"),
    ([1, 2, 3], [1, 1, 1], [], "seq_start_id must start with 0, got []"),
    ([1, 2, 3], [1, 1, 1], [0, 5], "seq_start_id[1]=5 >= len(input_ids)=3"),
    ([1, 2, 3, 4], [1, 1, 1, 1], [0, 3, 1], "seq_start_id is not non-decreasing at index 2: 3 > 1"),
    # its rule on inputs its tests do not cover
    ([1, 2, 3, 4], [1, 1, 0, 1], [0, 2, 2], None),
    ([1, 2, 3, 4], [1, 1, 0, 1], [0, 0, 2], None),
    ([1], [1], [0, 0, 0], None),
    ([], [], [0], "seq_start_id[0]=0 >= len(input_ids)=0"),
    ([], [], [], "seq_start_id must start with 0, got []"),
    ([1, 2, 3], [1, 1, 1], [0, 5, 1], "seq_start_id[1]=5 >= len(input_ids)=3"),
    ([1, 2, 3], [1, 1, 1], [0, 2, 1, 3], "seq_start_id is not non-decreasing at index 2: 2 > 1"),
    ([1, 2, 3], [1, 1, 1], [1, 2, 3, 4, 5, 6], "seq_start_id must start with 0, got [1, 2, 3, 4, 5]"),
    ([1, 2, 3], [1, 1], [7], "loss_mask length (2) != input_ids length (3)"),
]


@pytest.mark.parametrize(("input_ids", "loss_mask", "seq_start_id", "fault"), CASES)
def test_row_fault_is_megatron_bridges_rule(input_ids, loss_mask, seq_start_id, fault):
    assert row_fault(len(input_ids), len(loss_mask), seq_start_id) == fault
    assert row_fault(len(input_ids), len(loss_mask), np.asarray(seq_start_id, np.int32)) == fault


def _column(values: list[list[int]]) -> pa.Array:
    return pa.array(values, pa.list_(pa.int32()))


def test_block_flags_on_megatron_bridges_rows():
    flags = bad_packs(_column([c[0] for c in CASES]), _column([c[1] for c in CASES]), _column([c[2] for c in CASES]))
    assert flags.tolist() == [c[3] is not None for c in CASES]


def _megatron_validate_row(input_ids: list[int], loss_mask: list[int], seq_start_id: list[int]) -> bool:
    """Megatron-Bridge's validate_row decision, restated loop by loop as its source has it."""
    if len(loss_mask) != len(input_ids) or not seq_start_id or seq_start_id[0] != 0:
        return False
    return all(s < len(input_ids) and (i == 0 or s >= seq_start_id[i - 1]) for i, s in enumerate(seq_start_id))


_packs = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.lists(st.integers(-1, 7), max_size=5)),
                  min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(_packs)
def test_block_flags_agree_with_megatron_bridge_on_any_packs(packs):
    ids = [list(range(n)) for n, _, _ in packs]
    masks = [[1] * m for _, m, _ in packs]
    starts = [s for _, _, s in packs]
    flags = bad_packs(_column(ids), _column(masks), _column(starts)).tolist()
    assert flags == [not _megatron_validate_row(i, m, s) for i, m, s in zip(ids, masks, starts)]
    assert flags == [row_fault(len(i), len(m), s) is not None for i, m, s in zip(ids, masks, starts)]
