"""Megatron-Bridge's packed Parquet reader names (issue 25 items 3-5).

The first three tests are the reader plan's own (`TestDataGPTSFTPackedParquetDataset`: basic
read, collate keys, samples mapping) with its inputs and assertions; the distributed-state
fixture they use is Megatron's and not needed here. The rest port Megatron-Bridge's
tests/unit_tests/data/packing/test_parquet.py (paths, rows, schema checks, validate_row).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stable_datasets.sft import (
    GPTSFTPackedParquetDataset,
    GPTSFTPackedParquetMultiShardDataset,
    PackedSFTDataset,
    create_sft_dataset,
    write_packed_parquet,
)
from stable_datasets.sft.megatron import is_packed_parquet_file, resolve_packed_parquet_paths, resolve_parquet_paths
from stable_datasets.sft.pack import PackInputError

PLAN_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.uint8())),
                         ("seq_start_id", pa.list_(pa.int32()))])
# Megatron-Bridge's write_packed_parquet (2026) writes the loss mask as list<int8>
BRIDGE_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8())),
                           ("seq_start_id", pa.list_(pa.int32()))])


class _Tokenizer:
    eos_id = 0
    eod = 0
    pad_id = 0


@pytest.fixture
def get_tokenizer():
    return _Tokenizer


# -- the plan's three tests ----------------------------------------------------------------
def test_parquet_dataset_basic(tmp_path, get_tokenizer):
    parquet_path = tmp_path / "test.parquet"
    table = pa.Table.from_pydict({"input_ids": [[1, 2, 3, 4, 5], [10, 20, 30, 40]],
                                  "loss_mask": [[0, 0, 1, 1, 1], [0, 1, 1, 1]],
                                  "seq_start_id": [[0, 2], [0]]}, schema=PLAN_SCHEMA)
    pq.write_table(table, str(parquet_path), compression="zstd")
    dataset = GPTSFTPackedParquetDataset(file_path=str(parquet_path), tokenizer=get_tokenizer(), max_seq_length=2048)
    assert len(dataset) == 2
    sample = dataset[0]
    assert sample["input_ids"] == [1, 2, 3, 4, 5]
    assert sample["seq_boundaries"] == [0, 2, 5]
    assert sample["loss_mask"] == [0, 0, 1, 1, 1]


def test_parquet_dataset_collate_fn(tmp_path, get_tokenizer):
    parquet_path = tmp_path / "test.parquet"
    table = pa.Table.from_pydict({"input_ids": [[1, 2, 3, 4], [5, 6, 7, 8]], "loss_mask": [[0, 1, 1, 1], [0, 0, 1, 1]],
                                  "seq_start_id": [[0], [0]]}, schema=PLAN_SCHEMA)
    pq.write_table(table, str(parquet_path))
    dataset = GPTSFTPackedParquetDataset(file_path=str(parquet_path), tokenizer=get_tokenizer(), max_seq_length=2048)
    batch = [dataset[0], dataset[1]]
    collated = dataset.collate_fn(batch)
    assert "tokens" in collated
    assert "labels" in collated
    assert "loss_mask" in collated
    assert "position_ids" in collated
    # and the values: the same batch as our numpy path gives for the same packs
    ours = PackedSFTDataset(str(parquet_path), eos_id=0, max_seq_length=2048)
    expected = ours.collate_fn([ours[0], ours[1]])
    assert sorted(collated) == sorted(expected)
    for key in ("tokens", "labels", "loss_mask", "position_ids"):
        assert collated[key].tolist() == expected[key].tolist()
    assert collated["tokens"].tolist()[0][:3] == [1, 2, 3]
    # exactly the keys Megatron-Bridge's GPTSFTPackedDataset.collate_fn returns (packing/gpt_sft.py)
    assert sorted(collated) == ["attention_mask", "cu_seqlens_kv", "cu_seqlens_q", "labels", "loss_mask",
                                "max_seqlen_kv", "max_seqlen_q", "padding_mask", "position_ids", "token_count",
                                "tokens"]
    padded = GPTSFTPackedParquetDataset(str(parquet_path), get_tokenizer(), max_seq_length=2048, pad_seq_to_mult=4)
    assert {"cu_seqlens_q_padded", "cu_seqlens_kv_padded"} <= set(padded.collate_fn(batch))


def test_parquet_dataset_with_samples_mapping(tmp_path, get_tokenizer):
    parquet_path = tmp_path / "test.parquet"
    rows = [{"input_ids": [i], "loss_mask": [1], "seq_start_id": [0]} for i in range(10)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PLAN_SCHEMA), str(parquet_path))
    dataset = GPTSFTPackedParquetDataset(file_path=str(parquet_path), tokenizer=get_tokenizer(), max_seq_length=2048,
                                         max_num_samples=5, seed=42)
    assert len(dataset) == 5
    assert len({dataset[i]["input_ids"][0] for i in range(5)}) == 5  # one epoch, drawn without replacement


# -- Megatron-Bridge's test_parquet.py ---------------------------------------------------------
def _row(n_tokens=64, n_seqs=2):
    per = n_tokens // n_seqs
    return {"input_ids": list(range(1, n_tokens + 1)), "loss_mask": [1] * n_tokens,
            "seq_start_id": [i * per for i in range(n_seqs)]}


def _write(path, rows, row_group_size=500):
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in ("input_ids", "loss_mask", "seq_start_id")}),
                   str(path), row_group_size=row_group_size)
    return path


def _dataset(file_path, max_num_samples=None, **kwargs):
    return GPTSFTPackedParquetDataset(file_path=str(file_path), tokenizer=_Tokenizer(), max_seq_length=4096,
                                      max_num_samples=max_num_samples, pad_to_max_length=False, add_bos=False,
                                      add_eos=False, add_sep=False, seed=42, answer_only_loss=True,
                                      truncation_field="input", prompt_template="{input} {answer}",
                                      return_cu_seqlen=True, **kwargs)


def test_resolve_parquet_paths(tmp_path):
    single = _write(tmp_path / "data.idx.parquet", [_row()])
    assert resolve_parquet_paths(str(single)) == [str(single)]
    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(3):
        _write(shards / f"shard_{i:03d}.idx.parquet", [_row()])
    found = resolve_parquet_paths(str(shards / "shard_*.idx.parquet"))
    assert found == sorted(found) and len(found) == 3
    assert len(resolve_parquet_paths(str(shards))) == 3
    with pytest.raises(ValueError, match="not found"):
        resolve_parquet_paths(str(tmp_path / "nonexistent.idx.parquet"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No Parquet files found"):
        resolve_parquet_paths(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="No Parquet files found matching pattern"):
        _dataset(tmp_path / "nothing_*.parquet")


def test_single_file_rows(tmp_path):
    path = _write(tmp_path / "data.idx.parquet", [_row() for _ in range(10)], row_group_size=5)
    ds = _dataset(path)
    assert len(ds) == 10 and set(ds[0]) == {"input_ids", "loss_mask", "seq_boundaries"}
    assert ds[0]["seq_boundaries"] == [0, 32, 64]
    assert all(len(ds[i]["input_ids"]) == 64 and len(ds[i]["loss_mask"]) == 64 for i in range(len(ds)))
    assert all(type(v) is list and type(v[0]) is int for v in ds[3].values())
    last = ds[-1]
    assert last["loss_mask"] == [0] * 64 and last["input_ids"] == ds[9]["input_ids"]
    assert ds.__getitems__([0, -1]) == [ds[0], last]
    mapped = _dataset(path, max_num_samples=5)
    assert len(mapped) == 5 and mapped.samples_mapping is not None
    assert all(m == 0 for m in mapped[-1]["loss_mask"])
    over = _dataset(path, max_num_samples=25)
    assert len(over) == 25 and [len(over[i]["input_ids"]) for i in range(25)] == [64] * 25


def test_multi_file_glob_and_multishard(tmp_path):
    for i, n in enumerate([5, 10, 7]):
        rows = [{**_row(32, 1), "input_ids": [100 * i + r] * 32} for r in range(n)]
        _write(tmp_path / f"shard_{i:03d}.idx.parquet", rows, row_group_size=4)
    ds = _dataset(tmp_path / "shard_*.idx.parquet")
    assert len(ds) == 22
    assert [ds[i]["input_ids"][0] for i in (0, 4, 5, 15, 21)] == [0, 4, 100, 200, 206]
    multi = GPTSFTPackedParquetMultiShardDataset(sorted(str(p) for p in tmp_path.glob("shard_*")), _Tokenizer(),
                                                 max_seq_length=4096)
    assert len(multi) == 22 and multi.shard_offsets.tolist() == [0, 5, 15, 22]
    assert [multi[i]["input_ids"][0] for i in (0, 4, 5, 15, 21)] == [0, 4, 100, 200, 206]
    assert multi[-1]["loss_mask"] == [0] * 32 and multi[-1]["input_ids"][0] == 4  # the plan: shard 0, padding
    assert "tokens" in multi.collate_fn([multi[0], multi[7]])
    with pytest.raises(IndexError, match="index 22 is out of range for 22 samples"):
        multi[22]


def test_schema_checks(tmp_path):
    path = tmp_path / "bad.idx.parquet"
    pq.write_table(pa.table({"input_ids": [[1, 2, 3]], "seq_start_id": [[0]]}), str(path))
    with pytest.raises(ValueError, match=r"bad.idx.parquet' is missing required columns: \['loss_mask'\]"):
        _dataset(path)
    empty = tmp_path / "empty.idx.parquet"
    pq.write_table(pa.table({"input_ids": pa.array([], pa.list_(pa.int32())),
                             "loss_mask": pa.array([], pa.list_(pa.int8())),
                             "seq_start_id": pa.array([], pa.list_(pa.int32()))}), str(empty))
    with pytest.raises(ValueError, match="Packed Parquet dataset is empty"):
        _dataset(empty)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['max_seqlen'\]"):
        _dataset(_write(tmp_path / "ok.parquet", [_row()]), max_seqlen=3)


@pytest.mark.parametrize(("input_ids", "loss_mask", "seq_start_id", "message"), [
    ([1, 2, 3], [1, 1], [0], r"Row 7: loss_mask length \(2\) != input_ids length \(3\)"),
    ([1, 2, 3], [1, 1, 1], [1], r"Row 7: seq_start_id must start with 0, got \[1\]"),
    ([1, 2, 3], [1, 1, 1], [], r"must start with 0, got \[\]"),
    ([1, 2, 3], [1, 1, 1], [0, 5], r"seq_start_id\[1\]=5 >= len\(input_ids\)=3"),
    ([1, 2, 3, 4], [1, 1, 1, 1], [0, 3, 1], "seq_start_id is not non-decreasing at index 2: 3 > 1"),
])
def test_validate_row(input_ids, loss_mask, seq_start_id, message):
    GPTSFTPackedParquetDataset.validate_row(idx=0, input_ids=[1, 2, 3, 4], loss_mask=[1, 1, 0, 1], seq_start_id=[0, 2])
    with pytest.raises(ValueError, match=message):
        GPTSFTPackedParquetDataset.validate_row(idx=7, input_ids=input_ids, loss_mask=loss_mask,
                                                seq_start_id=seq_start_id)


@pytest.mark.parametrize("seq_start_id", [[0, 2, 2], [0, 0, 2], [0, 2, 4, 4]])
def test_validate_row_accepts_an_empty_sequence(seq_start_id):
    GPTSFTPackedParquetDataset.validate_row(idx=0, input_ids=[1, 2, 3, 4, 5], loss_mask=[1, 1, 0, 1, 1],
                                            seq_start_id=seq_start_id)


def test_both_readers_serve_what_validate_row_accepts_and_name_what_it_refuses(tmp_path):
    rows = [{"input_ids": [1, 2, 3, 4], "loss_mask": [1, 1, 0, 1], "seq_start_id": [0, 2, 2]},  # empty sequence
            {"input_ids": [1, 2, 3, 4], "loss_mask": [1, 1, 1, 1], "seq_start_id": [0, 3, 1]},
            {"input_ids": [], "loss_mask": [], "seq_start_id": [0]},
            {"input_ids": [5, 6, 7], "loss_mask": [1, 1, 1], "seq_start_id": [0, 0]}]
    path = tmp_path / "rows.idx.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PLAN_SCHEMA), str(path), row_group_size=2)
    megatron = _dataset(path, pad_seq_length_to_mult=1)
    ours = PackedSFTDataset(str(path), eos_id=0, max_seq_length=8)
    assert megatron[0] == {"input_ids": [1, 2, 3, 4], "seq_boundaries": [0, 2, 2, 4], "loss_mask": [1, 1, 0, 1]}
    assert ours[0]["seq_boundaries"].tolist() == [0, 2, 2, 4]
    assert megatron[3]["seq_boundaries"] == [0, 0, 3]
    for i, message in [(1, "seq_start_id is not non-decreasing at index 2: 3 > 1"),
                       (2, r"seq_start_id\[0\]=0 >= len\(input_ids\)=0")]:
        with pytest.raises(ValueError, match=f"pack {i} of .*: {message}$"):
            megatron[i]
        with pytest.raises(ValueError, match=f"pack {i} of .*: {message}$"):
            ours[i]
        with pytest.raises(ValueError, match=f"Row {i}: {message}$"):
            GPTSFTPackedParquetDataset.validate_row(i, **rows[i])
    batch = megatron.collate_fn([megatron[0], megatron[3]])
    assert batch["tokens"].tolist() == [[1, 3], [5, 6]]
    assert batch["labels"].tolist() == [[2, 4], [6, 7]]
    assert batch["loss_mask"].tolist() == [[1, 0], [1, 1]]
    assert batch["position_ids"].tolist() == [[0, 0], [0, 1]]
    assert batch["cu_seqlens_q"].tolist() == [[0, 1, 1, 2], [0, 0, 2, 2]]
    assert batch["max_seqlen_q"].tolist() == [[1], [2]]


def test_create_sft_dataset(tmp_path):
    path = _write(tmp_path / "train.idx.parquet", [_row() for _ in range(3)])
    ds = create_sft_dataset(path, _Tokenizer(), seq_length=64, seed=5, memmap_workers=4, add_bos=True)
    assert isinstance(ds, GPTSFTPackedParquetDataset) and len(ds) == 3
    assert ds.collate_settings["max_seq_length"] == 64 and ds[1]["seq_boundaries"] == [0, 32, 64]
    with pytest.raises(ValueError, match=r"train.jsonl is not packed SFT data .*load_dataset\('sft'"):
        create_sft_dataset(tmp_path / "train.jsonl", _Tokenizer())


def test_write_packed_parquet_writes_the_plans_types(tmp_path):
    rows = [_row(4, 1)]
    rows[0]["loss_mask"] = [True, False, 1, 0]
    path = write_packed_parquet(rows, tmp_path / "mixed", pack_ids=False)
    table = pq.read_table(path)
    assert table.schema == BRIDGE_SCHEMA
    assert table.column("loss_mask").to_pylist() == [[1, 0, 1, 0]]
    with_ids = pq.read_table(write_packed_parquet(rows, tmp_path / "ids"))
    assert with_ids.schema.field("loss_mask").type == pa.list_(pa.int8())
    read = GPTSFTPackedParquetDataset(str(path), _Tokenizer(), max_seq_length=8)
    assert read[0] == {"input_ids": [1, 2, 3, 4], "seq_boundaries": [0, 4], "loss_mask": [1, 0, 1, 0]}


# -- issue 36 item 19: nulls, constructor arguments, negative indices, adopt= ---------------------------------
@pytest.mark.parametrize("column", ["input_ids", "loss_mask", "seq_start_id"])
@pytest.mark.parametrize("validate", [True, False])
def test_a_row_with_a_null_column_is_a_packed_row_error_naming_it(tmp_path, column, validate):
    """Before: a null cell raised TypeError ('len() of unsized object', or int() of None), or with validate=False
    served {'loss_mask': None}."""
    from stable_datasets.sft import PackedRowError

    rows = [_row(8, 1) for _ in range(4)]
    rows[2] = {**rows[2], column: None}
    path = _write(tmp_path / "nulls.parquet", rows)
    ds = _dataset(path, validate=validate)
    assert ds[1]["input_ids"] == list(range(1, 9))  # its neighbours still read
    for read in (lambda: ds[2], lambda: ds.__getitems__([1, 2]), lambda: ds[-2]):
        with pytest.raises(PackedRowError, match=rf"^pack 2 of .*nulls.parquet'\]: {column} is null$"):
            read()


def test_the_constructor_does_not_need_the_collates_arguments(tmp_path):
    """Before: a tokenizer without eos_id was refused when the dataset was made, though only collate_fn uses it
    (Megatron-Bridge's constructor takes any tokenizer); now the packs read and collate_fn names what it lacks."""
    path = _write(tmp_path / "packs.parquet", [_row(8, 1) for _ in range(3)])
    ds = GPTSFTPackedParquetDataset(str(path), object())
    assert len(ds) == 3 and ds[0]["seq_boundaries"] == [0, 8]
    with pytest.raises(ValueError, match=r"^collate_fn needs eos_id= \(tokenizer object has no eos_id\) and "
                                         r"max_seq_length="):
        ds.collate_fn([ds[0]])
    assert "tokens" in GPTSFTPackedParquetDataset(str(path), object(), eos_id=0, max_seq_length=8).collate_fn([ds[0]])


@pytest.mark.parametrize("max_num_samples", [None, 6])
def test_a_negative_index_is_megatron_bridges_padding_sample(tmp_path, max_num_samples):
    """Megatron-Bridge: idx < 0 is a padding sample of sample len + idx (through the samples mapping), its loss
    mask zeroed. Before: an index below -len was reported shifted ('index -1 is out of range' for -5)."""
    rows = [{**_row(8, 1), "input_ids": [10 * r] * 8} for r in range(4)]
    ds = _dataset(_write(tmp_path / "packs.parquet", rows), max_num_samples=max_num_samples)
    n = len(ds)
    for idx in (-1, -n):
        padding, sample = ds[idx], ds[n + idx]
        assert padding["input_ids"] == sample["input_ids"] and padding["loss_mask"] == [0] * 8
        assert sample["loss_mask"] == [1] * 8
    with pytest.raises(IndexError, match=rf"^index {-n - 1} is out of range for {n} samples \(a negative index is a "
                                         r"padding sample of the sample len \+ index\)$"):
        ds[-n - 1]


def test_adopt_is_accepted_by_the_megatron_names(tmp_path):
    """docs/packed-sft.md: `adopt=False` reads the row groups, `adopt=True` adopts any Parquet files. Before: the
    Megatron names refused it ('unexpected keyword argument(s) ['adopt']')."""
    path = _write(tmp_path / "packs.parquet", [{**_row(8, 1), "input_ids": [r] * 8} for r in range(5)])
    expected = [[r] * 8 for r in range(5)]
    for adopt in (False, True):
        assert [ds["input_ids"] for ds in _dataset(path, adopt=adopt)] == expected
        assert create_sft_dataset(path, _Tokenizer(), adopt=adopt)[4]["input_ids"] == [4] * 8
        multi = GPTSFTPackedParquetMultiShardDataset([str(path)], _Tokenizer(), adopt=adopt)
        assert multi[2]["input_ids"] == [2] * 8


# -- Megatron-Bridge 2026 (issue 38 item 5): names, int8 masks --------------------------------
@pytest.mark.parametrize(("name", "packed"), [("data.idx.parquet", True), ("data.idx.pq", True),
                                              ("shard_*.idx.parquet", True), ("data.parquet", False),
                                              ("DATA.IDX.PARQUET", True), ("Data.Idx.Pq", True)])
def test_is_packed_parquet_file_as_megatron_bridge(name, packed):
    assert is_packed_parquet_file(name) is packed


def test_packed_names_resolve_sorted_from_a_folder_or_glob_in_any_case(tmp_path):
    names = ["b.IDX.PQ", "a.idx.parquet", "c.Idx.Parquet", "notes.txt"]
    for name in names[:3]:
        write_packed_parquet([_row(4, 1)], tmp_path / name, pack_ids=False)
    (tmp_path / "notes.txt").write_text("not a pack")
    expected = [str(tmp_path / n) for n in ("a.idx.parquet", "b.IDX.PQ", "c.Idx.Parquet")]
    assert resolve_packed_parquet_paths(tmp_path) == expected
    assert resolve_packed_parquet_paths(str(tmp_path / "*")) == expected
    assert len(GPTSFTPackedParquetDataset(str(tmp_path), _Tokenizer(), max_seq_length=8)) == 3


@pytest.mark.parametrize("mask", [[True, False, True, False], np.array([1, 0, 1, 0], np.uint8),
                                  np.array([1, 0, 1, 0], np.int64), [1, 0, 1, 0]])
def test_write_normalises_every_mask_type_to_int8(tmp_path, mask):
    rows = [{"input_ids": [1, 2, 3, 4], "loss_mask": mask, "seq_start_id": [0]}]
    table = pq.read_table(write_packed_parquet(rows, tmp_path / "m", pack_ids=False))
    assert table.schema == BRIDGE_SCHEMA
    assert table.column("loss_mask").to_pylist() == [[1, 0, 1, 0]]


@pytest.mark.parametrize(("mask", "word"), [([1, 2, 0, 1], "holds 2"), ([0.5, 1.0, 0.0, 1.0], "holds float64")])
def test_write_refuses_a_mask_that_is_not_binary_naming_row_and_field(tmp_path, mask, word):
    rows = [_row(4, 1), {"input_ids": [1, 2, 3, 4], "loss_mask": mask, "seq_start_id": [0]}]
    with pytest.raises(PackInputError, match=f"pack row 1: field loss_mask {word}"):
        write_packed_parquet(rows, tmp_path / "bad", pack_ids=False)
    assert list(tmp_path.iterdir()) == []


def test_uint8_masks_of_the_earlier_plan_still_read(tmp_path):
    path = tmp_path / "old.idx.parquet"
    pq.write_table(pa.Table.from_pydict({"input_ids": [[1, 2, 3, 4]], "loss_mask": [[0, 1, 1, 0]],
                                         "seq_start_id": [[0, 2]]}, schema=PLAN_SCHEMA), str(path))
    assert GPTSFTPackedParquetDataset(str(path), _Tokenizer(), max_seq_length=8)[0] == {
        "input_ids": [1, 2, 3, 4], "seq_boundaries": [0, 2, 4], "loss_mask": [0, 1, 1, 0]}
