"""Mosaic-style epoch sizes (proportion / repeat / choose): exact per-source counts, reshuffled passes,
exact resume from any stop on another cluster size, and clear errors."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.errors import StateError
from stable_datasets.streaming import sized_mix
from stable_datasets.streaming.sized_mix import BLOCK, SizedMixPlan, epoch_counts, split_counts

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402
from tests.streaming.test_mix import source  # noqa: E402


def test_counts_follow_mosaics_rules():
    assert epoch_counts([100, 50, 10], repeat=[2, None, 0.5]).tolist() == [200, 50, 5]
    assert epoch_counts([100, 50, 10], choose=[7, None, 30]).tolist() == [7, 50, 30]
    assert epoch_counts([100, 50, 10], repeat=[2, None, None], choose=[None, 3, None]).tolist() == [200, 3, 10]
    # proportions are normalized; the epoch is all rows unless epoch_size says otherwise; exact total (the spare
    # draw of 53.33 x 3 goes to the source mosaic's seeded choice picks)
    assert epoch_counts([100, 50, 10], proportion=[1, 1, 1]).tolist() == [53, 53, 54]
    assert epoch_counts([100, 50, 10], proportion=[0.5, 0.25, 0.25], epoch_size=1000).tolist() == [500, 250, 250]
    assert epoch_counts([3, 3], proportion=[2, 0], epoch_size=5).tolist() == [5, 0]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"repeat": [1, None], "choose": [5, None]}, "dataset 0 sets both repeat and choose"),
    ({"proportion": [1, None], "repeat": [None, 2]}, r"datasets \[0\] set proportion \(relative\) and datasets \[1\]"),
    ({"repeat": [-1, None]}, "dataset 0's repeat must be a finite number >= 0, got -1"),
    ({"choose": [None, 2.5]}, "dataset 1's choose must be a whole number of rows, got 2.5"),
    ({"proportion": [0, 0]}, r"proportions must sum to more than 0, got \[0.0, 0.0\]"),
    ({"proportion": [1, None]}, r"datasets \[1\] have no proportion"),
    ({"proportion": [1]}, "proportion has 1 entries for 2 datasets"),
    ({"choose": [1, 2], "epoch_size": 10}, "epoch_size goes with proportion"),
])
def test_bad_sizes_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        epoch_counts([10, 20], **kwargs)


def test_the_plan_serves_every_source_pass_row_once_and_shuffles_sources():
    plan = SizedMixPlan([700, 30, 1200], [1500, 95, 0], seed=3)
    source, passes, row = plan.at_with_pass(np.arange(len(plan)))
    triples = Counter(zip(source.tolist(), passes.tolist(), row.tolist()))
    assert len(plan) == 1595 and max(triples.values()) == 1
    expected = {(0, p, r) for p in range(2) for r in range(700)} | {(0, 2, r) for r in range(100)}
    expected |= {(1, p, r) for p in range(3) for r in range(30)} | {(1, 3, r) for r in range(5)}
    assert set(triples) == expected
    picks = np.random.default_rng(1).integers(0, len(plan), 300)
    assert [x.tolist() for x in plan.at_with_pass(picks)] == [source[picks].tolist(), passes[picks].tolist(),
                                                              row[picks].tolist()]
    assert source[:1000].tolist() != sorted(source[:1000].tolist())  # sources shuffled together
    again = SizedMixPlan([700, 30, 1200], [1500, 95, 0], seed=3).at(np.arange(1595))[0]
    assert again.tolist() == source.tolist() and SizedMixPlan([700, 30, 1200], [1500, 95, 0], seed=4).at(
        np.arange(1595))[0].tolist() != source.tolist()


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 900), min_size=1, max_size=4), data=st.data(), seed=st.integers(0, 2**32))
def test_every_source_pass_row_is_served_exactly_once(lengths, data, seed):
    counts = [data.draw(st.integers(0, 3 * n)) for n in lengths]
    plan = SizedMixPlan(lengths, counts, seed=seed)
    source, passes, row = plan.at_with_pass(np.arange(len(plan)))
    draws = passes * np.asarray(lengths)[source] + row
    assert len(plan) == sum(counts) and np.bincount(source, minlength=len(lengths)).tolist() == counts
    for s, n in enumerate(counts):  # draws 0..n-1 of each source, each once
        assert sorted(draws[source == s].tolist()) == list(range(n))


def test_block_counts_add_up_and_agree_with_the_positions():
    plan = SizedMixPlan([5000, 3000, 2500], [5000, 4500, 1234], seed=9)
    source, _, _ = plan.at_with_pass(np.arange(len(plan)))
    running = np.zeros(3, np.int64)
    for b in range(plan.blocks):
        before, inside = plan.block_counts(b)
        assert before.tolist() == running.tolist()
        assert inside.tolist() == np.bincount(source[b * BLOCK:(b + 1) * BLOCK], minlength=3).tolist()
        running += inside
    assert running.tolist() == [5000, 4500, 1234]
    with pytest.raises(IndexError, match="block 11 outside"):
        plan.block_counts(11)


def test_a_plan_of_a_trillion_positions_answers_anywhere_without_per_block_state():
    counts = [6 * 10**11, 3 * 10**11, 10**11]
    plan = SizedMixPlan([10**9, 10**8, 10**6], counts, seed=1)
    ends = np.array([0, 1, 999, 5 * 10**11, 10**12 - 1])
    source, passes, row = plan.at_with_pass(ends)
    assert source.shape == (5,) and np.all(row < np.array([10**9, 10**8, 10**6])[source])
    assert np.all(passes < np.array([600, 3000, 100000])[source])
    first, last = plan.block_counts(0), plan.block_counts(plan.blocks - 1)
    assert first[1].sum() == last[1].sum() == BLOCK and (last[0] + last[1]).tolist() == counts
    again = SizedMixPlan([10**9, 10**8, 10**6], counts, seed=1).at_with_pass(ends)
    assert [a.tolist() for a in again] == [source.tolist(), passes.tolist(), row.tolist()]


@given(counts=st.lists(st.integers(0, 10**12), min_size=1, max_size=5), share=st.floats(0, 1),
       seed=st.integers(0, 2**32))
def test_split_counts_is_exact_above_numpys_limit(counts, share, seed):
    size = int(sum(counts) * share)
    out = split_counts(np.random.default_rng(seed), np.asarray(counts), size)
    assert int(out.sum()) == size and np.all(out >= 0) and np.all(out <= np.asarray(counts))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sized")
    return [source("a", "arrow", root), source("b", "parquet", root), source("c", "arrow", root)]


SIZES = {"a": 50, "b": 200, "c": 100}  # choose=50 of 120, repeat=2.5 of 80, c once (100)


def sized(sources, rank=None, world=None, seed=5):
    streams = [s.to_iterable(rank=rank, world_size=world).shuffle(seed=k, window_blocks=2)
               for k, s in enumerate(sources)]
    return sds.interleave_datasets(streams, choose=[50, None, None], repeat=[None, 2.5, None], seed=seed)


def test_a_sized_stream_takes_exact_counts_with_reshuffled_passes(sources):
    rows = [(r["src"], r["idx"]) for r in sized(sources)]
    assert Counter(s for s, _ in rows) == Counter(SIZES)
    b = [i for s, i in rows if s == "b"]
    assert sorted(b[:80]) == sorted(b[80:160]) == list(range(80)) and len(set(b[160:])) == 40
    assert b[:80] != b[80:160]  # the second pass is reshuffled
    assert sorted(i for s, i in rows if s == "c") == list(range(100))
    assert len({i for s, i in rows if s == "a"}) == 50
    view = sds.interleave_datasets(sources, choose=[50, None, None], repeat=[None, 2.5, None], seed=5)
    assert view["src"] == [s for s, _ in rows]  # the same source sequence as a map-style view


def expected_counter(sources) -> Counter:
    return Counter((r["src"], r["idx"]) for r in sized(sources))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.integers(1, 3), second=st.integers(1, 3), batch=st.integers(1, 9), steps=st.integers(0, 20),
       batch2=st.integers(1, 9))
def test_a_sized_stream_resumes_exactly_from_any_stop(sources, first, second, batch, steps, batch2):
    whole = expected_counter(sources)
    served, state = Counter(), None
    for world, size, stop in [(first, batch, steps), (second, batch2, None)]:
        if state is not None and state["epoch"] > 0:
            break  # the first run finished the epoch by itself (its stop lay past the end): nothing to resume
        states = []
        for rank in range(world):
            stream = sized(sources, rank, world)
            if state is not None:
                stream.load_state_dict(state)
            loader = StreamingDataLoader(stream, batch_size=size, num_workers=0)
            iterator = iter(loader)
            loader_rows = [next(iterator, None) for _ in range(stop)] if stop is not None else list(iterator)
            for batch_rows in loader_rows:
                if batch_rows is not None:
                    served.update(zip(batch_rows["src"], batch_rows["idx"].tolist()))
            states.append(json.loads(json.dumps(loader.state_dict())))
        state = states[0]
    padding = served - whole
    assert served - padding == whole and sum(padding.values()) < max(first, second)


def test_sized_and_drawn_mixes_do_not_combine(sources):
    with pytest.raises(ValueError, match="give either probabilities= .* or proportion=/repeat=/choose="):
        sds.interleave_datasets(sources, probabilities=[0.2, 0.3, 0.5], proportion=[1, 1, 1])
    with pytest.raises(ValueError, match="stopping_strategy does not apply"):
        sds.interleave_datasets(sources, repeat=[1, 1, 1], stopping_strategy="all_exhausted")


# -- issue 37 item 4: epoch_size alone splits the epoch by the sources' rows, as mosaicml-streaming does --------
# Expected counts from mosaicml-streaming 0.13.0 side by side: StreamingDataset(streams=[Stream(local=...)
# per source of these sizes], epoch_size=E, shuffle_seed=S, shuffle=False, batch_size=1), then each stream's
# `choose` (Stream.apply_weights' "weights are unspecified, but epoch size is provided" branch).
MOSAIC_EPOCH_SIZE_ALONE = [
    ([100, 50, 10], 77, 9176, [48, 24, 5]),
    ([100, 50, 10], 77, 5, [48, 24, 5]),
    ([7, 11, 13, 17], 100, 1, [14, 23, 28, 35]),
    ([3, 3, 3], 10, 0, [3, 3, 4]),
    ([1000, 1], 5, 3, [4, 1]),
    ([100, 50, 10], 1000, 9176, [625, 312, 63]),
]


@pytest.mark.parametrize(("lengths", "epoch_size", "seed", "expected"), MOSAIC_EPOCH_SIZE_ALONE)
def test_epoch_size_alone_splits_by_source_rows_as_mosaic_does(lengths, epoch_size, seed, expected):
    """Before: "epoch_size goes with proportion" (a ValueError)."""
    assert epoch_counts(lengths, epoch_size=epoch_size, seed=seed).tolist() == expected


def test_a_mix_with_epoch_size_alone_serves_those_counts(sources):
    """sources a, b, c have 120, 80 and 100 rows: epoch_size 150 gives mosaic's floor shares 60, 40, 50."""
    streams = [s.to_iterable() for s in sources]
    rows = [(r["src"], r["idx"]) for r in sds.interleave_datasets(streams, epoch_size=150, seed=2)]
    assert Counter(s for s, _ in rows) == Counter({"a": 60, "b": 40, "c": 50})
    assert len(set(rows)) == 150
    spare = sds.interleave_datasets(streams, epoch_size=301, seed=2)  # 120.4, 80.27, 100.33: one spare draw
    assert Counter(r["src"] for r in spare) == Counter({"a": 120, "b": 80, "c": 101})  # mosaic's, shuffle_seed=2
    view = sds.interleave_datasets(sources, epoch_size=150, seed=2)
    assert view["src"] == [s for s, _ in rows]
    with pytest.raises(ValueError, match="epoch_size goes with proportion \\(or alone\\)"):
        sds.interleave_datasets(streams, epoch_size=10, repeat=[1, 2, None])


