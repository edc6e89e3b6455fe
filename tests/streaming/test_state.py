"""Saved stream states are checked whole: forged, partial, edited or foreign states are refused with one
`StateError` line at `load_state_dict` (through the stream, StreamingDataLoader and torchdata's
StatefulDataLoader), never a bare OverflowError/TypeError/KeyError later, and never a resume that serves the
wrong rows."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.errors import StateError
from stable_datasets.streaming import StreamingDataset
from stable_datasets.streaming.state import MAX_EPOCH

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402


class Ids:
    """A map-style dataset whose row i is i, stored in blocks of `block` rows."""

    def __init__(self, rows: int, block: int = 7):
        self.bounds = np.append(np.arange(0, rows, block), rows).astype(np.int64)

    def __len__(self):
        return int(self.bounds[-1])

    def __getitem__(self, i):
        return int(i)

    def block_bounds(self):
        return self.bounds


ROWS = 90


def stream(rows: int = ROWS, lanes: bool = True, seed: int = 3, **options) -> StreamingDataset:
    return StreamingDataset(Ids(rows), lanes=lanes, **options).shuffle(seed=seed, window_blocks=2)


def saved_midway(steps: int = 20, **options) -> tuple[dict, list[int]]:
    """A state after `steps` rows, as JSON, and the rows a correct resume serves (the rest of the epoch)."""
    first = stream(**options)
    iterator = iter(first)
    for _ in range(steps):
        next(iterator)
    state = json.loads(json.dumps(first.state_dict()))
    return state, [int(i) for i in first.rank_order(start=state["consumed"], lanes=first._lanes)]


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize("key", ["order", "num_rows", "seed", "epoch", "consumed", "drop_last", "format", "check"])
def test_a_state_missing_any_key_is_refused_naming_it(key):
    """Before: a state without `order` or `num_rows` loaded (its identity was compared only when present)."""
    state, _ = saved_midway()
    partial = {k: v for k, v in state.items() if k != key}
    with pytest.raises(StateError, match="^cannot resume: ") as error:
        stream().load_state_dict(partial)
    assert repr(key) in one_line(error.value) or f"{key} must be" in one_line(error.value) or key == "format"


def test_lanes_that_do_not_describe_the_saved_pass_are_refused():
    """Before: lanes edited ([1, 1, 1] -> [1, 2, 4]), dropped, or added to a row-stripe state loaded, and the rest
    of the epoch was served in another relabeling of the order: rows served twice and rows never served."""
    state, rest = saved_midway()
    assert state["lanes"] == [1, 1, 1]
    resumed = stream()
    resumed.load_state_dict(state)
    assert [int(i) for i in resumed] == rest  # the state as saved resumes exactly
    no_lanes, _ = saved_midway(lanes=False)
    for forged in ({**state, "lanes": [1, 2, 4]}, {k: v for k, v in state.items() if k != "lanes"},
                   {**no_lanes, "lanes": [1, 3, 2]}):
        with pytest.raises(StateError, match=r"^cannot resume: the saved stream state was changed after it was "
                                             r"saved \(its 'check' does not match its keys "):
            stream().load_state_dict(forged)
    with pytest.raises(StateError, match=r"^cannot resume: the saved stream's lanes must be \[world_size, workers, "
                                         r"unit\], got 'x'$"):
        stream().load_state_dict({**state, "lanes": "x"})
    with pytest.raises(StateError, match=r"^cannot resume: lanes: 1 ranks x 1 workers x units of 4611686018427387904 "
                                         r"rows is past the limits"):
        stream().load_state_dict({**state, "lanes": [1, 1, 2**62]})


def test_absurd_numbers_are_refused_at_load_with_one_line():
    """Before: epoch 2**64 loaded and the next pass raised OverflowError inside numpy; set_epoch(2**64) too."""
    state, _ = saved_midway()
    with pytest.raises(StateError, match=rf"^cannot resume: the saved stream's epoch must be an int in \[0, "
                                         rf"{MAX_EPOCH}\], got 18446744073709551616 \(pass the state_dict\(\) of a "
                                         r"stream\)$"):
        stream().load_state_dict({**state, "epoch": 2**64})
    with pytest.raises(StateError, match=r"^cannot resume: the saved stream's consumed must be a non-negative int, "
                                         r"got -3 "):
        stream().load_state_dict({**state, "consumed": -3})
    with pytest.raises(StateError, match=r"^cannot resume: the saved stream's drop_last must be a bool, got 'no'$"):
        stream().load_state_dict({**state, "drop_last": "no"})
    with pytest.raises(StateError, match=rf"^a stream's epoch must be an int in \[0, {MAX_EPOCH}\], got "
                                         r"18446744073709551616$"):
        stream().set_epoch(2**64)
    late = stream()
    late.set_epoch(MAX_EPOCH)  # the largest epoch is served
    assert sorted(int(i) for i in late) == list(range(ROWS))


def test_a_mix_without_a_seed_records_the_seed_it_drew():
    """Before: a mix given no seed saved seed 0 (the stream's own), so the draws it made could not be named; now
    the state records the mix's seed, a mix built with it resumes, another mix is refused naming the seed."""
    sources = [StreamingDataset(Ids(40)), StreamingDataset(Ids(30))]
    mix = sds.interleave_datasets(sources, probabilities=[0.5, 0.5])
    iterator = iter(mix)
    head = [next(iterator) for _ in range(10)]
    state = json.loads(json.dumps(mix.state_dict()))
    drawn = state["mix_seed"]
    assert isinstance(drawn, int) and 0 <= drawn < 2**63
    again = sds.interleave_datasets(sources, probabilities=[0.5, 0.5], seed=drawn)
    whole = list(again)
    again.load_state_dict(state)
    assert head + list(again) == whole
    other = sds.interleave_datasets(sources, probabilities=[0.5, 0.5])
    with pytest.raises(StateError, match=rf"^cannot resume: the saved mix drew its sources with seed {drawn}, this "
                                         rf"one with {other.state_dict()['mix_seed']}; pass interleave_datasets\(..., "
                                         rf"seed={drawn}\) to resume it$"):
        other.load_state_dict(state)


# -- forged states, by hypothesis: only a StateError line or an exact resume comes out -------------------------

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([2**63, 2**64, -1]),
                 st.floats(allow_nan=True), st.text(max_size=5), st.lists(st.integers(-3, 2**40), max_size=4),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def mutations(draw):
    """A list of edits to a saved state: drop a key, set a key (known or new) to junk or a nearby number."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(["format", "epoch", "num_rows", "seed", "order", "drop_last", "consumed",
                                    "lanes", "check", "worker", "rank", "files"]))
        kind = draw(st.sampled_from(["drop", "junk", "near"]))
        value = draw(JUNK) if kind == "junk" else draw(st.integers(-2, 2))
        edits.append((key, kind, value))
    return edits


def apply(state: dict, edits) -> dict:
    forged = copy.deepcopy(state)
    for key, kind, value in edits:
        if kind == "drop":
            forged.pop(key, None)
        elif kind == "junk":
            forged[key] = value
        elif isinstance(forged.get(key), int) and not isinstance(forged.get(key), bool):
            forged[key] += value
        elif key == "lanes" and isinstance(forged.get(key), list):
            forged[key] = [max(1, v + value) for v in forged[key]]
    return forged


def resume_or_refuse(make, state, rest):
    """Load a state into a fresh stream and read the rest of the epoch: a StateError line, or exactly `rest`."""
    resumed = make()
    try:
        resumed.load_state_dict(state)
    except StateError as error:
        assert one_line(error).startswith(("cannot resume", "cannot merge"))
        return
    assert [int(i) for i in resumed] == rest


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=mutations(), steps=st.integers(1, ROWS - 1), lanes=st.booleans())
def test_a_forged_state_is_refused_in_one_line_or_resumes_exactly(edits, steps, lanes):
    state, rest = saved_midway(steps, lanes=lanes)
    resume_or_refuse(lambda: stream(lanes=lanes), apply(state, edits), rest)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(2, 120), seed=st.integers(0, 5), steps=st.integers(1, 40), lanes=st.booleans())
def test_a_foreign_state_of_another_dataset_is_refused(rows, seed, steps, lanes):
    """A state of another dataset, length or seed, saved as it was: refused (its identity differs), never
    resumed into this stream."""
    steps = min(steps, rows - 1)
    other = stream(rows, lanes=lanes, seed=seed)
    iterator = iter(other)
    for _ in range(steps):
        next(iterator)
    foreign = json.loads(json.dumps(other.state_dict()))
    if (rows, seed) == (ROWS, 3):
        return  # the same stream: not foreign
    with pytest.raises(StateError, match="^cannot resume: ") as error:
        stream(lanes=lanes).load_state_dict(foreign)
    one_line(error.value)


@settings(max_examples=60, deadline=None)
@given(edits=mutations(), steps=st.integers(1, 10))
def test_a_forged_state_through_streaming_dataloader_is_refused_or_resumes(edits, steps):
    loader = StreamingDataLoader(stream(), batch_size=4)
    iterator = iter(loader)
    for _ in range(steps):
        next(iterator)
    state = json.loads(json.dumps(loader.state_dict()))
    fresh = stream()
    fresh.loader_batch_size = 4
    rest = [int(i) for i in fresh.rank_order(start=state["consumed"], lanes=loader._holder._lanes)]

    def make():
        return StreamingDataLoader(stream(), batch_size=4)

    resumed = make()
    try:
        resumed.load_state_dict(apply(state, edits))
    except StateError as error:
        assert one_line(error).startswith("cannot resume")
        return
    assert [int(i) for batch in resumed for i in batch] == rest


def stateful_state(workers: int) -> tuple[dict, list[int]]:
    """A torchdata StatefulDataLoader's whole state after 3 batches of 4, and the rows of the epoch it served."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    loader = StatefulDataLoader(stream(loader_batch_size=4), batch_size=4, num_workers=workers)
    iterator = iter(loader)
    served = [int(i) for _ in range(3) for i in next(iterator)]
    state = json.loads(json.dumps(loader.state_dict()))
    del iterator
    return state, served


def leaves(tree, path=()):
    """Every (path, value) of a nested JSON state."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield (*path, key), value
            yield from leaves(value, (*path, key))


@pytest.mark.parametrize("workers", [0, 2])
def test_forged_stateful_dataloader_states_are_refused_by_the_stream_in_one_line(workers):
    """Every key of a StatefulDataLoader's state (torchdata's and ours inside) dropped or set to junk, loaded
    into the stream (which merges the workers' states): a StateError line or the rows not yet served. Before: a
    KeyError, TypeError or AttributeError from the merge of forged worker states."""
    state, served = stateful_state(workers)
    for path, _ in list(leaves(state)):
        for value in ("drop", None, -1, 2**64, "x", [1]):
            forged = copy.deepcopy(state)
            holder = forged
            for key in path[:-1]:
                holder = holder[key]
            if value == "drop":
                del holder[path[-1]]
            else:
                holder[path[-1]] = value
            resumed = stream()
            try:
                resumed.load_state_dict(forged)
            except StateError as error:
                assert one_line(error).startswith(("cannot resume", "cannot merge"))
                continue
            assert sorted(served + [int(i) for i in resumed]) == list(range(ROWS)), path


def test_absurd_stream_arguments_are_refused_in_one_line_not_overflowing_in_numpy():
    """Before: window_blocks=2**64 and world_size=2**64 raised OverflowError ('Python int too large to convert to C
    long') from numpy; loader_batch_size=-1 was accepted; max_block_rows=-1 blamed the block bounds; select([2**64])
    overflowed. A window larger than the blocks is all of them."""
    assert sorted(StreamingDataset(Ids(30), shuffle=True, window_blocks=2**64)) == list(range(30))
    for options, message in [({"rank": 0, "world_size": 2**64}, r"world_size must be an int in \[1, 16777216\], got "),
                             ({"loader_batch_size": -1}, r"loader_batch_size must be None or an int in \[1, 2\*\*32\]"),
                             ({"max_block_rows": -1}, "max_block_rows must be None or a positive int, got -1")]:
        with pytest.raises(ValueError, match=f"^{message}") as error:
            StreamingDataset(Ids(30), **options)
        one_line(error.value)
    with pytest.raises(IndexError, match=r"^select: an index is out of range \(past 2\*\*63"):
        sds.StableDataset.from_dict({"x": [1, 2]}).select([2**64])
