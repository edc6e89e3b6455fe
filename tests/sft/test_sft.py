from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.sft import (
    ALGORITHMS,
    ByteTokenizer,
    PackedRowError,
    PackedSFTDataset,
    PackingConfig,
    best_fit_decreasing,
    chat_tokenizer,
    collate_packed,
    first_fit,
    first_fit_decreasing,
    first_fit_shuffle,
    pack_indices,
    pack_sequences,
    packing_metadata,
    write_packed_parquet,
)
from stable_datasets.sft.pack import packed_table


# -- packing ------------------------------------------------------------------------------------
def _reference_first_fit(seqlens, pack_size):
    """Megatron-Bridge's first fit, written the slow, obvious way."""
    bins, room = [], []
    for s in seqlens:
        for i, r in enumerate(room):
            if r >= s:
                bins[i].append(s)
                room[i] -= s
                break
        else:
            bins.append([s])
            room.append(pack_size - s)
    return bins


def test_issue_example_and_oversized_items():
    assert first_fit_decreasing([1111, 8192, 4096, 1000], 2048) == [[8192], [4096], [1111], [1000]]
    assert first_fit([5, 5, 10, 1], 10) == [[5, 5], [10], [1]]


def test_first_fit_family_matches_the_reference():
    rng = np.random.default_rng(0)
    for _ in range(100):
        lengths = rng.integers(0, 3000, rng.integers(0, 200)).tolist()
        assert first_fit(lengths, 2048) == _reference_first_fit(lengths, 2048)
        assert first_fit_decreasing(lengths, 2048) == _reference_first_fit(sorted(lengths, reverse=True), 2048)
        state = np.random.get_state()
        shuffled = list(lengths)
        np.random.seed(11)
        np.random.shuffle(shuffled)  # what Megatron-Bridge does with the global RNG
        np.random.set_state(state)
        assert first_fit_shuffle(lengths, 2048, seed=11) == _reference_first_fit(shuffled, 2048)


def test_first_fit_shuffle_leaves_the_global_rng_alone():
    state = np.random.get_state()
    first_fit_shuffle(list(range(1, 100)), 128, seed=3)
    assert np.array_equal(np.random.get_state()[1], state[1])


def test_best_fit_decreasing_packs_tightly():
    lengths = [7, 5, 4, 3, 3, 2, 1, 9, 6]
    bins = best_fit_decreasing(lengths, 10)
    assert sorted(sum(bins, [])) == sorted(lengths)
    assert all(sum(b) <= 10 for b in bins)
    assert len(bins) == 4  # 9+1, 7+3, 6+4, 5+3+2
    assert best_fit_decreasing([12, 3], 10) == [[12], [3]]


def test_packing_metadata_fields():
    meta = packing_metadata([4, 6, 3], [[4, 6], [3]], 10)
    assert meta == {"dataset_max_seqlen": 6, "max_samples_per_bin": 2, "packing_factor": 1.5,
                    "packing_efficiency": 65.0, "pack_size": 10, "min_packed_seqlen": 3}


# -- collate ------------------------------------------------------------------------------------
A = {"input_ids": np.array([10, 11, 12, 13, 20, 21, 22, 23]), "seq_boundaries": [0, 4, 8],
     "loss_mask": np.ones(8, np.int8)}
B = {"input_ids": np.arange(30, 38), "seq_boundaries": [0, 8], "loss_mask": np.ones(8, np.int8)}


def test_collate_matches_the_issue_example():
    # Megatron-Bridge's test_collate_fn_supports_different_sequence_counts (pad_seq_length_to_mult=1)
    out = collate_packed([A, B], eos_id=2, max_seq_length=8, pad_seq_length_to_mult=1, return_tensors="numpy")
    assert out["cu_seqlens_q"].tolist() == [[0, 3, 6, 7], [0, 7, 7, 7]]
    assert out["cu_seqlens_kv"].tolist() == out["cu_seqlens_q"].tolist()
    assert out["max_seqlen_q"].tolist() == [[3], [7]] == out["max_seqlen_kv"].tolist()
    assert out["padding_mask"].tolist() == [[False] * 6 + [True], [False] * 7]
    assert out["tokens"].tolist() == [[10, 11, 12, 20, 21, 22, 2], [30, 31, 32, 33, 34, 35, 36]]
    assert out["labels"].tolist() == [[11, 12, 13, 21, 22, 23, 2], [31, 32, 33, 34, 35, 36, 37]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1, 2, 0], list(range(7))]
    assert out["loss_mask"].tolist() == [[1] * 6 + [0], [1] * 7]
    assert out["token_count"] == [6, 7]
    assert out["cu_seqlens_q"].dtype == np.int32
    assert "cu_seqlens_q_padded" not in out


def test_collate_legacy_keys_and_tensors():
    torch = pytest.importorskip("torch")
    legacy = collate_packed([A, B], eos_id=2, max_seq_length=8, pad_seq_length_to_mult=1, legacy_keys=True)
    assert isinstance(legacy["tokens"], torch.Tensor) and legacy["tokens"].dtype == torch.int64
    assert legacy["cu_seqlens"].tolist() == [[0, 3, 6, 7, -1], [0, 7, -1, -1, -1]]
    assert legacy["cu_seqlens_argmin"].tolist() == [[4], [2]]
    assert legacy["max_seqlen"].tolist() == [[3], [7]]
    assert "padding_mask" not in legacy and "cu_seqlens_q" not in legacy