# -- issue 37 item 4: an unshuffled partial pass draws afresh each epoch, as mosaicml-streaming does -------------
def _unshuffled_partial(sources, seed=4):
    streams = [s.to_iterable() for s in sources[:2]]  # a: 120 rows, b: 80 rows, storage order
    return sds.interleave_datasets(streams, repeat=[1.5, None], choose=[None, 30], seed=seed)


def _rows_of(stream, epoch):
    stream.set_epoch(epoch)
    rows = [(r["src"], r["idx"]) for r in stream]
    return [i for s, i in rows if s == "a"], [i for s, i in rows if s == "b"]


def test_an_unshuffled_partial_pass_draws_a_fresh_sorted_subset_each_epoch(sources):
    """mosaicml-streaming's resample_streams: a partial repeat is rng.choice(rows, shortfall, replace=False),
    sorted, with rng seeded by shuffle_seed + epoch ('balanced' sampling), shuffled or not. Before: an unshuffled
    source's partial pass read its first rows every epoch (a: rows 0..59 again, b: rows 0..29)."""
    a0, b0 = _rows_of(_unshuffled_partial(sources), 0)
    a1, b1 = _rows_of(_unshuffled_partial(sources), 1)
    for a, b in ((a0, b0), (a1, b1)):
        assert a[:120] == list(range(120))  # the whole pass in storage order, then 60 rows of a second pass
        assert len(a) == 180 and a[120:] == sorted(set(a[120:])) and len(set(a[120:])) == 60
        assert len(b) == 30 and b == sorted(set(b)) and max(b) < 80  # choose 30 of 80: one partial pass
    assert a0[120:] != a1[120:] and b0 != b1 and a0[120:] != list(range(60)) and b0 != list(range(30))
    assert _rows_of(_unshuffled_partial(sources), 1) == (a1, b1)  # deterministic for the seed
    assert _rows_of(_unshuffled_partial(sources, seed=5), 1)[1] != b1


