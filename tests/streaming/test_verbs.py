"""Hugging Face's iterable verbs on streams (take, skip, filter, shuffle(buffer_size=), with_format, features),
each keeping resume exact."""

from __future__ import annotations

import json

import numpy as np
import pytest

import stable_datasets as sds

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
    with pytest.raises(ValueError, match="shuffle\\(\\) after take\\(\\)/skip\\(\\) shuffles the rows kept.*cuts a "
                                         "shuffled order: call shuffle\\(\\) before take\\(\\)/skip\\(\\)"):
        cache.to_iterable().shuffle(seed=2).take(5).shuffle(seed=1)
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


# -- Hugging Face's IterableDataset side by side (issue 37 item 1): verbs in any order, indexing, formats ----------
hf = pytest.importorskip("datasets")
HF_ROWS = 20  # HF's tests' DEFAULT_N_EXAMPLES


def _pair(n: int = HF_ROWS):
    """(ours, HF's): the same rows {"id": i, "text": "r<i>"} as a stream each, from in-memory data (offline)."""
    data = {"id": list(range(n)), "text": [f"r{i}" for i in range(n)]}
    return sds.StableDataset.from_dict(data).to_iterable(), hf.Dataset.from_dict(data).to_iterable_dataset()


def _add_100(row):
    return {**row, "id": row["id"] + 100}


def _even(row):
    return row["id"] % 2 == 0


VERB_CHAINS = {  # name -> the chain, applied to either stream (the verbs both spell the same)
    "map.take": lambda s: s.map(_add_100).take(5),
    "map.skip": lambda s: s.map(_add_100).skip(3),
    "map.skip.take": lambda s: s.map(_add_100).skip(3).take(4),
    "skip.filter": lambda s: s.skip(5).filter(_even),
    "take.filter.map": lambda s: s.take(9).filter(_even).map(_add_100),
    "take 0": lambda s: s.take(0),
    "take 2": lambda s: s.take(2),
    "take 1e10": lambda s: s.take(int(1e10)),  # HF's test_iterable_dataset_take counts
    "skip 0": lambda s: s.skip(0),
    "skip 2": lambda s: s.skip(2),
    "skip 1e10": lambda s: s.skip(int(1e10)),
}


@pytest.mark.parametrize("chain", sorted(VERB_CHAINS))
def test_verbs_in_any_order_serve_hugging_faces_rows(chain):
    ours, theirs = _pair()
    assert list(VERB_CHAINS[chain](ours)) == list(VERB_CHAINS[chain](theirs))


@pytest.mark.parametrize("method", ["skip", "take"])
@pytest.mark.parametrize("count", [2, 5, 11])
def test_shuffle_after_skip_or_take_shuffles_the_rows_kept(method, count):
    """HF's test_iterable_dataset_skip_or_take_after_shuffle (after_shuffle=False): shuffling a skipped/taken stream
    keeps the same rows; ours is seeded by position, so it also resumes exactly."""
    ours, theirs = _pair()
    cut = (lambda s: s.skip(count)) if method == "skip" else (lambda s: s.take(count))
    mine = [r["id"] for r in cut(ours).shuffle(seed=42, buffer_size=HF_ROWS)]
    hfs = [r["id"] for r in cut(theirs).shuffle(seed=42, buffer_size=HF_ROWS)]
    assert sorted(mine) == sorted(hfs) == (list(range(count, HF_ROWS)) if method == "skip" else list(range(count)))
    stream = cut(ours).shuffle(seed=42, buffer_size=HF_ROWS)
    iterator = iter(stream)
    head = [next(iterator)["id"] for _ in range(min(2, len(mine)))]
    again = cut(_pair()[0]).shuffle(seed=42, buffer_size=HF_ROWS)
    again.load_state_dict(json.loads(json.dumps(stream.state_dict())))
    assert head + [r["id"] for r in again] == mine


def test_take_or_skip_after_a_filter_is_refused_saying_why():
    """A documented difference: HF's filter(f).take(n) keeps the first n rows kept; a stream cuts its order by
    position (so that every state resumes exactly), and the n-th row kept has none known in advance."""
    ours, _ = _pair()
    with pytest.raises(ValueError, match="call take\\(\\)/skip\\(\\) before filter\\(\\)"):
        ours.filter(_even).take(3)


def test_a_stream_cannot_be_indexed():
    ours, _ = _pair()
    for key in (0, -1, slice(0, 2)):
        with pytest.raises(TypeError, match="a stream cannot be indexed .*use take/skip, or drop streaming=True"):
            ours[key]


def _append_z(table):
    return table.append_column("z", table["id"])


def _times_ten(frame):
    return frame.assign(id=frame["id"] * 10)


def _odd_frame(frame):
    return bool(frame["id"].iloc[0] % 2)


@pytest.mark.parametrize(("fmt", "verb", "function"), [("arrow", "map", _append_z), ("pandas", "map", _times_ten),
                                                       ("pandas", "filter", _odd_frame)])
def test_a_map_in_a_table_format_then_no_format_serves_hugging_faces_rows(fmt, verb, function):
    """with_format("arrow"|"pandas"), then map()/filter() (given one-row tables, as HF gives them), then
    with_format(None): HF's dicts; and without the last with_format, tables of that kind."""
    ours, theirs = _pair(6)
    mine = getattr(ours.with_format(fmt), verb)(function)
    hfs = getattr(theirs.with_format(fmt), verb)(function)
    assert list(mine.with_format(None)) == list(hfs.with_format(None))
    first, hf_first = next(iter(mine)), next(iter(hfs))
    assert type(first) is type(hf_first)
    assert first.to_pylist() == hf_first.to_pylist() if fmt == "arrow" else first.equals(hf_first)