def test_collate_padding_options():
    per_seq = collate_packed([A, B], eos_id=2, max_seq_length=16, pad_seq_to_mult=4, return_tensors="numpy")
    assert per_seq["cu_seqlens_q"].tolist() == [[0, 3, 6, 6], [0, 7, 7, 7]]
    assert per_seq["cu_seqlens_q_padded"].tolist() == [[0, 4, 8, 16], [0, 8, 16, 16]]
    assert per_seq["tokens"][0, :8].tolist() == [10, 11, 12, 2, 20, 21, 22, 2]
    assert per_seq["position_ids"][0, :8].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    fixed = collate_packed([A], eos_id=2, max_seq_length=8, pad_to_max_length=True, return_tensors="numpy")
    assert fixed["tokens"].shape == (1, 8)
    rounded = collate_packed([A], eos_id=2, max_seq_length=64, return_tensors="numpy")
    assert rounded["tokens"].shape == (1, 16)  # rounded up to pad_seq_length_to_mult
    meta = {"max_samples_per_bin": 3, "dataset_max_seqlen": 4, "min_packed_seqlen": 5, "pack_size": 8}
    graph = collate_packed([A, B], eos_id=2, max_seq_length=8, pad_cu_seqlens=True, pack_metadata=meta,
                           return_tensors="numpy")
    assert graph["cu_seqlens_q"].shape == (2, 5) and graph["max_seqlen_q"].tolist() == [[4], [4]]
    with pytest.raises(ValueError, match="pad_cu_seqlens=True needs pack_metadata"):
        collate_packed([A], eos_id=2, max_seq_length=8, pad_cu_seqlens=True)
    full_loss = collate_packed([{**A, "input_ids": np.array([10, 2, 12, 13, 20, 21, 22, 23])}], eos_id=2,
                               max_seq_length=8, answer_only_loss=False, return_tensors="numpy")
    assert full_loss["loss_mask"][0, :6].tolist() == [1, 0, 1, 1, 1, 1]


def test_collate_context_parallel_prepadded_pack():
    # Megatron-Bridge test_collate_fn_marks_offline_alignment_padding (default pad_seq_length_to_mult 16)
    item = {"input_ids": np.array([10, 11, 12, 2, 2, 20, 21, 2, 2, 2]), "seq_boundaries": [0, 5, 10],
            "loss_mask": np.ones(10, np.int64)}
    out = collate_packed([item], eos_id=2, max_seq_length=8, pad_seq_to_mult=4, return_tensors="numpy")
    assert out["tokens"].tolist() == [[10, 11, 12, 2, 20, 21, 2, 2]]
    assert out["cu_seqlens_q"].tolist() == [[0, 3, 5]] == out["cu_seqlens_kv"].tolist()
    assert out["cu_seqlens_q_padded"].tolist() == [[0, 4, 8]] == out["cu_seqlens_kv_padded"].tolist()
    assert out["padding_mask"].tolist() == [[False, False, False, True, False, False, True, True]]
    assert out["max_seqlen_q"].tolist() == [[4]]
    legacy = collate_packed([item], eos_id=2, max_seq_length=8, pad_seq_to_mult=4, legacy_keys=True,
                            return_tensors="numpy")
    assert legacy["cu_seqlens"].tolist() == [[0, 4, 8, -1]]
    assert legacy["cu_seqlens_unpadded"].tolist() == [[0, 3, 5, -1]]
    assert legacy["cu_seqlens_unpadded_argmin"].tolist() == [[3]]
    plain = collate_packed([item], eos_id=2, max_seq_length=8, pad_seq_length_to_mult=1, legacy_keys=True,
                           return_tensors="numpy")
    assert "cu_seqlens_unpadded" not in plain  # only with per-sequence padding, as in NeMo


def test_collate_trailing_padding_and_padded_length():
    # Megatron-Bridge test_collate_fn_marks_offline_trailing_padding_without_alignment
    item = {"input_ids": np.array([10, 11, 12, 2]), "seq_boundaries": [0, 4], "loss_mask": np.ones(4, np.int64)}
    out = collate_packed([item], eos_id=2, max_seq_length=8, pad_to_max_length=True, return_tensors="numpy")
    assert out["tokens"].tolist() == [[10, 11, 12, 2, 2, 2, 2, 2]]
    assert out["cu_seqlens_q"].tolist() == [[0, 3, 8]] and "cu_seqlens_q_padded" not in out
    assert out["padding_mask"].tolist() == [[False] * 3 + [True] * 5]
    # padded length = min(max_seq_length, longest rounded up): 3 -> 16 -> 10
    rounded = collate_packed([item], eos_id=2, max_seq_length=10, return_tensors="numpy")
    assert rounded["tokens"].shape == (1, 10) and rounded["cu_seqlens_q"].tolist() == [[0, 3, 10]]


# -- tokenization and packing -------------------------------------------------------------------
CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]