# -- issue 37: repeat=/proportion= counts as mosaicml-streaming derives them -----------------------------------
# Expected counts from mosaicml-streaming 0.13.0 side by side: its own `Stream.apply_weights(streams,
# samples_per_stream, epoch_size or None, shuffle_seed)` over `Stream(local=..., proportion|repeat|choose=...)`,
# then each stream's `choose` (StreamingDataset passes epoch_size only `if epoch_size:`). Before: repeat= took
# round(r x rows) (1.5 x 13 = 19.5 gave 20, mosaic 19) and proportion= gave its spare draws to the largest
# remainders, not to mosaic's seeded choice; epoch_size=0 with proportion= gave an empty epoch.
MOSAIC_APPLY_WEIGHTS = [
    ([13, 50, 10], {"repeat": [1.5, 0.5, 0.15]}, 0, [19, 25, 1]),
    ([1651, 921, 329, 292], {"repeat": [0.05, 0.5, 0.1, 0.15]}, 0, [82, 460, 32, 43]),
    ([1308, 319, 863], {"repeat": [3.241, 2.175, None]}, 0, [4239, 693, 863]),
    ([10, 16], {"repeat": [1.5, None], "choose": [None, 7]}, 0, [15, 7]),
    ([100, 50, 10], {"repeat": [2, None, 0.5]}, 0, [200, 50, 5]),
    ([100, 50, 10], {"proportion": [1, 1, 1]}, 9176, [53, 53, 54]),
    ([357, 1121, 793, 1002], {"proportion": [26.25, 42.12, 10.59, 63.32]}, 12508222, [604, 969, 243, 1457]),
    ([7, 11, 13], {"proportion": [0.2, 0.3, 0.5], "epoch_size": 101}, 3, [20, 30, 51]),
    ([7, 11, 13], {"proportion": [0.2, 0.3, 0.5], "epoch_size": 0}, 3, [6, 9, 16]),
    ([3, 3], {"proportion": [2, 0], "epoch_size": 5}, 0, [5, 0]),
    ([120, 80, 100], {"epoch_size": 0}, 2, [120, 80, 100]),
]


