"""`collate_packed` on packs holding an empty sequence (equal `seq_start_id` values), which
Megatron-Bridge's row rule accepts (issue 25 item 5).

The packs are Megatron-Bridge's `test_collate_fn_supports_different_sequence_counts` rows
(tests/unit_tests/data/datasets/test_gpt_sft.py), whose expected `cu_seqlens_q` is
[[0, 3, 6, 7], [0, 7, 7, 7]]; an empty sequence inserted anywhere adds no tokens and one
repeated offset. (Megatron-Bridge's own collate adds `length - 1` per sequence: the offset
would step back to 2, and an empty first sequence would slice input_ids[0:-1].)
"""

from __future__ import annotations

import numpy as np
import pytest

from stable_datasets.sft.collate import collate_packed

IDS = np.array([10, 11, 12, 13, 20, 21, 22, 23])
B = {"input_ids": np.arange(30, 38), "seq_boundaries": [0, 8], "loss_mask": np.ones(8, np.int8)}


def _pack(boundaries: list[int]) -> dict:
    return {"input_ids": IDS, "seq_boundaries": boundaries, "loss_mask": np.ones(8, np.int8)}


def _collate(*packs: dict, **kwargs) -> dict:
    settings = {"eos_id": 2, "max_seq_length": 8, "pad_seq_length_to_mult": 1, "return_tensors": "numpy"} | kwargs
    return collate_packed(list(packs), **settings)


@pytest.mark.parametrize(("boundaries", "cu_row"), [
    ([0, 4, 8], [0, 3, 6, 7]),  # Megatron-Bridge's pack and values
    ([0, 4, 4, 8], [0, 3, 3, 6, 7]),
    ([0, 0, 4, 8], [0, 0, 3, 6, 7]),
    ([0, 4, 8, 8], [0, 3, 6, 6, 7]),
    ([0, 4, 4, 4, 8], [0, 3, 3, 3, 6, 7]),
])
def test_an_empty_sequence_adds_one_zero_length_entry(boundaries, cu_row):
    out = _collate(_pack(boundaries), B)
    width = len(cu_row)
    assert out["cu_seqlens_q"].tolist() == [cu_row, [0, 7] + [7] * (width - 2)]
    assert out["cu_seqlens_kv"].tolist() == out["cu_seqlens_q"].tolist()
    # tokens, labels, masks and positions are those of Megatron-Bridge's pack without the empty sequence
    assert out["tokens"].tolist() == [[10, 11, 12, 20, 21, 22, 2], [30, 31, 32, 33, 34, 35, 36]]
    assert out["labels"].tolist() == [[11, 12, 13, 21, 22, 23, 2], [31, 32, 33, 34, 35, 36, 37]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1, 2, 0], list(range(7))]
    assert out["loss_mask"].tolist() == [[1] * 6 + [0], [1] * 7]
    assert out["padding_mask"].tolist() == [[False] * 6 + [True], [False] * 7]
    assert out["max_seqlen_q"].tolist() == [[3], [7]]
    assert out["token_count"] == [6, 7]


def test_an_empty_sequence_under_legacy_keys_and_context_parallel_padding():
    legacy = _collate(_pack([0, 4, 4, 8]), legacy_keys=True)
    assert legacy["cu_seqlens"].tolist() == [[0, 3, 3, 6, -1]]  # no padding: 6 tokens, padded length 6
    assert legacy["cu_seqlens_argmin"].tolist() == [[4]]
    cp = _collate({"input_ids": np.array([10, 11, 12, 2, 2, 20, 21, 2, 2, 2]), "seq_boundaries": [0, 5, 5, 10],
                   "loss_mask": np.ones(10, np.int8)}, pad_seq_to_mult=4)
    # Megatron-Bridge's test_collate_fn_marks_offline_alignment_padding pack, an empty sequence between
    assert cp["tokens"].tolist() == [[10, 11, 12, 2, 20, 21, 2, 2]]
    assert cp["cu_seqlens_q"].tolist() == [[0, 3, 3, 5]]
    assert cp["cu_seqlens_q_padded"].tolist() == [[0, 4, 4, 8]]
    assert cp["padding_mask"].tolist() == [[False, False, False, True, False, False, True, True]]


def test_pad_cu_seqlens_counts_an_empty_sequence():
    metadata = {"max_samples_per_bin": 3, "dataset_max_seqlen": 4, "min_packed_seqlen": 6}
    out = _collate(_pack([0, 4, 4, 8]), pad_cu_seqlens=True, pack_metadata=metadata, pad_to_max_length=True)
    assert out["cu_seqlens_q"].tolist() == [[0, 3, 3, 6, 8]]
    with pytest.raises(ValueError, match="a pack holds 4 sequences, more than max_samples_per_bin allows"):
        _collate(_pack([0, 4, 4, 4, 8]), pad_cu_seqlens=True, pack_metadata=metadata, pad_to_max_length=True)


def _cut_at_argmin(row: np.ndarray, argmin: np.ndarray) -> list[int]:
    """Megatron-Bridge's `get_packed_seq_params` on legacy batches: the boundaries end where the -1 padding starts."""
    return row[: int(argmin.item())].tolist()


def test_legacy_cu_seqlens_are_padded_with_minus_one_as_megatron_bridge_reads_them():
    # (issue 38 item 5) rows of 3 and 1 sequences: the short row's boundaries are padded with -1, and the
    # precomputed argmin cuts each row back to its own boundaries
    out = _collate(_pack([0, 4, 8]), B, legacy_keys=True)
    assert out["cu_seqlens"].tolist() == [[0, 3, 6, 7, -1], [0, 7, -1, -1, -1]]
    assert out["cu_seqlens_argmin"].tolist() == [[4], [2]]
    assert [_cut_at_argmin(r, a) for r, a in zip(out["cu_seqlens"], out["cu_seqlens_argmin"])] == [[0, 3, 6, 7],
                                                                                                    [0, 7]]
    assert out["max_seqlen"].tolist() == [[3], [7]]
    cp = _collate({"input_ids": np.array([10, 11, 12, 2, 2, 20, 21, 2, 2]), "seq_boundaries": [0, 5, 9],
                   "loss_mask": np.ones(9, np.int8)}, pad_seq_to_mult=4, legacy_keys=True)
    assert cp["cu_seqlens"].tolist() == [[0, 4, 8, -1]]
    assert cp["cu_seqlens_unpadded"].tolist() == [[0, 3, 5, -1]]
    assert cp["cu_seqlens_unpadded_argmin"].tolist() == [[3]]


def test_pad_seq_to_mult_uses_the_runtime_length_stored_minus_one():
    # sequences stored at 17 and 25 tokens (runtime 16 and 24, multiples of 8, as Megatron-Bridge pre-pads them):
    # the collate keeps 16 and 24, it does not round the stored lengths up to 24 and 32
    ids = np.concatenate([np.arange(1, 17), [2], np.arange(1, 19), [2] * 7])
    out = _collate({"input_ids": ids, "seq_boundaries": [0, 17, 42], "loss_mask": np.ones(42, np.int8)},
                   pad_seq_to_mult=8, max_seq_length=40)
    assert out["cu_seqlens_q_padded"].tolist() == [[0, 16, 40]]
    assert out["cu_seqlens_q"].tolist() == [[0, 16, 34]]
    assert out["token_count"] == [40]
