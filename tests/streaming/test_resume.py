"""Elastic exact resume: a state saved at (N ranks, W workers, batch B) loads at (M, V, B') and every row of
the epoch is still served exactly once; what cannot be exact is refused; loaders that cannot count raise."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stable_datasets.streaming import StreamingDataset
from stable_datasets.streaming.order import Lanes
from stable_datasets.streaming.state import seal

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402


class Ids:
    """A map-style dataset whose row i is i, stored in the given blocks (read through ItemReader)."""

    def __init__(self, bounds):
        self.bounds = np.asarray(bounds, dtype=np.int64)

    def __len__(self):
        return int(self.bounds[-1])

    def __getitem__(self, i):
        return int(i)

    def block_bounds(self):
        return self.bounds


@st.composite
def runs(draw):
    sizes = draw(st.lists(st.integers(1, 30), min_size=1, max_size=12))
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    phases = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))  # world size of each run
    stops = draw(st.lists(st.floats(0, 1), min_size=len(phases), max_size=len(phases)))
    return bounds, phases, stops, draw(st.booleans()), draw(st.integers(0, 99)), draw(st.integers(1, 4)), \
        draw(st.booleans())


@settings(max_examples=80, deadline=None)
@given(run=runs())
def test_any_sequence_of_world_sizes_serves_every_row_once(run):
    """Runs on N1, N2, ... ranks in lockstep, each stopped at a random step; each run loads rank 0's state
    (JSON) of the run before. Over the epoch: every row exactly once, plus only the padding of the last step
    (drop_last=False) or minus only the tail it drops (drop_last=True). With lanes, the epoch keeps the lanes
    of the run that began it (its state says which), whatever the later world sizes."""
    bounds, phases, stops, drop_last, seed, window, lanes = run
    n = int(bounds[-1])
    state, served, padded_by, epoch_lanes = None, Counter(), phases[-1], None
    for k, world in enumerate(phases):
        streams = [StreamingDataset(Ids(bounds), rank=r, world_size=world, drop_last=drop_last, lanes=lanes)
                   .shuffle(seed=seed, window_blocks=window) for r in range(world)]
        if state is not None:
            if drop_last and 0 < n - state["consumed"] < world:
                with pytest.raises(ValueError, match="drop_last=True on .* ranks would drop them all"):
                    streams[0].load_state_dict(state)
                return
            for stream in streams:
                stream.load_state_dict(state)
        left = streams[0].rows_left()
        steps = left if k == len(phases) - 1 else int(stops[k] * left)
        for stream in streams:
            iterator = iter(stream)
            served.update(next(iterator) for _ in range(steps))
        if steps:
            padded_by = world  # the run that served the epoch's last step pads it, on fewer than its ranks
            if lanes and epoch_lanes is None:
                epoch_lanes = Lanes(world, 1, 1)  # fixed by the run that began the epoch
        state = json.loads(json.dumps(streams[0].state_dict()))
        if state["consumed"] > 0 and state["epoch"] == 0:
            assert state.get("lanes") == (epoch_lanes.to_list() if lanes else None)
        assert all(s.state_dict() == state for s in streams)  # lockstep: one rank's state is everyone's
        if state["epoch"] == 1:
            break
    order = StreamingDataset(Ids(bounds)).shuffle(seed=seed, window_blocks=window).order.epoch(0)
    once = Counter(range(n))

    def rows_at(g):
        return order.positions_at(g if epoch_lanes is None else epoch_lanes.to_order(g, n, drop_last)).tolist()

    if drop_last:
        dropped = set(rows_at(np.arange(sum(served.values()), n)))
        assert served == Counter(i for i in range(n) if i not in dropped)
    else:
        extra = served - once
        assert served - extra == once and sum(extra.values()) < padded_by  # the padding, from the order's start
        padded = np.arange(n, n + sum(extra.values())) % n  # epoch indices past the end wrap to its start
        assert sorted(extra.elements()) == sorted(rows_at(padded))


ROWS = 300


@pytest.fixture(scope="module")
def cache(index_cache):
    return index_cache(ROWS, layout_options={"batch_rows": 32})


def ids(batches):
    return [int(v) for batch in batches for v in batch["idx"]]


@pytest.mark.parametrize("lanes", [False, True])
def test_a_loader_state_resumes_on_other_ranks_workers_and_batch_sizes(cache, lanes):
    """(2 ranks, 2 workers, batch 4) -> (3 ranks, 1 worker, batch 5) -> (1 rank, 2 workers, batch 3); with lanes
    the epoch keeps the lanes of 2 ranks x 2 workers x 4 rows it began with."""
    def stream(rank, world):
        return cache.to_iterable(rank=rank, world_size=world, lanes=lanes).shuffle(seed=7, window_blocks=2)

    served, state = [], None
    for world, workers, batch, steps in [(2, 2, 4, 9), (3, 0, 5, 7), (1, 2, 3, None)]:
        states = []
        for rank in range(world):
            s = stream(rank, world)
            if state is not None:
                s.load_state_dict(state)
            loader = StreamingDataLoader(s, batch_size=batch, num_workers=workers)
            iterator = iter(loader)
            taken = [next(iterator) for _ in range(steps)] if steps else list(iterator)
            served.extend(ids(taken))
            states.append(json.loads(json.dumps(loader.state_dict())))
            del iterator
        assert all(s == states[0] for s in states)
        state = states[0]
        assert state.get("lanes") == ([2, 2, 4] if lanes and state["epoch"] == 0 else None)
    assert state["epoch"] == 1 and sorted(served) == list(range(ROWS))  # every row once, none lost
    order = [int(i) for i in stream(0, 1).rank_order(lanes=Lanes(1, 1, 1))]  # the epoch's order
    if lanes:  # rank 0's first batches: the heads of its two workers' lanes (76 and 74 rows: 150 in units of 4)
        assert Lanes(2, 2, 4).lane_bounds(ROWS, False).tolist() == [0, 76, 150, 226, 300]
        assert served[:8] == order[0:4] + order[76:80]
    else:  # rank 0: every other row of the order
        assert served[:8] == order[0:16:2]


def test_a_plain_dataloader_with_workers_refuses_to_guess_its_state(cache):
    stream = cache.to_iterable(loader_batch_size=10).shuffle(seed=1)
    loader = torch.utils.data.DataLoader(stream, batch_size=10, num_workers=2)
    iterator = iter(loader)
    [next(iterator) for _ in range(10)]
    with pytest.raises(RuntimeError, match="DataLoader workers read it.*StreamingDataLoader, or torchdata's "
                                           "StatefulDataLoader"):
        stream.state_dict()
    del iterator
    assert stream.state_dict(consumed=100)["consumed"] == 100  # what the loop says it received
    single = cache.to_iterable().shuffle(seed=1)  # no workers: the rows are counted where they are read
    iterator = iter(torch.utils.data.DataLoader(single, batch_size=10))
    [next(iterator) for _ in range(3)]
    assert single.state_dict()["consumed"] == 30


@pytest.mark.parametrize("workers,lanes", [(0, False), (2, False), (2, True)])
def test_torchdata_stateful_dataloader_resumes_the_stream_exactly(cache, workers, lanes):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        stream = cache.to_iterable(rank=1, world_size=2, loader_batch_size=8, lanes=lanes).shuffle(seed=3,
                                                                                                  window_blocks=2)
        return StatefulDataLoader(stream, batch_size=8, num_workers=workers)

    full = ids(loader())
    first = loader()
    iterator = iter(first)
    head = ids(next(iterator) for _ in range(7))
    state = json.loads(json.dumps(first.state_dict()))  # plain JSON, workers' states included
    del iterator
    second = loader()
    second.load_state_dict(state)
    assert head + ids(second) == full
    rank_1 = cache.to_iterable(rank=1, world_size=2).shuffle(seed=3, window_blocks=2)
    served_in = Lanes(2, max(workers, 1), 8) if lanes else None  # (None: row stripes)
    assert sorted(full) == sorted(rank_1.rank_order(lanes=served_in).tolist())


def test_a_worker_state_outside_its_loader_and_foreign_states_are_refused(cache):
    stream = cache.to_iterable().shuffle(seed=1)
    state = stream.state_dict()
    worker = seal({**state, "worker": {"id": 1, "workers": 2, "unit": 8, "rank": 0, "world_size": 1, "epoch": 0,
                                       "start": 0, "rows": 16}})  # (sealed: as a worker saves it)
    with pytest.raises(ValueError, match="DataLoader worker 1 of 2's own state; restore it through the "
                                         "StatefulDataLoader"):
        cache.to_iterable().shuffle(seed=1).load_state_dict(worker)
    with pytest.raises(ValueError, match="the saved stream had seed=1, this one has 2"):
        cache.to_iterable().shuffle(seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="read another dataset, mix or order"):
        cache.select(range(ROWS)).to_iterable().shuffle(seed=1, window_blocks=3).load_state_dict(state)
    old = {"epoch": 0, "consumed": 5, "seed": 1, "world_size": 1, "num_rows": ROWS}
    with pytest.raises(ValueError, match="has format None, this version reads format 2"):
        cache.to_iterable().shuffle(seed=1).load_state_dict(old)
    with pytest.raises(ValueError, match=f"consumed {ROWS + 1} rows, but an epoch has {ROWS}"):
        cache.to_iterable().shuffle(seed=1).load_state_dict({**state, "consumed": ROWS + 1})
    late = seal({**state, "consumed": ROWS - 2})
    with pytest.raises(ValueError, match="2 rows of epoch 0 are left and drop_last=True on 3 ranks would drop them "
                                         "all; resume on at most 2 ranks, or with drop_last=False"):
        cache.to_iterable(rank=0, world_size=3, drop_last=True).shuffle(seed=1).load_state_dict(late)


@pytest.mark.parametrize("lanes", [False, True])
def test_a_stateful_dataloader_state_resumes_a_stream_on_another_cluster_size(cache, lanes):
    """StatefulDataLoader on 2 ranks x 2 workers, batch 6; its whole state loads into streams on 3 ranks."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    served, states = [], []
    for rank in range(2):
        stream = cache.to_iterable(rank=rank, world_size=2, loader_batch_size=6, lanes=lanes).shuffle(seed=8)
        loader = StatefulDataLoader(stream, batch_size=6, num_workers=2)
        iterator = iter(loader)
        served += [int(i) for _ in range(5) for i in next(iterator)["idx"]]
        states.append(json.loads(json.dumps(loader.state_dict())))
        del iterator
    for rank in range(3):
        resumed = cache.to_iterable(rank=rank, world_size=3, lanes=lanes).shuffle(seed=8)
        resumed.load_state_dict(states[rank % 2])  # either rank's loader state
        assert resumed.state_dict().get("lanes") == ([2, 2, 6] if lanes else None)
        served += [int(r["idx"]) for r in resumed]
    assert sorted(served) == list(range(ROWS))
    dealt_in_other_units = cache.to_iterable(loader_batch_size=4).shuffle(seed=8)  # a unit that is not the batch
    loader = StatefulDataLoader(dealt_in_other_units, batch_size=6, num_workers=2)
    iterator = iter(loader)
    [next(iterator) for _ in range(3)]
    state = loader.state_dict()
    del iterator
    with pytest.raises(ValueError, match="not a prefix of the rank's rows dealt in units of 4; pass "
                                         "loader_batch_size="):
        cache.to_iterable().shuffle(seed=8).load_state_dict(state)


