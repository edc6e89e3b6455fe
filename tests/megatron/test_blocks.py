"""Token blocks: the samples of Megatron-Core's own GPTDataset (its document, sample and shuffle indices and every
sample's tokens, labels and masks), served as a stream that resumes at every step on any world size."""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.errors import StateError
from stable_datasets.megatron import TokenBlocks, token_blocks, write_indexed_dataset
from stable_datasets.megatron.blocks import split_documents
from tests.megatron.megatron_oracle import config, megatron_datasets
from tests.streaming.resume_harness import failures_at_every_step, loader_failures


@pytest.fixture(scope="module")
def megatron():
    return megatron_datasets()


def corpus(path, n=57, seed=0):
    """n documents of 1 to 40 tokens ending in EOD 0, then three empty documents (Megatron skips them too)."""
    rng = np.random.default_rng(seed)
    docs = [[*rng.integers(1, 1000, int(rng.integers(0, 40))).tolist(), 0] for _ in range(n)] + [[]] * 3
    return write_indexed_dataset(docs, path).path_prefix


def megatron_gpt(m, prefix, seq_length, seed, num_samples, split, split_name, extra):
    """Megatron-Core's GPTDataset over `prefix` (its own IndexedDataset), indices built in a fresh cache folder."""
    indexed = m.indexed.IndexedDataset(prefix)
    first, last = split_documents(len(indexed), split, split_name)
    cfg = config(m, random_seed=seed, sequence_length=seq_length, split=split or "100,0,0",
                 path_to_cache=tempfile.mkdtemp(), add_extra_token_to_sequence=extra)
    return m.gpt.GPTDataset(indexed, prefix, np.arange(first, last, dtype=np.int32), num_samples,
                            m.Split[split_name], cfg)


def assert_same_samples(theirs, ours):
    np.testing.assert_array_equal(ours.document_index, theirs.document_index)
    np.testing.assert_array_equal(ours.sample_index, theirs.sample_index)
    np.testing.assert_array_equal(ours.shuffle_index, theirs.shuffle_index)
    assert len(ours) == len(theirs)
    for i in range(len(theirs)):
        a, b = theirs[i], ours[i]
        for key in ("tokens", "labels", "loss_mask", "position_ids"):
            np.testing.assert_array_equal(b[key], a[key].numpy(), err_msg=f"sample {i} {key}")


@pytest.mark.parametrize("seed", [0, 1234])
@pytest.mark.parametrize("seq_length", [2, 16])
@pytest.mark.parametrize("extra", [True, False])
@pytest.mark.parametrize("num_samples", [None, 171, 400])  # one epoch (at 16: 2 of 16); 2 (last apart) or 3; 7
@pytest.mark.parametrize("split, split_name", [(None, "train"), ("90,8,2", "train"), ("90,8,2", "valid")])
def test_the_samples_of_megatron_cores_gpt_dataset(tmp_path_factory, megatron, seed, seq_length, extra, num_samples,
                                                   split, split_name):
    prefix = corpus(tmp_path_factory.mktemp("c") / "corpus")
    theirs = megatron_gpt(megatron, prefix, seq_length, seed, num_samples, split, split_name, extra)
    ours = TokenBlocks(prefix, seq_length, seed=seed, num_samples=num_samples, split=split, split_name=split_name,
                       add_extra_token=extra)
    assert_same_samples(theirs, ours)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("extra", [True, False])