def test_byte_tokenizer_masks_assistant_tokens():
    tok = chat_tokenizer(ByteTokenizer())
    ids, mask = tok.encode_chat(CHAT)
    assert ids == [257, 261, 104, 105, 259, 262, 121, 111, 259, 258]
    assert mask == [False] * 5 + [False, True, True, True, True]
    _, everything = tok.encode_chat(CHAT, loss_on="all")
    assert all(everything)


def test_pack_rows_shift_the_mask_and_start_at_zero():
    seqs = [(np.array([1, 2, 3, 4]), np.array([0, 0, 1, 1], np.int8)), (np.array([5, 6, 7]), np.array([0, 1, 1]))]
    result = pack_sequences(seqs, pack_size=10, algorithm="first_fit")
    row = result.rows[0]
    assert row["input_ids"].tolist() == [5, 6, 7, 1, 2, 3, 4]  # Megatron's pipeline packs the shortest first
    assert row["loss_mask"].tolist() == [1, 1, 0, 0, 1, 1, 0]  # shifted left by one within each sequence
    assert row["seq_start_id"].tolist() == [0, 3]
    assert result.metadata["pack_size"] == 10 and result.metadata["max_samples_per_bin"] == 2
    long = [(np.arange(20), np.ones(20, np.int8)), *seqs]
    assert pack_sequences(long, 10).skipped == 1
    cut = pack_sequences(long, 10, overlong="truncate")
    assert cut.truncated == 1 and max(len(r["input_ids"]) for r in cut.rows) <= 11 + 7


def _megatron_pipeline(lengths, pack_size, algorithm, seed):
    """Megatron-Bridge's create_hist -> create_packing_strategy -> fill_packing_strategy, on item ids.

    Written here from its behaviour: lengths grouped by value, the algorithm run over the
    ascending list under np.random.seed(seed), then per length (shortest first) one
    np.random.permutation of that length's items, popped from the end into the bins.
    """
    by_length = {}
    for item, n in enumerate(lengths):
        by_length.setdefault(n, []).append(item)
    ascending = [n for n in sorted(by_length) for _ in by_length[n]]
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        if algorithm == "first_fit_shuffle":
            order = list(ascending)
            np.random.shuffle(order)
        elif algorithm == "first_fit_decreasing":
            order = sorted(ascending, reverse=True)
        else:
            order = ascending
        bins = _reference_first_fit(order, pack_size)
        handed = {n: np.array(by_length[n])[np.random.permutation(len(by_length[n]))].tolist()
                  for n in range(pack_size + 1) if n in by_length}
    finally:
        np.random.set_state(state)
    return [[handed[n].pop() for n in b] for b in bins]


@pytest.mark.parametrize("algorithm", ["first_fit", "first_fit_decreasing", "first_fit_shuffle"])
def test_pack_indices_gives_megatron_pipeline_bins(algorithm):
    rng = np.random.default_rng(5)
    for trial in range(300 if algorithm == "first_fit_shuffle" else 100):
        pack_size = int(rng.choice([16, 64, 2048]))
        lengths = rng.integers(1, pack_size + 1, rng.integers(1, 120)).tolist()
        if trial % 3 == 0:  # many equal lengths: which item fills which slot is the second draw
            lengths = rng.integers(1, 6, len(lengths)).tolist()
        seed = int(rng.integers(0, 2**31))
        assert pack_indices(lengths, pack_size, algorithm, seed) == _megatron_pipeline(
            lengths, pack_size, algorithm, seed), (lengths, pack_size, seed)


def test_pack_sequences_matches_megatron_prepare_on_their_seed_test():
    # Megatron-Bridge test_configured_seed_controls_offline_packing: runtime lengths (6, 6, 4, 4),
    # pack 10, seed 777, first_fit_shuffle
    seqs = [(np.array([i * 10 + t for t in range(n + 1)]), np.ones(n + 1, np.int8)) for i, n in enumerate((6, 6, 4, 4))]
    result = pack_sequences(seqs, pack_size=10, algorithm="first_fit_shuffle", seed=777)
    expected = _megatron_pipeline([6, 6, 4, 4], 10, "first_fit_shuffle", 777)
    assert [r["input_ids"].tolist() for r in result.rows] == [
        np.concatenate([seqs[i][0] for i in b]).tolist() for b in expected]
    before = np.random.get_state()[1].copy()
    pack_sequences(seqs, pack_size=10, seed=777)
    assert np.array_equal(np.random.get_state()[1], before)  # no global RNG