# -- a peek does not eat the epoch (issue 37 item 2), side by side with HF --------------------------------------
def test_a_peek_then_a_loop_serves_the_whole_epoch_as_hugging_face_does():
    ours, theirs = _pair(8)
    assert next(iter(ours)) == next(iter(theirs)) == {"id": 0, "text": "r0"}
    assert [r["id"] for r in ours] == [r["id"] for r in theirs] == list(range(8))


def test_a_new_iter_starts_where_the_last_load_put_the_stream_as_hugging_face_does():
    ours, theirs = _pair(8)
    for stream in (ours, theirs):
        iterator = iter(stream)
        [next(iterator) for _ in range(3)]
    mine, hfs = _pair(8)
    mine.load_state_dict(json.loads(json.dumps(ours.state_dict())))
    hfs.load_state_dict(theirs.state_dict())
    for stream in (mine, hfs):
        assert next(iter(stream))["id"] == 3  # a peek at the loaded position
        broken = iter(stream)
        assert [next(broken)["id"] for _ in range(2)] == [3, 4]  # a loop broken off
    assert [r["id"] for r in mine] == [r["id"] for r in hfs] == [3, 4, 5, 6, 7]


def test_a_pass_run_to_its_end_moves_the_stream_to_the_next_epoch():
    """Where streams differ from HF (which stays in its epoch until set_epoch): a pass run to the end moves on, so
    a training loop over epochs needs no set_epoch and a state saved then names the next epoch's start."""
    ours, _ = _pair(8)
    shuffled = ours.shuffle(seed=1)
    first = [r["id"] for r in shuffled]
    assert (shuffled.epoch, shuffled.consumed) == (1, 0)
    next(iter(shuffled))
    second = [r["id"] for r in shuffled]
    assert sorted(second) == sorted(first) and second != first and shuffled.epoch == 2


@pytest.mark.parametrize("workers", [0, 2])
def test_a_broken_loader_loop_starts_the_epoch_again(cache, workers):
    """A StreamingDataLoader loop broken off after 2 batches, then a new loop: the whole epoch from its start (as
    a new iter() of the stream); a loop run to its end then serves the next epoch."""
    def ids(batches):
        return [int(v) for b in batches for v in b["idx"]]

    loader = StreamingDataLoader(cache.to_iterable().shuffle(seed=6).take(40), batch_size=10, num_workers=workers)
    iterator = iter(loader)
    head = ids(next(iterator) for _ in range(2))
    del iterator
    whole = ids(loader)
    assert whole[:20] == head and len(whole) == 40
    nxt = ids(loader)  # the first 40 rows of epoch 1's order
    expected = cache.to_iterable().shuffle(seed=6).take(40)
    expected.set_epoch(1)
    assert nxt == idx(expected) and nxt != whole


@pytest.mark.parametrize("loader", ["plain", "stateful"])
def test_workers_that_served_an_epoch_whole_move_the_next_pass_to_the_next_epoch(cache, loader):
    """A plain DataLoader (and torchdata's) with 2 workers: the main process's stream never iterates, yet the second
    and third passes serve epochs 1 and 2 (the worker serving the last unit tells the stream), each in the order the
    stream serves that epoch in this process."""
    def stream():
        return cache.to_iterable(loader_batch_size=8).shuffle(seed=9).take(64)

    if loader == "plain":
        made = torch.utils.data.DataLoader(stream(), batch_size=8, num_workers=2)
    else:
        made = pytest.importorskip("torchdata.stateful_dataloader").StatefulDataLoader(stream(), batch_size=8,
                                                                                        num_workers=2)
    for epoch in range(3):
        expected = stream()
        expected.set_epoch(epoch)
        assert [int(v) for b in made for v in b["idx"]] == idx(expected), f"epoch {epoch}"


def test_set_epoch_reaches_persistent_workers_and_a_pickled_copy_keeps_its_own(cache):
    """HF's test_iterable_dataset_persists_epoch_in_torch_workers: with persistent workers the same epoch comes
    back until set_epoch (the workers never end... their copies stay put), set_epoch in the main process reaches
    them, and a pickled copy's set_epoch is its own."""
    import pickle

    stream = cache.to_iterable().shuffle(seed=42).take(30)
    loader = torch.utils.data.DataLoader(stream, num_workers=1, persistent_workers=True)
    epoch0 = [int(b["idx"]) for b in loader]
    assert [int(b["idx"]) for b in loader] != epoch0  # (ours: a pass run to its end moves on; HF stays in it)
    stream.set_epoch(5)
    epoch5 = [int(b["idx"]) for b in loader]
    expected = cache.to_iterable().shuffle(seed=42).take(30)
    expected.set_epoch(5)
    assert epoch5 == idx(expected)
    copy = pickle.loads(pickle.dumps(stream))
    copied = torch.utils.data.DataLoader(copy, num_workers=1, persistent_workers=True)
    first = [int(b["idx"]) for b in copied]
    stream.set_epoch(9)  # does not reach the copy's workers
    copy.set_epoch(7)
    expected.set_epoch(7)
    assert [int(b["idx"]) for b in copied] == idx(expected) and first != idx(expected)


def test_a_map_after_a_table_format_map_may_return_any_row():
    """Maps in the rows' own format return what training wants (a tuple here), after a map given tables too."""
    ours, _ = _pair(4)
    pairs = ours.with_format("arrow").map(_append_z).with_format("numpy").map(lambda r: (int(r["z"]), r["text"]))
    assert list(pairs) == [(0, "r0"), (1, "r1"), (2, "r2"), (3, "r3")]
    assert list(ours.map(lambda r: (r["id"], r["text"])).take(2)) == [(0, "r0"), (1, "r1")]
