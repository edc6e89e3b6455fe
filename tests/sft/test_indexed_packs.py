"""Sign-bit packed `.bin`/`.idx` (issue 38 item 5d): write, read, row validation, and the same batch as Parquet.

Megatron-Bridge's snapshot has no indexed packed variant (no test_indexed.py), so the layout and
rules are the issue's: token in the low bits, loss mask in the int32 sign bit; ids non-negative,
mask binary, seq_start_id from 0 and strictly increasing.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from stable_datasets.megatron.indexed import IndexedDataset, IndexedWriter
from stable_datasets.sft import GPTSFTPackedParquetDataset, PackedSFTDataset, create_sft_dataset, write_packed_parquet
from stable_datasets.sft.dataset import PackedFilesNotFoundError
from stable_datasets.sft.indexed_packs import (
    PackedIndexedDataset,
    PackedIndexedError,
    decode_packed_tokens,
    encode_packed_tokens,
    write_packed_indexed,
)

ROWS = [{"input_ids": [1, 2, 3, 4, 5], "loss_mask": [0, 0, 1, 1, 0], "seq_start_id": [0, 2]},
        {"input_ids": [10, 20, 30, 40], "loss_mask": [0, 1, 1, 0], "seq_start_id": [0]},
        {"input_ids": [2**31 - 1, 7, 0, 9, 11, 12], "loss_mask": [True, True, False, True, True, False],
         "seq_start_id": [0, 1, 3]}]


class _Tokenizer:
    eos_id = 0


def test_values_hold_the_token_in_the_low_bits_and_the_mask_in_the_sign_bit(tmp_path):
    assert write_packed_indexed(ROWS, tmp_path / "packs") == 3
    raw = IndexedDataset(tmp_path / "packs")
    assert raw.dtype == np.int32
    assert raw.document_indices.tolist() == [0, 2, 3, 6]  # one document per pack, one sequence per sub-sequence
    assert raw.sequence_lengths.tolist() == [2, 3, 4, 1, 2, 3]
    assert raw.tokens(0, 2).tolist() == [1, 2, 3 - 2**31, 4 - 2**31, 5]
    assert raw.get(3).tolist() == [-1]  # id 2**31 - 1 with mask 1: every bit set
    ids, mask = decode_packed_tokens(encode_packed_tokens(np.array([0, 5, 2**31 - 1]), np.array([1, 0, 0])))
    assert ids.tolist() == [0, 5, 2**31 - 1] and mask.tolist() == [1, 0, 0]


def test_packs_read_back_as_written(tmp_path):
    write_packed_indexed(ROWS, tmp_path / "packs")
    packs = PackedIndexedDataset(tmp_path / "packs")
    assert len(packs) == 3
    got = [{k: v.tolist() for k, v in packs[i].items()} for i in range(3)]
    assert got == [{"input_ids": [1, 2, 3, 4, 5], "seq_boundaries": [0, 2, 5], "loss_mask": [0, 0, 1, 1, 0]},
                   {"input_ids": [10, 20, 30, 40], "seq_boundaries": [0, 4], "loss_mask": [0, 1, 1, 0]},
                   {"input_ids": [2**31 - 1, 7, 0, 9, 11, 12], "seq_boundaries": [0, 1, 3, 6],
                    "loss_mask": [1, 1, 0, 1, 1, 0]}]
    assert packs[-1]["input_ids"].tolist() == got[2]["input_ids"]
    with pytest.raises(IndexError, match="pack 3 is out of range for 3 packs"):
        packs[3]


@pytest.mark.parametrize("options", [{}, {"answer_only_loss": False}, {"pad_seq_to_mult": 2},
                                     {"legacy_keys": True}, {"pad_to_max_length": True}])
def test_collate_is_the_same_for_the_parquet_and_indexed_forms(tmp_path, options):
    rows = [*ROWS[:2], {"input_ids": [3, 9, 0, 4, 6, 0, 0], "loss_mask": [1, 1, 0, 1, 1, 0, 0],
                        "seq_start_id": [0, 3]}]
    parquet = GPTSFTPackedParquetDataset(str(write_packed_parquet(rows, tmp_path / "p")), _Tokenizer(),
                                         max_seq_length=16, **options)
    write_packed_indexed(rows, tmp_path / "i")
    indexed = PackedIndexedDataset(tmp_path / "i", eos_id=0, max_seq_length=16, **options)
    want = parquet.collate_fn([parquet[i] for i in range(3)])
    got = indexed.collate_fn([indexed[i] for i in range(3)])
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert (value.tolist() if hasattr(value, "tolist") else value) == \
               (got[key].tolist() if hasattr(got[key], "tolist") else got[key]), key


@pytest.mark.parametrize(("field", "value", "message"), [
    ("input_ids", [1, -3, 2, 4], "pack row 1: field input_ids holds -3; ids are non-negative"),
    ("input_ids", [1, 2**31, 2, 4], "pack row 1: field input_ids holds 2147483648"),
    ("loss_mask", [0, 2, 1, 0], "pack row 1: field loss_mask holds 2; a loss mask is binary"),
    ("loss_mask", [0.0, 1.0, 1.0, 0.0], "pack row 1: field loss_mask holds float64 values"),
    ("loss_mask", [0, 1, 1], "pack row 1: field loss_mask has 3 values for 4 input_ids"),
    ("seq_start_id", [1], r"pack row 1: field seq_start_id must start with 0, got \[1\]"),
    ("seq_start_id", [], r"pack row 1: field seq_start_id must start with 0, got \[\]"),
    ("seq_start_id", [0, 2, 2], "pack row 1: field seq_start_id must be strictly increasing: 2 then 2 at index 2"),
    ("seq_start_id", [0, 3, 1], "pack row 1: field seq_start_id must be strictly increasing: 3 then 1 at index 2"),
    ("seq_start_id", [0, 4], "pack row 1: field seq_start_id starts a sequence at 4, past the 4 input_ids"),
])
def test_a_bad_row_is_refused_naming_file_row_and_field_and_nothing_is_left(tmp_path, field, value, message):
    bad = {"input_ids": [1, 2, 3, 4], "loss_mask": [0, 1, 1, 0], "seq_start_id": [0], field: value}
    with pytest.raises(PackedIndexedError, match=f"{tmp_path / 'packs'}.bin: {message}"):
        write_packed_indexed([ROWS[0], bad], tmp_path / "packs")
    assert list(tmp_path.iterdir()) == []


def test_reading_refuses_files_that_are_not_sign_bit_packs(tmp_path):
    writer = IndexedWriter(tmp_path / "narrow", dtype=np.uint16)
    writer.add([1, 2, 3])
    writer.commit()
    with pytest.raises(PackedIndexedError, match=r"narrow.bin: field input_ids is stored as uint16; .* int32"):
        PackedIndexedDataset(tmp_path / "narrow")
    writer = IndexedWriter(tmp_path / "empty_seq", dtype=np.int32)
    writer.add_block(np.array([1, 2, 3, 4, 5], np.int32), np.array([2, 3, 0]), documents=np.array([1, 2]))
    writer.commit()
    with pytest.raises(PackedIndexedError, match="empty_seq.bin: pack row 1: field seq_start_id is not strictly "
                                                 r"increasing \(sequence 1 is empty\)"):
        PackedIndexedDataset(tmp_path / "empty_seq")
    writer = IndexedWriter(tmp_path / "empty_pack", dtype=np.int32)
    writer.add_block(np.array([1, 2], np.int32), np.array([2]), documents=np.array([1, 0]))
    writer.commit()
    with pytest.raises(PackedIndexedError, match="empty_pack.bin: pack row 1: field seq_start_id is empty"):
        PackedIndexedDataset(tmp_path / "empty_pack")


def _lists(batch):
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in batch.items()}


@pytest.mark.parametrize("cls", [PackedSFTDataset, GPTSFTPackedParquetDataset])
@pytest.mark.parametrize("name", ["prefix", "bin", "idx", "folder"])
@pytest.mark.parametrize("options", [{}, {"pad_seq_to_mult": 2}, {"pad_cu_seqlens": True, "pad_to_max_length": True,
                                      "pack_metadata": {"max_samples_per_bin": 3, "dataset_max_seqlen": 5,
                                                        "min_packed_seqlen": 4}}])
def test_an_indexed_prefix_opens_as_packs_in_the_parquet_classes(tmp_path, cls, name, options):
    """A Megatron-Bridge config naming a packed indexed prefix (or its .bin, its .idx, a folder of pairs) gets the
    same class and the same collate batches as from the same packs written as Parquet."""
    rows = [*ROWS, {"input_ids": [3, 9, 0, 4, 6, 0, 0], "loss_mask": [1, 1, 0, 1, 1, 0, 0], "seq_start_id": [0, 3]}]
    parquet = cls(str(write_packed_parquet(rows, tmp_path / "p.idx.parquet")), tokenizer=_Tokenizer(),
                  max_seq_length=16, **options)
    (tmp_path / "packs").mkdir()
    write_packed_indexed(rows[:2], tmp_path / "packs" / "a")  # two pairs: a folder reads them in sorted order
    write_packed_indexed(rows[2:], tmp_path / "packs" / "b")
    spec = {"prefix": [tmp_path / "packs" / "a", tmp_path / "packs" / "b"],
            "bin": [str(tmp_path / "packs" / "a.bin"), str(tmp_path / "packs" / "b.bin")],
            "idx": [str(tmp_path / "packs" / "a.idx"), str(tmp_path / "packs" / "b.idx")],
            "folder": str(tmp_path / "packs")}[name]
    indexed = cls(spec, tokenizer=_Tokenizer(), max_seq_length=16, **options)
    assert type(indexed) is cls and len(indexed) == len(parquet) == 4
    for i in (0, 1, 2, 3, -1):
        a, b = parquet[i], indexed[i]
        assert {k: list(v) for k, v in a.items()} == {k: list(v) for k, v in b.items()}, i
    for batch in ([0, 1], [2, 3, 1], [3]):
        assert _lists(indexed.collate_fn([indexed[i] for i in batch])) == \
            _lists(parquet.collate_fn([parquet[i] for i in batch]))
    with_mapping = cls(spec, tokenizer=_Tokenizer(), max_seq_length=16, max_num_samples=7, seed=3, **options)
    same = cls(str(tmp_path / "p.idx.parquet"), tokenizer=_Tokenizer(), max_seq_length=16, max_num_samples=7,
               seed=3, **options)
    assert [list(with_mapping[i]["input_ids"]) for i in range(7)] == [list(same[i]["input_ids"]) for i in range(7)]


def test_indexed_packs_survive_pickling_for_dataloader_workers(tmp_path):
    write_packed_indexed(ROWS, tmp_path / "packs")
    packs = PackedSFTDataset(tmp_path / "packs", eos_id=0, max_seq_length=16)
    again = pickle.loads(pickle.dumps(packs))
    assert [again[i]["input_ids"].tolist() for i in range(3)] == [r["input_ids"] for r in ROWS[:2]] + \
        [[2**31 - 1, 7, 0, 9, 11, 12]]


def test_a_wrong_path_names_what_was_looked_for(tmp_path):
    with pytest.raises(PackedFilesNotFoundError, match=f"packed file {tmp_path / 'none'} does not exist \\(looked "
                       f"for a file, a folder, a pattern and a packed indexed pair {tmp_path / 'none'}.bin \\+ "
                       "\\.idx\\)"):
        PackedSFTDataset(tmp_path / "none")
    write_packed_indexed(ROWS, tmp_path / "packs")
    (tmp_path / "packs.idx").unlink()
    for spec in (tmp_path / "packs", tmp_path / "packs.bin", tmp_path / "packs.idx"):
        with pytest.raises(PackedFilesNotFoundError, match=f"{tmp_path / 'packs'}.bin exists but "
                           f"{tmp_path / 'packs'}.idx is missing"):
            GPTSFTPackedParquetDataset(str(spec), _Tokenizer())
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackedFilesNotFoundError, match="holds no .parquet, .pq or .npy packed files, no packed "
                                                       "indexed .bin/.idx pair and no stable-datasets cache"):
        PackedSFTDataset(tmp_path / "empty")
    writer = IndexedWriter(tmp_path / "narrow", dtype=np.uint16)
    writer.add([1, 2, 3])
    writer.commit()
    with pytest.raises(PackedIndexedError, match=r"narrow.bin: field input_ids is stored as uint16; .* int32"):
        GPTSFTPackedParquetDataset(str(tmp_path / "narrow"), _Tokenizer())


def test_create_sft_dataset_takes_an_indexed_prefix(tmp_path):
    write_packed_indexed(ROWS, tmp_path / "packs")
    packs = create_sft_dataset(str(tmp_path / "packs"), _Tokenizer(), seq_length=16)
    assert isinstance(packs, GPTSFTPackedParquetDataset) and len(packs) == 3
    assert packs[1] == {"input_ids": [10, 20, 30, 40], "seq_boundaries": [0, 4], "loss_mask": [0, 1, 1, 0]}
