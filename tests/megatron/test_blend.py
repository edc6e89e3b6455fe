"""Blends of token blocks: Megatron-Core's BlendedDataset counts (weights normalised, per-source sample counts with
its surplus) and interleaving (dataset_index, dataset_sample_index), and its samples, checked against
megatron-core's own BlendedMegatronDatasetBuilder; served as a stream that resumes at every step."""

from __future__ import annotations

import numpy as np
import pytest

from stable_datasets.megatron import BlendedBlocks, blended_token_blocks, write_indexed_dataset
from stable_datasets.megatron.blend import blending_indices, samples_per_source
from tests.megatron.megatron_oracle import config, megatron_datasets
from tests.streaming.resume_harness import failures_at_every_step


@pytest.fixture(scope="module")
def megatron():
    return megatron_datasets()


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory):
    folder, rng = tmp_path_factory.mktemp("blend"), np.random.default_rng(1)
    out = []
    for n in (40, 25, 60):
        docs = [[*rng.integers(1, 1000, int(rng.integers(1, 30))).tolist(), 0] for _ in range(n)]
        out.append(write_indexed_dataset(docs, folder / f"p{n}").path_prefix)
    return out


@pytest.mark.parametrize("weights", [[0.3, 0.7], [3, 1], [1, 1, 2], [0.2, 0.5, 0.3]])
@pytest.mark.parametrize("size", [10, 97, 500])
@pytest.mark.parametrize("seed, split", [(0, "100,0,0"), (5, "90,10,0")])
def test_the_blend_of_megatron_cores_builder(megatron, prefixes, weights, size, seed, split):
    sources = prefixes[:len(weights)]
    cfg = config(megatron, random_seed=seed, sequence_length=8, blend=(sources, weights), split=split,
                 path_to_cache=None)  # (a BlendedDataset cache needs torch.distributed; GPTDataset caches by prefix)
    theirs = megatron.builder.BlendedMegatronDatasetBuilder(megatron.gpt.GPTDataset, [size, 0, 0], lambda: True,
                                                            cfg).build()[0]
    ours = BlendedBlocks(sources, weights, 8, seed=seed, size=size, split=split)
    np.testing.assert_array_equal(ours.dataset_index, theirs.dataset_index)
    np.testing.assert_array_equal(ours.dataset_sample_index, theirs.dataset_sample_index)
    assert [len(d) for d in ours.datasets] == [len(d) for d in theirs.datasets]
    for i in range(len(theirs)):
        a, b = theirs[i], ours[i]
        assert int(a["dataset_id"]) == b["dataset_id"]
        np.testing.assert_array_equal(b["tokens"], a["tokens"].numpy(), err_msg=f"sample {i}")
        np.testing.assert_array_equal(b["labels"], a["labels"].numpy(), err_msg=f"sample {i}")


def test_counts_follow_the_normalised_weights():
    assert samples_per_source([3, 1], 12) == [9, 3] and samples_per_source([0.75, 0.25], 12) == [9, 3]
    assert samples_per_source([0.3, 0.7], 10) == [3, 7]
    assert samples_per_source([0.3, 0.7], 1000, 0.005) == [302, 704]  # what each source is built with
    index, sample = blending_indices([3, 1], 8)
    assert index.tolist() == [0, 1, 0, 0, 0, 1, 0, 0] and sample.tolist() == [0, 0, 1, 2, 3, 1, 4, 5]
    assert blending_indices([30, 10], 8)[0].tolist() == index.tolist()  # scale-free


def test_bad_blends_are_clear_errors(prefixes):
    with pytest.raises(ValueError, match=r"one weight per source: 2 sources, 1 weights"):
        BlendedBlocks(prefixes[:2], [1], 8, seed=0, size=10)
    with pytest.raises(ValueError, match=r"blend weights must be positive finite numbers, got \[1, 0\]"):
        BlendedBlocks(prefixes[:2], [1, 0], 8, seed=0, size=10)


def _with_id(sample):
    return {"id": [sample["dataset_id"], *sample["tokens"].tolist()]}


def test_the_blend_stream_resumes_at_every_step(prefixes):
    make = lambda: blended_token_blocks(prefixes[:2], [0.3, 0.7], 8, seed=2, size=30).map(_with_id)  # noqa: E731
    blend = BlendedBlocks(prefixes[:2], [0.3, 0.7], 8, seed=2, size=30)
    assert [s["id"] for s in make()] == [[blend[i]["dataset_id"], *blend[i]["tokens"].tolist()]
                                         for i in range(len(blend))]
    assert failures_at_every_step(make) == []