def test_a_plain_dataloader_state_names_the_lanes_its_workers_read(cache):
    """Workers of a plain DataLoader begin the epoch in lanes of their own count; `state_dict(consumed=)` in the
    main process names them (the workers say how many they are), so the resume serves exactly the rest."""
    def stream():
        return cache.to_iterable(loader_batch_size=10, lanes=True).shuffle(seed=2)

    first = stream()
    iterator = iter(torch.utils.data.DataLoader(first, batch_size=10, num_workers=2))
    head = ids(next(iterator) for _ in range(6))
    del iterator
    state = json.loads(json.dumps(first.state_dict(consumed=60)))
    assert state["consumed"] == 60 and state["lanes"] == [1, 2, 10]
    order = [int(i) for i in stream().rank_order(lanes=Lanes(1, 1, 1))]
    assert head == order[0:10] + order[150:160] + order[10:20] + order[160:170] + order[20:30] + order[170:180]
    resumed = stream()
    resumed.load_state_dict(state)
    rest = [int(row["idx"]) for row in resumed]
    assert sorted(head + rest) == list(range(ROWS))


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_a_stateful_dataloader_state_moves_to_another_num_workers_through_the_stream(cache, workers):
    """torchdata refuses its own state in a loader of another `num_workers` (an AssertionError of its own); loaded
    into the stream, then read by a loader of any `num_workers`, it serves exactly the rest, in the same order."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def stream():
        return cache.to_iterable(loader_batch_size=8).shuffle(seed=5)

    whole = ids(StatefulDataLoader(stream(), batch_size=8, num_workers=2))
    loader = StatefulDataLoader(stream(), batch_size=8, num_workers=2)
    iterator = iter(loader)
    head = ids(next(iterator) for _ in range(5))
    saved = json.loads(json.dumps(loader.state_dict()))
    del iterator
    other = StatefulDataLoader(stream(), batch_size=8, num_workers=workers)
    other.load_state_dict(saved)
    with pytest.raises(AssertionError):  # torchdata's own check, whatever the dataset, when it starts
        next(iter(other))
    resumed = stream()
    resumed.load_state_dict(saved)
    assert head + ids(StatefulDataLoader(resumed, batch_size=8, num_workers=workers)) == whole


@pytest.mark.parametrize(("workers", "batch"), [(0, 8), (1, 5), (3, 8)])
def test_a_stateful_dataloader_state_moves_to_another_num_workers_with_nothing_chosen_before_saving(cache, workers,
                                                                                                 batch):
    """Issue 37 item 7: the stream reads the loader's batch size in its workers (fetch_probe), so a stream given
    no loader_batch_size= deals whole batches and its torchdata state moves to any num_workers. Before: "cannot
    merge exactly: ... pass loader_batch_size= equal to the loader's batch_size" (rows were dealt one at a time)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def stream():
        return cache.to_iterable().shuffle(seed=5)

    whole = ids(StatefulDataLoader(stream(), batch_size=batch, num_workers=2))
    assert sorted(whole) == list(range(ROWS))
    loader = StatefulDataLoader(stream(), batch_size=batch, num_workers=2)
    iterator = iter(loader)
    head = ids(next(iterator) for _ in range(5))
    saved = json.loads(json.dumps(loader.state_dict()))
    del iterator
    resumed = stream()
    resumed.load_state_dict(saved)
    assert head + ids(StatefulDataLoader(resumed, batch_size=batch, num_workers=workers)) == whole
    again = StatefulDataLoader(stream(), batch_size=batch, num_workers=2)  # the same num_workers: torchdata's own
    again.load_state_dict(saved)
    assert head + ids(again) == whole


