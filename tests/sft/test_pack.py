"""`pack_row` / `plan_packs` with `pad_seq_to_mult` (issue 38 item 5): the runtime length rule.

Megatron-Bridge pads for context parallelism by the runtime length (stored length - 1, as the
label shift drops a token), not the stored one; its tests/unit_tests/data/packing/test_offline.py
inputs and expected stored lengths are ported here (pad id 0, multiple 8).
"""

from __future__ import annotations

import numpy as np
import pytest

from stable_datasets.sft.pack import pack_row, plan_packs


def _seq(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(1, n + 1), np.ones(n, np.int8)


def _stored_lengths(lengths: list[int], limit: int) -> list[int]:
    row = pack_row([_seq(n) for n in lengths], limit, pad_seq_to_mult=8, pad_id=0)
    return np.diff(np.append(row["seq_start_id"], len(row["input_ids"]))).tolist()


def test_the_ceil_uses_the_runtime_length_not_the_stored_length():
    assert _stored_lengths([17, 18], limit=41) == [17, 25]  # runtime 16 stays; 17 rounds to 24


def test_an_already_divisible_stored_length_gets_no_padding():
    row = pack_row([_seq(17)], 41, pad_seq_to_mult=8, pad_id=0)
    assert row["input_ids"].tolist() == list(range(1, 18))
    assert len(row["loss_mask"]) == 17


def test_runtime_padding_is_capped_at_the_divisible_pack_size():
    plan = plan_packs(np.array([16, 17, 20, 21]), 16, pad_seq_to_mult=8, overlong="truncate")
    assert plan.limit == 17  # stored = runtime cap (16) + 1
    assert _stored_lengths([16, 17, 20, 21], limit=plan.limit) == [17, 17, 17, 17]
    assert plan.truncated == 2


def test_a_pack_size_below_the_multiple_is_refused():
    with pytest.raises(ValueError, match="pack_size=7 must be at least pad_seq_to_mult=8"):
        plan_packs(np.array([5]), 7, pad_seq_to_mult=8)
