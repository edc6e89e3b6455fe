"""GPTSFTPackedParquetBlendDataset (issue 38 item 5b): Megatron-Bridge's weighted packed blend.

The counts ([3, 1] over 12 samples give [9, 3]), scale-free weights and same indices for the
same seed are the issue's (Megatron-Bridge's) expected values; this snapshot of Megatron-Bridge
has no blend class, so the rest follows Megatron-Core's BlendedDataset rule it names.
"""

from __future__ import annotations

import numpy as np
import pytest

from stable_datasets.sft import write_packed_parquet
from stable_datasets.sft.blend import GPTSFTPackedParquetBlendDataset


class _Tokenizer:
    eos_id = 0


def _source(path, first_id, packs):
    """`packs` packs of 4 tokens; pack p holds ids first_id + 10 p ..., so every item names its source and pack."""
    rows = [{"input_ids": [first_id + 10 * p + t for t in range(4)], "loss_mask": [1, 1, 1, 0], "seq_start_id": [0]}
            for p in range(packs)]
    return str(write_packed_parquet(rows, path, pack_ids=False))


@pytest.fixture
def sources(tmp_path):
    return [_source(tmp_path / "web.idx.parquet", 1000, 5), _source(tmp_path / "code.idx.pq", 5000, 4)]


def test_weights_3_1_over_12_samples_give_9_and_3(sources):
    blend = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8)
    assert len(blend) == 12
    assert blend.counts == [9, 3]
    assert blend.source_counts() == [9, 3]
    from_source = [blend[k]["input_ids"][0] // 1000 for k in range(12)]
    assert sorted(from_source) == [1] * 9 + [5] * 3
    # Megatron-Core's greedy interleaving: the lagging source goes next, the first wins a tie
    assert blend.dataset_index.tolist() == [0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]


@pytest.mark.parametrize("weights", [[0.75, 0.25], [300, 100], [0.3, 0.1]])
def test_weights_are_scale_free(sources, weights):
    reference = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8, seed=7)
    scaled = GPTSFTPackedParquetBlendDataset(sources, weights, 12, _Tokenizer(), max_seq_length=8, seed=7)
    assert scaled.counts == [9, 3]
    assert scaled.indices() == reference.indices()


def test_same_seed_same_indices_each_source_drawn_by_epochs(sources):
    first = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8, seed=1234)
    again = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8, seed=1234)
    other = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8, seed=99)
    assert first.indices() == again.indices()
    assert [first[k] for k in range(12)] == [again[k] for k in range(12)]
    assert first.indices() != other.indices()
    web = [pack for source, pack in first.indices() if source == 0]
    assert sorted(web[:5]) == [0, 1, 2, 3, 4]  # the first epoch of 5 packs holds each once
    code = [pack for source, pack in first.indices() if source == 1]
    assert len(set(code)) == 3  # 3 of 4 packs, none twice within an epoch


def test_items_collate_as_their_source_and_negative_index_pads(sources):
    blend = GPTSFTPackedParquetBlendDataset(sources, [1, 1], 4, _Tokenizer(), max_seq_length=8)
    source, pack = blend.indices()[1]
    assert blend[1] == blend.datasets[source][blend.dataset_sample_index[1]]
    assert blend[1]["input_ids"] == [5000 + 10 * pack + t for t in range(4)]
    batch = blend.collate_fn([blend[0], blend[1]])
    assert batch["tokens"].tolist() == [blend[0]["input_ids"][:3] + [0] * 5, blend[1]["input_ids"][:3] + [0] * 5]
    assert blend[-1]["loss_mask"] == [0, 0, 0, 0]
    assert blend[-1]["input_ids"] == blend[len(blend) - 1]["input_ids"]
    with pytest.raises(IndexError, match="out of range for a blend of 4 packs"):
        blend[4]


def test_a_blend_refuses_mismatched_weights_and_sizes(sources):
    with pytest.raises(ValueError, match="one weight per source"):
        GPTSFTPackedParquetBlendDataset(sources, [1], 12, _Tokenizer())
    with pytest.raises(ValueError, match="positive finite"):
        GPTSFTPackedParquetBlendDataset(sources, [1, 0], 12, _Tokenizer())
    with pytest.raises(ValueError, match="num_samples must be a positive int"):
        GPTSFTPackedParquetBlendDataset(sources, [1, 1], 0, _Tokenizer())


@pytest.mark.parametrize("option", ["index_mapping_dir", "cache_dir"])
def test_the_blending_index_is_kept_in_index_mapping_dir(sources, tmp_path, option):
    folder = tmp_path / "index"
    plain = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8)
    first = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8, **{option: folder})
    saved = sorted(folder.glob("blend-*.npy"))
    assert [p.name.split(".", 1)[1] for p in saved] == ["dataset_index.npy", "dataset_sample_index.npy"]
    stamps = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in saved]
    again = GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8, **{option: folder})
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in saved] == stamps  # loaded, not written again
    assert isinstance(again.dataset_index, np.memmap)
    assert first.indices() == again.indices() == plain.indices()
    assert [again[k] for k in range(12)] == [plain[k] for k in range(12)]


def test_index_mapping_dir_and_cache_dir_are_one_option(sources, tmp_path):
    with pytest.raises(ValueError, match="index_mapping_dir=.* and cache_dir=.* name the same option"):
        GPTSFTPackedParquetBlendDataset(sources, [3, 1], 12, _Tokenizer(), max_seq_length=8,
                                        index_mapping_dir=tmp_path / "a", cache_dir=tmp_path / "b")