@settings(max_examples=6, deadline=None)
@example(saved_with=2, resumed_with=2, batch=4, steps=1).via("a worker had delivered nothing")
@example(saved_with=1, resumed_with=0, batch=6, steps=11).via("saved after the loader ran out")
@given(saved_with=st.integers(1, 3), resumed_with=st.integers(0, 3), batch=st.integers(1, 9), steps=st.integers(0, 12))
def test_a_stateful_dataloader_state_saved_anywhere_moves_to_any_num_workers(index_cache, saved_with, resumed_with,
                                                                            batch, steps):
    """Saved after any number of batches with w workers (none of the stream's settings chosen), resumed through the
    stream with w' workers: the rows delivered before and after are the epoch, each exactly once."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    source = index_cache(60, layout_options={"batch_rows": 16})
    loader = StatefulDataLoader(source.to_iterable().shuffle(seed=3), batch_size=batch, num_workers=saved_with)
    iterator = iter(loader)
    head = ids(batch_rows for _, batch_rows in zip(range(steps), iterator))
    saved = json.loads(json.dumps(loader.state_dict()))
    del iterator
    resumed = source.to_iterable().shuffle(seed=3)
    resumed.load_state_dict(saved)
    tail = ids(StatefulDataLoader(resumed, batch_size=batch, num_workers=resumed_with))
    if saved["_iterator_finished"]:  # saved after the loader ran out: the next epoch whole, as torchdata resumes it
        assert sorted(head) == sorted(tail) == list(range(60)) and tail != head
    else:
        assert sorted(head + tail) == list(range(60))
    same = StatefulDataLoader(source.to_iterable().shuffle(seed=3), batch_size=batch, num_workers=saved_with)
    same.load_state_dict(saved)  # torchdata's own resume (a worker that served nothing saved before its first fetch)
    assert ids(same) == tail