@pytest.mark.parametrize("num_samples", [None, 50, 130])
def test_a_validation_split_that_keeps_its_last_partial_sample(tmp_path, megatron, seed, extra, num_samples):
    """Megatron's drop_last_partial_validation_sequence=False: the last sample is padded with -1 (masked)."""
    prefix = corpus(tmp_path / "c", seed=seed)
    indexed = megatron.indexed.IndexedDataset(prefix)
    first, last = split_documents(len(indexed), "80,20,0", "valid")
    cfg = config(megatron, random_seed=seed, sequence_length=3, split="80,20,0", path_to_cache=str(tmp_path / "mc"),
                 add_extra_token_to_sequence=extra, drop_last_partial_validation_sequence=False)
    theirs = megatron.gpt.GPTDataset(indexed, prefix, np.arange(first, last, dtype=np.int32), num_samples,
                                     megatron.Split.valid, cfg)
    ours = TokenBlocks(prefix, 3, seed=seed, num_samples=num_samples, split="80,20,0", split_name="valid",
                       add_extra_token=extra, drop_last_partial=False)
    assert_same_samples(theirs, ours)


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=25), seq_length=st.integers(2, 12),
       seed=st.integers(0, 2**32 - 1), extra=st.booleans(), more=st.integers(0, 60))
def test_any_documents_give_megatron_cores_samples(megatron, lengths, seq_length, seed, extra, more):
    if sum(lengths) <= seq_length + 1:
        lengths = [*lengths, seq_length + 2]
    prefix = write_indexed_dataset([[(7 * i + j) % 500 for j in range(n)] for i, n in enumerate(lengths)],
                                   tempfile.mkdtemp() + "/docs").path_prefix
    one_epoch = (sum(lengths) - extra) // seq_length
    num_samples = one_epoch + more if more else None
    theirs = megatron_gpt(megatron, prefix, seq_length, seed, num_samples, None, "train", extra)
    assert_same_samples(theirs, TokenBlocks(prefix, seq_length, seed=seed, num_samples=num_samples,
                                            add_extra_token=extra))


def test_samples_cross_documents_with_the_shifted_label(tmp_path):
    prefix = write_indexed_dataset([[1, 2, 3], [4, 5], [6, 7, 8, 9]], tmp_path / "t").path_prefix
    blocks = TokenBlocks(prefix, 4, seed=0)
    assert len(blocks) == 2  # (9 tokens - 1) // 4
    texts = sorted(blocks.text(i).tolist() for i in range(2))
    assert blocks.tokens_per_epoch == 9 and blocks.num_epochs == 1
    joined = np.concatenate([blocks.tokens.get(int(d)) for d in blocks.document_index]).tolist()
    assert texts == sorted([joined[0:5], joined[4:9]])  # 4 + 1 tokens each, the extra one shared
    item = blocks[0]
    assert item["tokens"].tolist() == blocks.text(0)[:-1].tolist() and item["labels"].tolist() == \
        blocks.text(0)[1:].tolist()


def test_a_dataset_of_token_lists_gives_the_samples_of_its_indexed_file(tmp_path):
    docs = [[i] * (1 + i % 5) for i in range(1, 40)]
    ds = sds.StableDataset.from_dict({"input_ids": docs, "text": ["x"] * len(docs)}, cache_dir=tmp_path / "cache")
    prefix = write_indexed_dataset(docs, tmp_path / "same").path_prefix
    a, b = TokenBlocks(ds, 6, seed=3, num_samples=50), TokenBlocks(prefix, 6, seed=3, num_samples=50)
    assert len(a) == len(b) == 59  # every sample of the 3 epochs 50 need, as Megatron's len
    assert [a.text(i).tolist() for i in range(len(a))] == [b.text(i).tolist() for i in range(len(b))]


def test_too_few_tokens_and_bad_arguments_are_clear_errors(tmp_path):
    prefix = write_indexed_dataset([[1, 2]], tmp_path / "small").path_prefix
    with pytest.raises(ValueError, match=r"the train documents \[0, 1\) hold 2 tokens: too few"):
        TokenBlocks(prefix, 4, seed=0)  # one epoch of 2 tokens makes 0 samples of 4 (+1)
    with pytest.raises(ValueError, match="seq_length must be an int of at least 2"):
        TokenBlocks(prefix, 1, seed=0)
    with pytest.raises(ValueError, match=r"split '100,0,0' gives the valid split no documents"):
        TokenBlocks(prefix, 2, seed=0, num_samples=1, split="100,0,0", split_name="valid")


def _with_id(sample):  # module level: what the resume harness compares a sample by (its tokens)
    return {"id": sample["tokens"].tolist()}