def test_pack_sequences_pads_each_sequence_for_context_parallelism():
    # Megatron-Bridge test_tokenize_dataset_caps_runtime_padding_target_to_pack_size: stored lengths
    # 16, 17, 20, 21, max_seq_length 16, multiple 8 -> every stored sequence is 17 long
    seqs = [(np.arange(n) + 100, np.ones(n, np.int8)) for n in (16, 17, 20, 21)]
    cut = pack_sequences(seqs, 16, "first_fit", overlong="truncate", pad_seq_to_mult=8, pad_id=2)
    assert cut.truncated == 2
    stored = [np.diff([*r["seq_start_id"], len(r["input_ids"])]).tolist() for r in cut.rows]
    assert sorted(sum(stored, [])) == [17, 17, 17, 17]
    assert pack_sequences(seqs, 16, pad_seq_to_mult=8, pad_id=2).skipped == 2
    # ... test_tokenize_dataset_ceil_uses_runtime_length_not_stored_length: 17 and 18 -> 17 and 25
    seqs = [(np.arange(n) + 100, np.ones(n, np.int8)) for n in (17, 18)]
    rows = pack_sequences(seqs, 40, "first_fit", pad_seq_to_mult=8, pad_id=2).rows
    assert [np.diff([*r["seq_start_id"], len(r["input_ids"])]).tolist() for r in rows] == [[17, 25]]
    padded = rows[0]["input_ids"][17:].tolist()
    assert padded == list(range(100, 118)) + [2] * 7
    assert rows[0]["loss_mask"][17:].tolist() == [1] * 17 + [0] * 8  # no loss on padding
    # and the collate finds the real lengths again
    out = collate_packed([{"input_ids": rows[0]["input_ids"], "loss_mask": rows[0]["loss_mask"],
                           "seq_boundaries": [0, 17, 42]}], eos_id=2, max_seq_length=40, pad_seq_to_mult=8,
                         return_tensors="numpy")
    assert out["cu_seqlens_q_padded"].tolist() == [[0, 16, 40]]
    assert out["cu_seqlens_q"].tolist() == [[0, 16, 34]]  # up to the last non-EOS token (these have no EOS)
    with pytest.raises(ValueError, match="needs pad_id"):
        pack_sequences(seqs, 40, pad_seq_to_mult=8)
    with pytest.raises(ValueError, match="pad_seq_to_mult must be a positive int"):
        PackingConfig(pad_seq_to_mult=0)
    assert PackingConfig(pad_seq_to_mult=8).fingerprint_identity() != PackingConfig().fingerprint_identity()
    assert PackingConfig(pad_seq_to_mult=8).pack_kwargs() == {"pad_seq_to_mult": 8, "pad_id": ByteTokenizer.EOS}
    assert PackingConfig().pack_kwargs() == {}


def test_tokenizers_and_chat_template_tokenizers():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(["hello world, this is python text"] * 20,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "</s>"]))
    wrapped = chat_tokenizer(tok)
    ids, mask = wrapped.encode_chat(CHAT)
    assert ids[-1] == wrapped.eos_id == tok.token_to_id("</s>")
    assert any(mask) and not all(mask) and mask[-1]

    class Templated:  # the shape of a transformers tokenizer with a chat template
        eos_token_id = 99
        chat_template = "{role}:{content};"

        def apply_chat_template(self, messages, tokenize=True):
            return [ord(c) for m in messages for c in f"{m['role'][0]}:{m['content']};"]

        def get_vocab(self):
            return {"a": 1}

    ids, mask = chat_tokenizer(Templated()).encode_chat(CHAT)
    assert ids == [ord(c) for c in "u:hi;a:yo;"] + [99]
    assert mask == [False] * 5 + [True] * 5 + [True]


def test_tokenizer_identity_is_in_the_fingerprint():
    a = sds.load_builder("python_docs_sft", packing=PackingConfig(pack_size=1024)).fingerprint()
    b = sds.load_builder("python_docs_sft", packing=PackingConfig(pack_size=1024, loss_on="all")).fingerprint()
    c = sds.load_builder("python_docs_sft", packing=PackingConfig(pack_size=2048)).fingerprint()
    assert len({a, b, c}) == 3
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models

    t1 = tokenizers.Tokenizer(models.WordLevel({"a": 0, "</s>": 1}, unk_token="a"))
    t2 = tokenizers.Tokenizer(models.WordLevel({"a": 0, "b": 2, "</s>": 1}, unk_token="a"))
    f1 = sds.load_builder("python_docs_sft", packing=PackingConfig(tokenizer=t1)).fingerprint()
    f2 = sds.load_builder("python_docs_sft", packing=PackingConfig(tokenizer=t2)).fingerprint()
    assert f1 != f2


# -- builders, layouts and PackedSFTDataset -------------------------------------------------------
@pytest.mark.parametrize("storage_format", ["parquet", "arrow", "lance"])
def test_python_docs_sft_packs_in_every_layout(storage_format):
    ds = sds.load_dataset("python_docs_sft", split="test", storage_format=storage_format,
                          packing=PackingConfig(pack_size=2048, algorithm="best_fit_decreasing"))
    meta = ds.cache_metadata[0]
    assert meta.extra["pack_metadata"]["pack_size"] == 2048
    assert (ds.cache_dirs[0] / "2048_metadata.jsonl").is_file()
    packs = PackedSFTDataset(ds, eos_id=ByteTokenizer.EOS)
    assert len(packs) == len(ds) and packs.collate_settings["max_seq_length"] == 2048
    item = packs[0]
    assert item["input_ids"].dtype == np.int32 and item["seq_boundaries"][0] == 0
    assert item["seq_boundaries"][-1] == len(item["input_ids"])
    batch = packs.collate_fn([packs[i] for i in range(min(3, len(packs)))])
    assert batch["tokens"].shape[1] <= 2048


