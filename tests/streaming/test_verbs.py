"""Hugging Face's iterable verbs on streams (take, skip, filter, shuffle(buffer_size=), with_format, features),
each keeping resume exact."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402

ROWS = 400


@pytest.fixture(scope="module")
def cache(index_cache):
    return index_cache(ROWS, layout_options={"batch_rows": 32})


def idx(rows):
    return [int(r["idx"]) for r in rows]


def test_take_and_skip_cut_the_global_order(cache):
    stream = cache.to_iterable().shuffle(seed=2)
    order = idx(stream)
    assert idx(cache.to_iterable().shuffle(seed=2).take(50)) == order[:50]
    assert idx(cache.to_iterable().shuffle(seed=2).skip(50)) == order[50:]
    assert idx(cache.to_iterable().shuffle(seed=2).skip(10).take(5)) == order[10:15]
    ranks = [idx(cache.to_iterable(rank=r, world_size=3).shuffle(seed=2).take(50)) for r in range(3)]
    assert [len(r) for r in ranks] == [17, 17, 17]  # 50 rows on 3 ranks: one row of padding
    assert sorted(ranks[0] + ranks[1] + ranks[2][:-1]) == sorted(order[:50]) and ranks[2][-1] == order[0]
    with pytest.raises(ValueError, match="call shuffle\\(\\) before take\\(\\)/skip\\(\\)"):
        cache.to_iterable().take(5).shuffle(seed=1)
    with pytest.raises(ValueError, match="take\\(\\) needs a non-negative int, got -1"):
        cache.to_iterable().take(-1)


def test_a_taken_stream_resumes_on_another_world_size(cache):
    def stream(rank, world):
        return cache.to_iterable(rank=rank, world_size=world).shuffle(seed=4).skip(30).take(300)

    served, states = [], []
    for rank in range(2):
        loader = StreamingDataLoader(stream(rank, 2), batch_size=10, num_workers=2)
        iterator = iter(loader)
        served += [int(v) for batch in [next(iterator) for _ in range(4)] for v in batch["idx"]]
        states.append(json.loads(json.dumps(loader.state_dict())))
        del iterator
    assert states[0] == states[1] and states[0]["consumed"] == 80
    for rank in range(3):
        resumed = stream(rank, 3)
        resumed.load_state_dict(states[0])
        served += idx(resumed)
    expected = idx(cache.to_iterable().shuffle(seed=4))[30:330]
    assert sorted(served) == sorted(expected + expected[:len(served) - 300])  # + the last step's padding


def test_filter_keeps_rows_and_resumes_exactly_where_it_can(cache):
    def stream(rank=0, world=1):
        return cache.to_iterable(rank=rank, world_size=world).shuffle(seed=1).filter(lambda r: r["idx"] % 3 == 0)

    full = idx(stream())
    assert full == [i for i in idx(cache.to_iterable().shuffle(seed=1)) if i % 3 == 0]
    run = stream()
    iterator = iter(run)
    head = [next(iterator)["idx"] for _ in range(20)]
    state = json.loads(json.dumps(run.state_dict()))
    again = stream()
    again.load_state_dict(state)
    assert head + idx(again) == full
    with pytest.raises(ValueError, match="filters rows, so its position is rank 0 of 1's own"):
        stream(0, 2).load_state_dict(state)
    with pytest.raises(ValueError, match="use torchdata's StatefulDataLoader"):
        StreamingDataLoader(stream(), batch_size=4, num_workers=2)
    assert [int(v) for b in StreamingDataLoader(stream(), batch_size=4) for v in b["idx"]] == full


def test_a_filtered_stream_resumes_through_stateful_dataloader_workers(cache):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        stream = cache.to_iterable(loader_batch_size=6).shuffle(seed=3).filter(lambda r: r["idx"] % 2 == 1)
        return StatefulDataLoader(stream, batch_size=6, num_workers=2)

    def ids(batches):
        return [int(v) for b in batches for v in b["idx"]]

    full = ids(loader())
    first = loader()
    iterator = iter(first)
    head = ids(next(iterator) for _ in range(9))
    state = first.state_dict()
    del iterator
    second = loader()
    second.load_state_dict(state)
    assert head + ids(second) == full and sorted(full) == list(range(1, ROWS, 2))


def test_shuffle_buffer_size_bounds_the_window_in_rows_and_resumes(cache):
    stream = cache.to_iterable().shuffle(seed=5, buffer_size=20)
    order = stream.order.epoch(0)
    positions = order.positions
    windows = order.block_window[np.searchsorted(stream.order.bounds, positions, side="right") - 1]
    sizes = np.bincount(windows)
    assert sizes.max() <= 20 and sorted(positions.tolist()) == list(range(ROWS))
    run = cache.to_iterable().shuffle(seed=5, buffer_size=20)
    iterator = iter(run)
    head = [next(iterator)["idx"] for _ in range(33)]
    again = cache.to_iterable().shuffle(seed=5, buffer_size=20)
    again.load_state_dict(run.state_dict())
    assert head + idx(again) == positions.tolist()
    with pytest.raises(ValueError, match="buffer_size must be a positive int, got 0"):
        cache.to_iterable().shuffle(buffer_size=0)


def test_with_format_features_and_column_names(cache):
    stream = cache.to_iterable().with_format("numpy").batch(8)
    first = next(iter(stream))
    assert isinstance(first["idx"], np.ndarray) and first["idx"].tolist() == list(range(8))
    assert stream.features == cache.features and stream.column_names == ["idx"]
    with pytest.raises(ValueError, match="call filter\\(\\) before batch\\(\\)"):
        stream.filter(lambda b: True)