@pytest.mark.parametrize("placement", [{}, {"rank": 1, "world_size": 3}])
def test_the_stream_resumes_at_every_step(tmp_path, placement):
    prefix = corpus(tmp_path / "c", n=12)
    stream = token_blocks(prefix, 8, seed=5, num_samples=30, **placement)
    blocks = TokenBlocks(prefix, 8, seed=5, num_samples=30)
    world, rank = placement.get("world_size", 1), placement.get("rank", 0)
    n = len(blocks)  # the last step of the ranks is padded with the first samples again (drop_last=False)
    assert [s["tokens"].tolist() for s in stream] == [blocks[(rank + k * world) % n]["tokens"].tolist()
                                                      for k in range(-(-n // world))]
    assert failures_at_every_step(lambda: token_blocks(prefix, 8, seed=5, num_samples=30, **placement)
                                  .map(_with_id)) == []


def test_a_state_saved_on_two_ranks_resumes_on_three(tmp_path):
    prefix = corpus(tmp_path / "c", n=12)
    blocks = TokenBlocks(prefix, 8, seed=5)
    streams = [token_blocks(prefix, 8, seed=5, rank=r, world_size=2) for r in range(2)]
    seen, its = [], [iter(s) for s in streams]
    for _ in range(3):
        for it in its:
            seen.append(next(it)["tokens"].tolist())
    saved = streams[0].state_dict()
    assert saved["consumed"] == 6
    rest = []
    for r in range(3):
        fresh = token_blocks(prefix, 8, seed=5, rank=r, world_size=3)
        fresh.load_state_dict(saved)
        rest.append([s["tokens"].tolist() for s in fresh])
    served = seen + [rest[i % 3][i // 3] for i in range(sum(map(len, rest)))]
    n = len(blocks)  # every sample once, in Megatron's order; the last step padded with the first samples
    assert served == [blocks[i % n]["tokens"].tolist() for i in range(6 + 3 * -(-(n - 6) // 3))]


def test_a_state_of_other_blocks_is_refused(tmp_path):
    prefix = corpus(tmp_path / "c", n=12)
    stream = token_blocks(prefix, 8, seed=5)
    next(iter(stream))
    other = token_blocks(prefix, 8, seed=6)
    with pytest.raises(StateError, match="cannot resume: the saved stream read another dataset"):
        other.load_state_dict(stream.state_dict())


def _rows(rows):  # module level: DataLoader workers pickle it
    return rows


@pytest.mark.parametrize("loader", ["streaming", "stateful"])
def test_two_dataloader_workers_resume_every_batch(tmp_path, loader):
    pytest.importorskip("torch")
    from stable_datasets.streaming import StreamingDataLoader  # local: needs torch (skipped above without it)

    prefix = corpus(tmp_path / "c", n=12)

    def make_loader():
        stream = token_blocks(prefix, 8, seed=5, num_samples=30, loader_batch_size=4).map(_with_id)
        if loader == "streaming":
            return StreamingDataLoader(stream, batch_size=4, num_workers=2, collate_fn=_rows)
        stateful = pytest.importorskip("torchdata.stateful_dataloader")
        return stateful.StatefulDataLoader(stream, batch_size=4, num_workers=2, collate_fn=_rows)

    assert loader_failures(make_loader, [0, 1, 3, 6]) == []


def test_a_state_resumes_over_a_copy_of_the_files_elsewhere(tmp_path):
    prefix = corpus(tmp_path / "here" / "c", n=12)
    stream = token_blocks(prefix, 8, seed=5)
    it = iter(stream)
    next(it), next(it)
    (tmp_path / "there").mkdir()
    for suffix in (".bin", ".idx"):
        shutil.copy(prefix + suffix, tmp_path / "there" / ("c" + suffix))
    moved = token_blocks(tmp_path / "there" / "c", 8, seed=5)
    moved.load_state_dict(stream.state_dict())
    assert next(iter(moved))["tokens"].tolist() == TokenBlocks(prefix, 8, seed=5)[2]["tokens"].tolist()