def test_packed_parquet_is_plain_parquet_for_megatron_and_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    ds = sds.load_dataset("python_docs_sft", split="test", storage_format="parquet",
                          packing=PackingConfig(pack_size=1024))
    files = sorted(ds.cache_dirs[0].glob("*.idx.parquet"))
    assert files
    # Megatron-Bridge's reader: read a row group, to_pylist, index a row
    rows = pq.ParquetFile(files[0]).read_row_group(0).to_pylist()
    assert set(rows[0]) == {"input_ids", "loss_mask", "seq_start_id"} and rows[0]["seq_start_id"][0] == 0
    count = duckdb.sql(f"select count(*) from '{files[0]}'").fetchall()[0][0]
    assert count == len(ds)
    sizes = [pq.ParquetFile(f).metadata.row_group(0).total_byte_size for f in files]
    assert max(sizes) < 3 << 20  # row groups are sized in bytes (~1 MiB), not by a thousand rows
    meta = json.loads((ds.cache_dirs[0] / "1024_metadata.jsonl").read_text())
    assert isinstance(meta, list) and meta[0]["pack_size"] == 1024


def test_packed_dataset_reads_megatron_files_with_any_int_types(tmp_path):
    table = pa.table({
        "input_ids": pa.array([[1, 2, 3, 4, 5], [6, 7, 8]], pa.list_(pa.int64())),
        "loss_mask": pa.array([[0, 1, 1, 0, 1], [1, 1, 0]], pa.list_(pa.int32())),
        "seq_start_id": pa.array([[0, 3], [0]], pa.list_(pa.int64())),
    })
    path = tmp_path / "training_8.idx.parquet"
    pq.write_table(table, path)
    (tmp_path / "8_metadata.jsonl").write_text(json.dumps([{"pack_size": 8, "max_samples_per_bin": 2,
                                                            "dataset_max_seqlen": 4, "min_packed_seqlen": 2}]))
    packs = PackedSFTDataset(str(tmp_path), eos_id=0)
    assert packs[0]["seq_boundaries"].tolist() == [0, 3, 5]
    assert packs.collate_settings["max_seq_length"] == 8
    assert packs[-1]["loss_mask"].tolist() == [0, 0, 0]  # negative index: the same pack, no loss
    assert packs[1]["loss_mask"].tolist() == [1, 1, 0]
    out = write_packed_parquet(packs, tmp_path / "copy" / "again", pack_metadata=packs.pack_metadata[0])
    again = PackedSFTDataset(out, eos_id=0)
    assert again[0]["input_ids"].tolist() == [1, 2, 3, 4, 5] and again.pack_metadata[0]["pack_size"] == 8


def test_nemo_npy_needs_allow_pickle(tmp_path):
    rows = np.array([{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 0], "seq_start_id": [0]},
                     {"input_ids": [4, 5, 6, 7], "loss_mask": [1, 1, 1, 0], "seq_start_id": [0, 2]}], dtype=object)
    path = tmp_path / "packed_8.npy"
    np.save(path, rows, allow_pickle=True)
    with pytest.raises(StableDatasetsError, match="pickled object array"):
        PackedSFTDataset(path)
    packs = PackedSFTDataset(path, allow_pickle=True)
    assert len(packs) == 2 and packs[1]["seq_boundaries"].tolist() == [0, 2, 4]


def test_samples_mapping_epochs_and_own_rng(tmp_path):
    ds = sds.load_dataset("python_docs_sft", split="test", packing=PackingConfig(pack_size=1024))
    n = len(ds)
    state = np.random.get_state()
    packs = PackedSFTDataset(ds, max_num_samples=2 * n + 3, seed=5)
    assert np.array_equal(np.random.get_state()[1], state[1])
    mapping = packs.samples_mapping
    assert len(packs) == 2 * n + 3
    assert sorted(mapping[:n]) == list(range(n)) and sorted(mapping[n:2 * n]) == list(range(n))
    assert np.array_equal(mapping, PackedSFTDataset(ds, max_num_samples=2 * n + 3, seed=5).samples_mapping)
    assert not np.array_equal(mapping, PackedSFTDataset(ds, max_num_samples=2 * n + 3, seed=6).samples_mapping)


@pytest.mark.parametrize(("column", "values", "message"), [
    ("loss_mask", [[1, 1]], r"loss_mask length \(2\) != input_ids length \(3\)$"),
    ("seq_start_id", [[1]], r"seq_start_id must start with 0, got \[1\]$"),
    ("seq_start_id", [[0, 2, 1]], "seq_start_id is not non-decreasing at index 2: 2 > 1$"),
    ("seq_start_id", [[0, 3]], r"seq_start_id\[1\]=3 >= len\(input_ids\)=3$"),
])
def test_bad_rows_are_named(tmp_path, column, values, message):
    data = {"input_ids": [[1, 2, 3]], "loss_mask": [[0, 1, 1]], "seq_start_id": [[0]]}
    data[column] = values
    path = tmp_path / "bad.idx.parquet"
    pq.write_table(pa.table({k: pa.array(v, pa.list_(pa.int32())) for k, v in data.items()}), path)
    with pytest.raises(PackedRowError, match=message):
        PackedSFTDataset(path)[0]