@pytest.mark.parametrize(("lengths", "sizes", "seed", "expected"), MOSAIC_APPLY_WEIGHTS)
def test_counts_equal_mosaics_apply_weights(lengths, sizes, seed, expected):
    assert epoch_counts(lengths, **sizes, seed=seed).tolist() == expected


def mosaic_apply_weights(lengths: list[int], sizes: dict, seed: int) -> list[int]:
    """mosaicml-streaming 0.13.0's `Stream.apply_weights` (streaming/base/stream.py, Apache-2.0), its counting
    transcribed line for line (the per-stream `choose` it derives), as the oracle for any input: relative weights
    and epoch_size alone truncate float shares and give the shortfall to rng.choice(streams, shortfall, False);
    absolute weights take int(repeat * samples), choose, or all samples. Checked against the installed package on
    4,000 random inputs (0 differ; 1,909 differed before the fix): PYTHONPATH=<mosaic>:<stubs for its unused
    imports>:. python mosaic_oracle.py."""
    samples_per_stream = np.asarray(lengths, np.int64)
    choose_per_epoch = sizes.get("epoch_size") or None  # StreamingDataset: `if epoch_size:`
    n = len(lengths)
    per = {k: sizes.get(k) or [None] * n for k in ("proportion", "repeat", "choose")}
    if per["proportion"][0] is not None or (choose_per_epoch and all(
            per[k][i] is None for k in per for i in range(n))):
        if not choose_per_epoch:
            choose_per_epoch = sum(samples_per_stream)
        weights = per["proportion"] if per["proportion"][0] is not None else samples_per_stream.tolist()
        proportion_per_stream = np.array(weights, np.float64)
        proportion_per_stream /= proportion_per_stream.sum()
        choose_per_stream = (choose_per_epoch * proportion_per_stream).astype(np.int64)
        shortfall = choose_per_epoch - choose_per_stream.sum()
        rng = np.random.default_rng(seed)
        indices = rng.choice(len(lengths), shortfall, False)
        choose_per_stream[indices] += 1
        return choose_per_stream.tolist()
    choose_per_stream = np.zeros(n, np.int64)
    for stream_id in range(n):
        if per["repeat"][stream_id] is not None:
            choose = int(per["repeat"][stream_id] * samples_per_stream[stream_id])
        elif per["choose"][stream_id] is not None:
            choose = per["choose"][stream_id]
        else:
            choose = samples_per_stream[stream_id]
        choose_per_stream[stream_id] = choose
    return choose_per_stream.tolist()


