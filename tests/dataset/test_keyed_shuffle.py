"""Lazily shuffled views: a keyed bijection instead of a permutation array, with the same view semantics
(select/shuffle composition, indices, fingerprints, pickling, save_to_disk, streams) and HF's exact order
where the view is small."""

from __future__ import annotations

import itertools
import json
import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.dataset import stable_dataset
from stable_datasets.dataset.keyed_shuffle import KeyedShuffle, indices_digest, shuffle_key
from stable_datasets.streaming.source import row_source


def _rows(n: int = 1000) -> sds.StableDataset:
    return sds.StableDataset.from_dict({"x": list(range(n)), "y": [f"r{i}" for i in range(n)]})


@pytest.fixture(scope="module")
def ds() -> sds.StableDataset:
    return _rows()


def test_a_small_shuffle_keeps_hugging_faces_order(ds):
    assert ds.shuffle(seed=42)["x"] == np.random.default_rng(42).permutation(1000).tolist()
    assert ds.shuffle(seed=42, lazy=False)["x"] == ds.shuffle(seed=42)["x"]


def test_above_the_threshold_the_shuffle_is_lazy(ds, monkeypatch):
    monkeypatch.setattr(stable_dataset, "LAZY_SHUFFLE_ROWS", 999)
    assert ds.shuffle(seed=1)["x"] == ds.shuffle(seed=1, lazy=True)["x"]
    assert ds.shuffle(seed=1)["x"] != np.random.default_rng(1).permutation(1000).tolist()
    assert ds.select(range(999)).shuffle(seed=1)["x"] == ds.select(range(999)).shuffle(seed=1, lazy=False)["x"]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**40))
def test_a_lazy_shuffle_serves_every_row_exactly_once(n, seed):
    order = np.asarray(KeyedShuffle(n, seed))
    assert sorted(order.tolist()) == list(range(n))
    picks = np.arange(n)[::7]
    assert KeyedShuffle(n, seed)[picks].tolist() == order[picks].tolist()


def test_a_lazy_view_is_a_view_like_any_other(ds):
    lazy = ds.shuffle(seed=3, lazy=True)
    order = lazy["x"]
    assert sorted(order) == list(range(1000)) and order != list(range(1000))
    assert lazy["x"] == ds.shuffle(seed=3, lazy=True)["x"] and ds.shuffle(seed=4, lazy=True)["x"] != order
    assert lazy[0] == {"x": order[0], "y": f"r{order[0]}"} and lazy[-1]["x"] == order[-1]
    assert lazy[[5, -2, 7]]["x"] == [order[5], order[-2], order[7]]
    assert lazy[10:20]["x"] == order[10:20] and [r["x"] for r in lazy] == order
    assert lazy.select([9, 0, 9])["x"] == [order[9], order[0], order[9]]
    # composition: a shuffle of a select, a select of a shuffle, a shuffle of a shuffle
    kept = ds.select(range(500, 1000, 2))
    twice = kept.shuffle(seed=5, lazy=True)
    assert sorted(twice["x"]) == list(range(500, 1000, 2))
    again = lazy.shuffle(seed=6, lazy=True)
    inner = np.asarray(KeyedShuffle(1000, shuffle_key(6, None)))  # the outer shuffle's own order
    assert sorted(again["x"]) == list(range(1000)) and again["x"] == [order[i] for i in inner]
    # the same rows as the eager view of that order; the fingerprint names the description (no walk over rows)
    eager = ds.select(order)
    assert eager.to_dict() == lazy.to_dict()
    assert lazy.fingerprint == ds.shuffle(seed=3, lazy=True).fingerprint == pickle.loads(pickle.dumps(lazy)).fingerprint
    assert len({lazy.fingerprint, ds.shuffle(seed=4, lazy=True).fingerprint, eager.fingerprint, ds.fingerprint,
                kept.shuffle(seed=3, lazy=True).fingerprint}) == 5
    assert indices_digest(KeyedShuffle(10**12, 77)) == indices_digest(KeyedShuffle(10**12, 77))  # O(1)
    with pytest.raises(IndexError, match="index 1000 is out of range for a dataset of 1000 rows"):
        lazy[1000]


def test_a_lazy_view_pickles_in_a_few_bytes_and_saves_its_rows(ds, tmp_path):
    lazy = ds.shuffle(seed=8, lazy=True)
    blob = pickle.dumps(lazy)
    assert len(blob) < len(pickle.dumps(ds.shuffle(seed=8))) - 7000  # the eager one carries 8,000 bytes of order
    assert pickle.loads(blob)["x"] == lazy["x"]
    lazy.save_to_disk(tmp_path / "saved")
    assert sds.load_from_disk(tmp_path / "saved").to_dict() == lazy.to_dict()


def test_a_billion_row_order_costs_nothing_per_row():
    order = KeyedShuffle(10**9, 12345)
    first = order[np.arange(1024)]
    assert len(set(first.tolist())) == 1024 and first.max() < 10**9
    assert order[0] == int(first[0]) and order[-1] == int(order[[10**9 - 1]][0])
    assert len(pickle.dumps(order)) < 200


def test_a_stream_over_a_lazy_view_reads_its_order_and_resumes_on_another_world_size(ds):
    lazy = ds.shuffle(seed=9, lazy=True)
    assert row_source(lazy).block_bounds() is None
    assert [r["x"] for r in lazy.to_iterable()] == lazy["x"]  # no stream shuffle: the view's order
    whole = Counter(r["x"] for r in lazy.to_iterable(shuffle=True, seed=2))
    assert whole == Counter(range(1000))
    served, states = Counter(), []
    for rank in range(3):  # 3 ranks read 40 rows each, then 2 ranks finish the epoch
        stream = lazy.to_iterable(shuffle=True, seed=2, rank=rank, world_size=3)
        iterator = iter(stream)
        served.update(next(iterator)["x"] for _ in range(40))
        states.append(json.loads(json.dumps(stream.state_dict())))
    assert states[0] == states[1] == states[2] and states[0]["consumed"] == 120
    for rank in range(2):
        stream = lazy.to_iterable(shuffle=True, seed=2, rank=rank, world_size=2)
        stream.load_state_dict(states[0])
        served.update(r["x"] for r in stream)
    assert served == whole


@settings(max_examples=15, deadline=None)
@given(first=st.integers(1, 4), second=st.integers(1, 4), stop=st.integers(0, 60), seed=st.integers(0, 1000),
       stream_shuffle=st.booleans())
def test_a_stream_over_a_lazy_view_resumes_exactly_from_any_stop(first, second, stop, seed, stream_shuffle):
    view = _small().shuffle(seed=seed, lazy=True)
    served, state = Counter(), None
    for world, rows in [(first, stop), (second, None)]:
        if state is not None and state["epoch"] > 0:
            break  # the first run ended the epoch
        states = []
        for rank in range(world):
            stream = view.to_iterable(shuffle=stream_shuffle, seed=1, rank=rank, world_size=world)
            if state is not None:
                stream.load_state_dict(state)
            iterator = iter(stream)
            taken = list(itertools.islice(iterator, rows))  # (zip would pull one row more)
            served.update(r["x"] for r in taken)
            states.append(json.loads(json.dumps(stream.state_dict())))
        assert all(s == states[0] for s in states)  # ranks advance in lockstep: one state for all
        state = states[0]
    padding = served - Counter(range(200))
    assert served - padding == Counter(range(200)) and sum(padding.values()) < max(first, second)


_SMALL: list[sds.StableDataset] = []


def _small() -> sds.StableDataset:
    if not _SMALL:
        _SMALL.append(_rows(200))
    return _SMALL[0]