def test_sft_builder_reads_jsonl_and_parquet(tmp_path):
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in [
        {"messages": CHAT},
        {"prompt": "2+2?", "response": "4"},
        {"conversations": [{"from": "human", "value": "hey"}, {"from": "gpt", "value": "hello"}]},
    ]) + "\n")
    parquet = tmp_path / "chat.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": "a", "response": "b"}]), parquet)
    ds = sds.load_dataset("sft", data_files={"train": [str(jsonl)], "test": str(parquet)})
    assert ds.num_rows == {"train": 3, "test": 1}
    assert ds["train"][1]["messages"] == [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    assert ds["train"][2]["messages"][1] == {"role": "assistant", "content": "hello"}
    packed = sds.load_dataset("sft", split="train", data_files=str(jsonl), packing=PackingConfig(pack_size=64))
    assert len(packed) == 1 and PackedSFTDataset(packed)[0]["seq_boundaries"].tolist()[:1] == [0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "no chat here"}) + "\n")
    with pytest.raises(ValueError, match="record 'bad.jsonl:0': a chat record needs 'messages'"):
        sds.load_dataset("sft", split="train", data_files=str(bad))


def test_every_algorithm_builds():
    for algorithm in ALGORITHMS:
        ds = sds.load_dataset("python_docs_sft", split="test", packing=PackingConfig(pack_size=4096,
                                                                                     algorithm=algorithm))
        assert ds.cache_metadata[0].extra["pack_metadata"]["packing_efficiency"] > 50


# -- sampler ------------------------------------------------------------------------------------
from stable_datasets.sft import PackedSampler, row_group_starts  # noqa: E402


def test_sampler_is_deterministic_disjoint_and_uses_its_own_rng():
    state = np.random.get_state()
    ranks = [list(PackedSampler(103, seed=1, rank=r, world_size=4)) for r in range(4)]
    assert np.array_equal(np.random.get_state()[1], state[1])
    flat = sum(ranks, [])
    assert all(len(r) == 25 for r in ranks) and len(set(flat)) == 100
    assert ranks[2] == list(PackedSampler(103, seed=1, rank=2, world_size=4))
    sampler = PackedSampler(103, seed=1)
    first, second = list(sampler), list(sampler)  # epochs move on by themselves
    assert first != second and sorted(first) == sorted(second)
    padded = PackedSampler(10, world_size=4, drop_last=False, rank=3)
    assert len(list(padded)) == len(padded) == 3


def test_sampler_resumes_mid_epoch():
    reference = PackedSampler(50, seed=7, rank=1, world_size=2)
    full = list(reference)
    run = PackedSampler(50, seed=7, rank=1, world_size=2)
    it = iter(run)
    head = [next(it) for _ in range(9)]
    saved = run.state_dict()
    resumed = PackedSampler(50, seed=7, rank=1, world_size=2)
    resumed.load_state_dict(saved)
    assert head + list(resumed) == full
    assert saved["consumed"] == 18  # global: both ranks handed out 9 indices
    elastic = [PackedSampler(50, seed=7, rank=r, world_size=4) for r in range(4)]  # resumed on 4 ranks
    for sampler in elastic:
        sampler.load_state_dict(saved)
    rest = sorted(i for sampler in elastic for i in sampler)
    before = [PackedSampler(50, seed=7, rank=r, world_size=2).rank_order()[:9].tolist() for r in range(2)]
    assert sorted(rest + before[0] + before[1]) == list(range(50))  # every index once over the epoch
    with pytest.raises(ValueError, match="saved sampler had seed=7, this one has 8"):
        PackedSampler(50, seed=8, world_size=4).load_state_dict(saved)