@pytest.mark.parametrize(("lengths", "sizes", "seed", "expected"), MOSAIC_APPLY_WEIGHTS)
def test_the_transcribed_oracle_gives_the_installed_packages_counts(lengths, sizes, seed, expected):
    assert mosaic_apply_weights(lengths, sizes, seed) == expected


_ratio = st.one_of(st.sampled_from([0.05, 0.1, 0.15, 0.3, 0.5, 0.7, 1.1, 1.5, 2.5, 1 / 3, 2 / 3]),
                   st.floats(0, 4, allow_nan=False).map(lambda x: round(x, 3)))


@settings(max_examples=300, deadline=None)
@given(lengths=st.lists(st.integers(1, 5000), min_size=1, max_size=5), kind=st.sampled_from(
    ["proportion", "absolute", "epoch_size"]), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_counts_equal_mosaics_rule_for_any_input(lengths, kind, data, seed):
    n = len(lengths)
    if kind == "proportion":
        weights = data.draw(st.lists(_ratio, min_size=n, max_size=n).filter(lambda w: sum(w) > 0))
        sizes = {"proportion": weights, "epoch_size": data.draw(st.one_of(st.none(), st.integers(0, 20_000)))}
    elif kind == "absolute":
        sizes = {"repeat": data.draw(st.lists(st.one_of(st.none(), _ratio), min_size=n, max_size=n))}
        sizes["choose"] = [data.draw(st.one_of(st.none(), st.integers(0, 9000))) if r is None else None
                           for r in sizes["repeat"]]
    else:
        sizes = {"epoch_size": data.draw(st.integers(1, 20_000))}
    assert epoch_counts(lengths, **sizes, seed=seed).tolist() == mosaic_apply_weights(lengths, sizes, seed)


def test_a_mix_with_a_fractional_repeat_serves_mosaics_truncated_count(sources):
    """c has 100 rows: repeat=0.515 is 51.5 draws, mosaic's int() takes 51 (round() took 52)."""
    streams = [s.to_iterable() for s in sources]
    rows = [r["src"] for r in sds.interleave_datasets(streams, repeat=[None, None, 0.515], choose=[1, 1, None],
                                                        seed=3)]
    assert Counter(rows) == Counter({"a": 1, "b": 1, "c": 51})


def test_a_state_saved_under_the_old_plan_is_refused(sources, monkeypatch):
    """A sized mix saved under plan 3 (repeat= rounded) is refused by its order identity instead of resuming on
    the new counts' rows; a state of the current plan loads."""
    def saved_state():
        stream = sds.interleave_datasets([s.to_iterable() for s in sources], repeat=[0.5, 1, 1], seed=3)
        iterator = iter(stream)
        next(iterator)
        return stream, json.loads(json.dumps(stream.state_dict()))

    monkeypatch.setattr(sized_mix, "PLAN_VERSION", 3)
    _, old = saved_state()
    monkeypatch.undo()
    stream, current = saved_state()
    with pytest.raises(StateError, match="cannot resume: the saved .* read another dataset, mix or order"):
        stream.load_state_dict(old)
    stream.load_state_dict(current)
