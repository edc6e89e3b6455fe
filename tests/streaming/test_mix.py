"""Mixed streams: the lazy mix plan, sources shuffled in their own orders, exact elastic resume of a mix."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.streaming.mix import MixPlan

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402


def test_the_lazy_plan_equals_its_enumeration_across_many_blocks():
    plan = MixPlan([2500, 700, 1800], probabilities=[0.5, 0.2, 0.3], seed=9, stopping_strategy="all_exhausted")
    everything = plan.indices([0, 10_000, 20_000])
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(plan), 500)
    source, row = plan.at(picks)
    assert (np.array([0, 10_000, 20_000])[source] + row).tolist() == everything[picks].tolist()
    counts = Counter((everything // 10_000).tolist())
    assert all(counts[s] >= n for s, n in enumerate([2500, 700, 1800]))  # every source read at least once
    draws = np.random.default_rng(9).choice(3, size=len(plan), p=[0.5, 0.2, 0.3])
    assert (everything // 10_000).tolist() == draws.tolist()  # HF's draws: default_rng(seed).choice


ROWS = {"a": 120, "b": 80, "c": 100}


def source(name: str, fmt: str, root):
    class Rows(sds.GeneratorBasedBuilder):
        def _info(self):
            return sds.DatasetInfo(features=sds.Features({"idx": sds.Value("int64"), "src": sds.Value("string")}))

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {})]

        def _generate_examples(self):
            for i in range(ROWS[name]):
                yield i, {"idx": i, "src": name}

    Rows.__name__ = f"Rows_{name}"
    options = {"arrow": {"batch_rows": 16}, "parquet": {"row_group_rows": 16}}[fmt]
    return sds.load_dataset(Rows, split="train", storage_format=fmt, cache_dir=root / name, layout_options=options)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    return [source("a", "arrow", root), source("b", "parquet", root), source("c", "arrow", root)]


def mixed(sources, rank=None, world=None, probabilities=(0.5, 0.2, 0.3), seed=5):
    streams = [s.to_iterable(rank=rank, world_size=world).shuffle(seed=k, window_blocks=2)
               for k, s in enumerate(sources)]
    return sds.interleave_datasets(streams, probabilities=list(probabilities), seed=seed,
                                   stopping_strategy="all_exhausted")


def test_a_mixed_stream_draws_like_the_map_style_mix_from_shuffled_sources(sources):
    stream = mixed(sources)
    rows = [(r["src"], r["idx"]) for r in stream]
    view = sds.interleave_datasets(sources, probabilities=[0.5, 0.2, 0.3], seed=5, stopping_strategy="all_exhausted")
    assert [r[0] for r in rows] == view["src"]  # the same draw sequence
    assert len(rows) == len(view) and rows != list(zip(view["src"], view["idx"]))  # the sources are shuffled
    for name, n in ROWS.items():
        mine = [i for s, i in rows if s == name]
        assert set(mine) == set(range(n))  # all_exhausted: every row of every source at least once
    assert stream.features == sources[0].features and stream.column_names == ["idx", "src"]


def test_a_mixed_stream_resumes_exactly_on_another_cluster_size(sources):
    """2 ranks x 2 workers, batch 8 -> 3 ranks, no workers, batch 5: every mix position served once."""
    whole = Counter((r["src"], r["idx"]) for r in mixed(sources))
    served, state = Counter(), None
    for world, workers, batch, steps in [(2, 2, 8, 5), (3, 0, 5, None)]:
        states = []
        for rank in range(world):
            stream = mixed(sources, rank, world)
            if state is not None:
                stream.load_state_dict(state)
            loader = StreamingDataLoader(stream, batch_size=batch, num_workers=workers)
            iterator = iter(loader)
            for batch_rows in ([next(iterator) for _ in range(steps)] if steps else iterator):
                served.update(zip(batch_rows["src"], batch_rows["idx"].tolist()))
            states.append(json.loads(json.dumps(loader.state_dict())))
            del iterator
        assert all(s == states[0] for s in states)
        state = states[0]
    padding = served - whole
    assert served - padding == whole and sum(padding.values()) < 3  # only the last step's padding is extra


def test_a_state_of_another_mix_is_refused_and_placements_must_agree(sources):
    state = mixed(sources).state_dict()
    with pytest.raises(ValueError, match="read another dataset, mix or order"):
        mixed(sources, probabilities=(0.4, 0.3, 0.3)).load_state_dict(state)
    with pytest.raises(ValueError, match=r"the saved mix drew its sources with seed 5, this one with 6; pass "
                                         r"interleave_datasets\(..., seed=5\) to resume it"):
        mixed(sources, seed=6).load_state_dict(state)
    streams = [sources[0].to_iterable(rank=0, world_size=2), sources[1].to_iterable()]
    with pytest.raises(ValueError, match="split across ranks differently"):
        sds.interleave_datasets(streams)
    with pytest.raises(ValueError, match="stream 0 yields batches"):
        sds.interleave_datasets([sources[0].to_iterable().batch(4), sources[1].to_iterable()])


# -- round robin of streams: HF's IterableDataset count (issue 37 item 1), side by side ---------------------------
@pytest.mark.parametrize("lengths", [(5, 3), (3, 5), (3, 4, 5), (20, 20, 20), (1, 4)])
@pytest.mark.parametrize("strategy", ["first_exhausted", "all_exhausted"])
def test_round_robin_of_streams_stops_as_hugging_faces_streams_do(lengths, strategy):
    """A mix of streams without probabilities stops right after the row that exhausts a source (the first one, or,
    with all_exhausted, the last one), as HF's streams do; HF's own case: 3 streams of 20 rows give 3 * 19 + 1 = 58
    rows (first_exhausted) and 60 (all_exhausted). A mix of datasets keeps HF's map-style count of whole rounds."""
    hf = pytest.importorskip("datasets")
    data = [{"id": list(range(100 * s, 100 * s + n))} for s, n in enumerate(lengths)]
    theirs = [r["id"] for r in hf.interleave_datasets([hf.Dataset.from_dict(d).to_iterable_dataset() for d in data],
                                                      stopping_strategy=strategy)]
    ours = sds.interleave_datasets([sds.StableDataset.from_dict(d).to_iterable() for d in data],
                                   stopping_strategy=strategy)
    assert [r["id"] for r in ours] == theirs
    if lengths == (20, 20, 20):
        assert len(theirs) == (58 if strategy == "first_exhausted" else 60)
    maps = hf.interleave_datasets([hf.Dataset.from_dict(d) for d in data], stopping_strategy=strategy)
    assert sds.interleave_datasets([sds.StableDataset.from_dict(d) for d in data],
                                   stopping_strategy=strategy)["id"] == list(maps["id"])


def test_round_robin_of_streams_with_an_empty_source_stops_when_it_is_reached():
    """HF's cycling stops when it asks an exhausted source for a row: [4, 0, 3] rows give the first row only."""
    features = sds.Features({"id": sds.Value("int64")})
    sources = [sds.StableDataset.from_dict({"id": list(range(100 * s, 100 * s + n))}, features=features).to_iterable()
               for s, n in enumerate((4, 0, 3))]
    assert [r["id"] for r in sds.interleave_datasets(sources)] == [0]