def test_locality_aware_shuffle_stays_within_windows(tmp_path):
    table = pa.table({"input_ids": pa.array([[i, i] for i in range(100)], pa.list_(pa.int32())),
                      "loss_mask": pa.array([[1, 1]] * 100, pa.list_(pa.int8())),
                      "seq_start_id": pa.array([[0]] * 100, pa.list_(pa.int32()))})
    path = tmp_path / "p.idx.parquet"
    pq.write_table(table, path, row_group_size=10)
    packs = PackedSFTDataset(path, cache_row_groups=2)
    starts = row_group_starts(packs)
    assert starts.tolist() == list(range(0, 100, 10))
    order = list(PackedSampler(len(packs), seed=3, locality_starts=starts, window_row_groups=2))
    assert sorted(order) == list(range(100)) and order != list(range(100))
    windows = [order[i:i + 20] for i in range(0, 100, 20)]
    groups = [sorted({x // 10 for x in w}) for w in windows]
    assert all(len(g) == 2 for g in groups)  # each run of 20 is the packs of exactly 2 whole row groups
    assert sorted(sum(groups, [])) == list(range(10))  # every row group lands in exactly one window
    for index in order:
        packs[index]
    source = packs._source
    assert source.misses == 10  # every row group decoded exactly once


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_packed_dataset_in_dataloader_workers(method):
    torch = pytest.importorskip("torch")
    import multiprocessing

    ds = sds.load_dataset("python_docs_sft", split="test", storage_format="parquet",
                          packing=PackingConfig(pack_size=1024))
    packs = PackedSFTDataset(ds.cache_dirs[0], eos_id=ByteTokenizer.EOS)
    packs[0]  # open the reader in the parent first
    sampler = PackedSampler(len(packs), seed=0)
    loader = torch.utils.data.DataLoader(packs, batch_size=4, sampler=sampler, collate_fn=packs.collate_fn,
                                         num_workers=2, multiprocessing_context=multiprocessing.get_context(method))
    counts = [b["tokens"].shape[0] for b in loader]
    assert sum(counts) == len(packs)
    first = next(iter(torch.utils.data.DataLoader(packs, batch_size=2, collate_fn=packs.collate_fn)))
    assert first["tokens"].dtype == torch.int64 and first["cu_seqlens_q"].dtype == torch.int32


# -- opening Megatron-Bridge files ----------------------------------------------------------------
def _pack_rows(first: int, count: int) -> list[dict]:
    return [{"input_ids": np.arange(first + i, first + i + 4, dtype=np.int32), "loss_mask": np.ones(4, np.int8),
             "seq_start_id": np.array([0, 2], np.int32)} for i in range(count)]


def test_literal_path_with_glob_characters_and_metadata_by_pack_size(tmp_path):
    literal = write_packed_parquet(_pack_rows(100, 3), tmp_path / "shard_[01].idx.parquet")
    write_packed_parquet(_pack_rows(0, 5), tmp_path / "shard_0.idx.parquet")  # what the glob would match
    packs = PackedSFTDataset(str(literal), eos_id=2)
    assert len(packs) == 3 and packs[0]["input_ids"].tolist() == [100, 101, 102, 103]
    folder = tmp_path / "packed"
    for size in (2048, 4096):
        write_packed_parquet(_pack_rows(size, 2), folder / f"training_{size}.idx.parquet",
                             pack_metadata={"pack_size": size, "max_samples_per_bin": size // 1024,
                                            "dataset_max_seqlen": 9, "min_packed_seqlen": 3})
    assert sorted(p.name for p in folder.glob("*_metadata.jsonl")) == ["2048_metadata.jsonl", "4096_metadata.jsonl"]
    big = PackedSFTDataset(str(folder / "training_4096.idx.parquet"), eos_id=2)
    assert big.collate_settings["max_seq_length"] == 4096 and big.pack_metadata[0]["max_samples_per_bin"] == 4
    small = PackedSFTDataset(folder / "training_2048.idx.parquet", eos_id=2)
    assert small.collate_settings["max_seq_length"] == 2048


def test_bad_files_are_value_errors_that_say_which(tmp_path):
    from stable_datasets.sft import PackedFilesError, PackedFilesNotFoundError

    no_mask = tmp_path / "no_mask.idx.parquet"
    pq.write_table(pa.table({"input_ids": [[1, 2]], "seq_start_id": [[0]]}), no_mask)
    with pytest.raises(PackedFilesError, match=r"no_mask.idx.parquet has no column\(s\) \['loss_mask'\]"):
        PackedSFTDataset(no_mask)
    empty = tmp_path / "empty.idx.parquet"
    empty.write_bytes(b"")
    with pytest.raises(PackedFilesError, match=r"empty.idx.parquet is empty \(0 bytes\)"):
        PackedSFTDataset(empty)
    garbage = tmp_path / "garbage.idx.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(PackedFilesError, match="garbage.idx.parquet is not a readable Parquet file"):
        PackedSFTDataset(garbage)
    no_rows = tmp_path / "none" / "zero.idx.parquet"
    no_rows.parent.mkdir()
    pq.write_table(packed_table([]), no_rows)
    with pytest.raises(PackedFilesError, match="hold no packs"):
        PackedSFTDataset(no_rows)
    for target, message in [(tmp_path / "missing.idx.parquet", "missing.idx.parquet does not exist"),
                            (tmp_path / "absent_*.parquet", "no files match the pattern"),
                            (tmp_path / "vacant", "folder .*vacant holds no")]:
        if target.name == "vacant":
            target.mkdir()
        with pytest.raises(PackedFilesNotFoundError, match=message) as caught:
            PackedSFTDataset(str(target))
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, FileNotFoundError)


def test_megatron_constructor_arguments(tmp_path):
    from types import SimpleNamespace

    path = write_packed_parquet(_pack_rows(10, 4), tmp_path / "data" / "training_16.idx.parquet")
    meta = tmp_path / "elsewhere.jsonl"
    meta.write_text(json.dumps([{"pack_size": 16, "max_samples_per_bin": 3, "dataset_max_seqlen": 3,
                                 "min_packed_seqlen": 3}]))
    packs = PackedSFTDataset(file_path=str(path), tokenizer=SimpleNamespace(eos_id=2), max_seq_length=8,
                             return_cu_seqlen=False, pack_metadata_file_path=str(meta), seed=1234)
    assert packs.collate_settings["eos_id"] == 2 and packs.pack_metadata[0]["max_samples_per_bin"] == 3
    batch = packs.collate_fn([packs[0], packs[1]])
    assert "cu_seqlens_q" not in batch
    assert tuple(batch["attention_mask"].shape) == (2, 1, 8, 8)
    assert batch["attention_mask"][0, 0, 0].tolist() == [False] + [True] * 7  # causal: True is masked
    with_cu = PackedSFTDataset(file_path=str(path), tokenizer=SimpleNamespace(eos_id=2), max_seq_length=8,
                               pad_cu_seqlens=True, pad_to_max_length=True, pack_metadata_file_path=str(meta))
    assert tuple(with_cu.collate_fn([with_cu[0]])["cu_seqlens_q"].shape) == (1, 5)  # max_samples_per_bin + 2
    no_eos = PackedSFTDataset(path, tokenizer=object(), max_seq_length=8)  # (the packs read; the collate needs it)
    with pytest.raises(ValueError, match=r"collate_fn needs eos_id= \(tokenizer object has no eos_id\)"):
        no_eos.collate_fn([no_eos[0]])
    with pytest.raises(TypeError, match="paths= or file_path="):
        PackedSFTDataset(path, file_path=path)


def test_pickling_keeps_reader_settings_and_never_unpickles_what_the_user_did_not_allow(tmp_path):
    import pickle

    folder = tmp_path / "packs"
    write_packed_parquet(_pack_rows(0, 6), folder / "training_16.idx.parquet", row_group_bytes=40)
    packs = PackedSFTDataset(str(folder), cache_row_groups=3, max_open_files=2, eos_id=2)
    packs[0]
    copy = pickle.loads(pickle.dumps(packs))
    assert copy._source.capacity == 3 and copy._source.max_open_files == 2 and copy.allow_pickle is False
    assert copy[5]["input_ids"].tolist() == [5, 6, 7, 8]
    # the folder's Parquet file is swapped for a pickled .npy between pickling and unpickling
    blob = pickle.dumps(packs)
    for f in folder.iterdir():
        f.unlink()
    marker = tmp_path / "code_ran"
    evil = np.array([_RunsCode(str(marker))], dtype=object)
    np.save(folder / "training_16.npy", evil, allow_pickle=True)
    restored = pickle.loads(blob)
    with pytest.raises(ValueError, match="training_16.idx.parquet can no longer be read"):
        restored[1]
    assert not marker.exists()


class _RunsCode:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_thousands_of_shards_under_a_small_file_limit(tmp_path):
    import subprocess
    import sys
    import textwrap

    folder = tmp_path / "shards"
    folder.mkdir()
    table = packed_table(_pack_rows(0, 1))
    for i in range(5000):
        pq.write_table(table.set_column(0, "input_ids", pa.array([[i, i + 1, i + 2, i + 3]], pa.list_(pa.int32()))),
                       folder / f"shard_{i:05d}.idx.parquet")
    code = textwrap.dedent(f"""
        import resource, numpy as np
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        from stable_datasets.sft import PackedSFTDataset
        packs = PackedSFTDataset({str(folder)!r}, max_num_samples=5000, seed=3)
        firsts = [int(packs[i]["input_ids"][0]) for i in range(len(packs))]
        assert sorted(firsts) == list(range(5000)), firsts[:10]
        assert firsts == packs.samples_mapping.tolist()
        print("ok", len(packs._source._handles))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ok", "64"]


def test_row_groups_by_rows_with_page_index_and_delta_encoded_ids(tmp_path):
    rows = _pack_rows(0, 50)
    path = write_packed_parquet(rows, tmp_path / "training_16.idx.parquet", row_group_rows=3)
    meta = pq.read_metadata(path)
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [3] * 16 + [2]
    ids = meta.row_group(0).column(0)
    assert ids.path_in_schema == "input_ids.list.element" and "DELTA_BINARY_PACKED" in ids.encodings
    assert ids.has_offset_index and ids.has_column_index and ids.is_stats_set
    packs = PackedSFTDataset(path)
    assert [packs[i]["input_ids"][0] for i in (49, 0, 25)] == [49, 0, 25]
    # the layout option: a cache whose row groups hold at most 2 rows
    ds = sds.load_dataset("python_docs_sft", split="test", storage_format="parquet",
                          packing=PackingConfig(pack_size=1024), layout_options={"row_group_rows": 2})
    files = sorted(ds.cache_dirs[0].glob("*.idx.parquet"))
    metas = [pq.read_metadata(f) for f in files]
    assert max(m.row_group(g).num_rows for m in metas for g in range(m.num_row_groups)) == 2
    assert PackedSFTDataset(ds.cache_dirs[0])[len(ds) - 1]["input_ids"].tolist() == ds[len(ds) - 1]["input_ids"]


def test_sft_builder_pads_sequences_for_context_parallelism():
    ds = sds.load_dataset("python_docs_sft", split="test", packing=PackingConfig(pack_size=1024, pad_seq_to_mult=8))
    for i in range(min(len(ds), 20)):
        row = ds[i]
        stored = np.diff([*row["seq_start_id"], len(row["input_ids"])])
        assert ((stored - 1) % 8 == 0).all()


# -- found by hostile6, the fix belongs to stable_datasets/sft/ (owned by another helper) ---------
def test_an_empty_chat_file_is_an_error_naming_it(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError) as info:
        sds.load_dataset("sft", split="train", data_files=str(tmp_path / "empty.jsonl"),
                         packing=PackingConfig(pack_size=128), cache_dir=tmp_path / "cache")
    assert "empty.jsonl" in str(info.value) and "pack size" not in str(info.value)
