"""Resume proven at every step (tests/streaming/resume_harness.py), for every kind of stream, through both
loaders, and golden orders that must not change.

Golden orders (`GOLDEN`) pin the first row ids of standard configurations. A release that changes one
breaks every saved checkpoint of that configuration silently (a state is a position in the order), so a
change must be deliberate and announced: add a changelog line (CHANGELOG.md at the repository root)
saying which orders changed and why, bump `STATE_FORMAT` in stable_datasets/streaming/state.py (old
states are then refused by name instead of resuming at a wrong row), and update the pinned ids and the
pinned format here in the same commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.streaming import StreamingDataset
from stable_datasets.streaming.state import STATE_FORMAT
from tests.streaming.resume_harness import (
    CONFIGS,
    batch_ids,
    failures_at_every_step,
    ids_source,
    json_round_trip,
    loader_failures,
    restore_in_subprocess,
    resumed,
    row_id,
    run,
    write_files,
)

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


# -- every step, in this process: a fresh stream object per state, and a second resume from each -----------
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_step_resumes_the_exact_suffix_twice_in_a_row(config, data_dir):
    """For each k: the state after k rows, loaded into a fresh stream, serves exactly rows k.. of the recorded
    pass; and a stream resumed from it, stopped half way through the rest and resumed again, does too."""
    make = lambda: CONFIGS[config](data_dir)  # noqa: E731
    full, _ = run(make())
    assert len(full) >= 5  # a real pass (mixes that oversample serve some rows twice)
    assert failures_at_every_step(make) == []


def test_a_sample_of_steps_resumes_in_a_fresh_process(data_dir, tmp_path):
    """The states of a sample of steps (start, 1, middle, last row, end), saved as JSON, restored by another
    Python process into streams it builds itself, serve the recorded suffixes."""
    names = ["shuffle_buffer", "mix_round_robin", "mix_probabilities", "mix_all_exhausted", "mix_sized", "filter",
             "pack_stream_shuffled", "json_files_shuffled", "csv_files"]
    expected, states = {}, {}
    for name in names:
        full, saved = run(CONFIGS[name](data_dir))
        ks = sorted({0, 1, len(full) // 2, len(full) - 1, len(full)})
        states[name] = [saved[k] for k in ks]
        expected[name] = [full[k:] for k in ks]
    assert restore_in_subprocess(states, data_dir, tmp_path) == expected


# -- the traps of 2026: a state after exhaustion, iter() before load_state_dict --------------------------------
@pytest.mark.parametrize("config", ["shuffle", "mix_probabilities", "json_files_shuffled", "pack_stream_shuffled",
                                    "mix_sized_unshuffled_partial"])
def test_a_state_taken_after_exhaustion_resumes_at_the_next_epoch(config, data_dir):
    """After a whole pass the state names the next epoch at its start: a fresh stream that loads it serves
    that epoch whole, as the stream that saved it does, and not the finished epoch again."""
    stream = CONFIGS[config](data_dir)
    first = [row_id(r) for r in stream]
    state = json_round_trip(stream.state_dict())
    assert (state["epoch"], state["consumed"]) == (1, 0)
    second = [row_id(r) for r in stream]
    assert resumed(lambda: CONFIGS[config](data_dir), state) == second
    assert len(second) == len(first)
    if not config.startswith("mix"):  # (a mix that subsamples a source draws other rows of it next epoch)
        assert sorted(second) == sorted(first)


@pytest.mark.parametrize("config", ["shuffle_buffer", "mix_sized", "filter", "csv_files_shuffled"])
def test_iter_called_before_load_state_dict_still_resumes(config, data_dir):
    """HF 5.0's trap: an iterator made before `load_state_dict`, or a peek at the first row, must not restart
    the epoch: what is read after the load is the saved suffix."""
    full, states = run(CONFIGS[config](data_dir))
    k = len(full) // 3
    early = CONFIGS[config](data_dir)
    iterator = iter(early)  # made, not started
    early.load_state_dict(states[k])
    assert [row_id(r) for r in iterator] == full[k:]
    peeked = CONFIGS[config](data_dir)
    assert row_id(next(iter(peeked))) == full[0]
    peeked.load_state_dict(states[k])
    assert [row_id(r) for r in peeked] == full[k:]


def test_a_round_robin_mix_without_a_seed_resumes_in_a_fresh_mix():
    """Bug found by the harness (config mix_round_robin, k=0..20): a round-robin mix given no seed drew a random
    seed it never uses, so a fresh mix refused its state ("the saved mix drew its sources with seed 26784..., this
    one with 65227...") though the order is the same; now it resumes, with mix_seed 0."""
    def make():
        return sds.interleave_datasets([ids_source(10).to_iterable(), ids_source(16, 100).to_iterable()])

    full, states = run(make())
    assert full[:6] == [0, 100, 1, 101, 2, 102] and len(full) == 19 and states[5]["mix_seed"] == 0  # (HF's count)
    assert resumed(make, states[5]) == full[5:]


def test_iter_on_a_loader_before_load_state_dict_still_resumes(data_dir):
    """An iterator of a StreamingDataLoader made before `load_state_dict` serves the saved suffix."""
    def make_loader():
        return StreamingDataLoader(CONFIGS["shuffle_buffer"](data_dir), batch_size=4)

    loader = make_loader()
    full = [batch_ids(b) for b in make_loader()]
    iterator = iter(loader)
    assert batch_ids(next(iterator)) == full[0]
    state = json_round_trip(loader.state_dict())
    fresh = make_loader()
    early = iter(fresh)
    fresh.load_state_dict(state)
    assert [batch_ids(b) for b in early] == full[1:]


# -- through the loaders: 0, 1 and 2 workers --------------------------------------------------------------
def _with_loader_batch(stream: StreamingDataset, size: int) -> StreamingDataset:
    stream.loader_batch_size = size
    return stream


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("config", ["shuffle_buffer", "mix_probabilities", "json_files_shuffled"])
def test_streaming_dataloader_resumes_every_batch(config, workers, data_dir):
    """StreamingDataLoader's state after k batches, in a fresh loader over a fresh stream, gives the rest of the
    batches, for every k (with workers: the start, two middles and the end, each restore starts workers)."""
    def make_loader():
        return StreamingDataLoader(CONFIGS[config](data_dir), batch_size=4, num_workers=workers)

    steps = None if workers == 0 else [0, 1, 3, 6]
    assert loader_failures(make_loader, steps) == []


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("config", ["shuffle_buffer", "filter", "json_files_shuffled", "mix_probabilities"])
def test_stateful_dataloader_resumes_every_batch(config, workers, data_dir):
    """torchdata's StatefulDataLoader (its state asks each worker) over a stream dealt in its batch size."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def make_loader():
        stream = _with_loader_batch(CONFIGS[config](data_dir), 4)
        return stateful.StatefulDataLoader(stream, batch_size=4, num_workers=workers)

    steps = None if workers == 0 else [0, 1, 3]
    assert loader_failures(make_loader, steps) == []


def _rows_as_list(rows):  # module level: DataLoader workers pickle it
    return rows


@pytest.mark.parametrize("loader", ["streaming", "stateful"])
@pytest.mark.parametrize("config", ["pack_stream_shuffled", "mix_sized", "mix_lanes_rank0_of_2", "batched",
                                    "map_skip_rank1_of_3"])
def test_both_loaders_with_two_workers_resume_packs_mixes_and_batches(config, loader, data_dir):
    """Packs, mosaic-style and laned mixes, batch() streams and a mapped rank of 3, through either loader with 2
    workers (rows kept as lists: packs do not collate): the state after 1 and 3 batches resumes the rest."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader") if loader == "stateful" else None

    def make_loader():
        stream = CONFIGS[config](data_dir)
        if config == "batched":  # the stream yields batches of 5 itself
            options = {"batch_size": None}
        else:
            options = {"batch_size": 3, "collate_fn": _rows_as_list}
            stream.loader_batch_size = 3
        cls = StreamingDataLoader if stateful is None else stateful.StatefulDataLoader
        return cls(stream, num_workers=2, **options)

    assert loader_failures(make_loader, [1, 3]) == []


@pytest.mark.parametrize("config", ["shuffle_buffer", "mix_probabilities", "json_files_shuffled", "pack_stream"])
def test_a_state_saved_in_the_second_epoch_resumes_it(config, data_dir):
    """After a whole first pass, the state after k rows of epoch 1, in a fresh stream, serves the rest of
    epoch 1 (its own order), for every k."""
    stream = CONFIGS[config](data_dir)
    list(stream)
    second, states = run(stream)
    assert all(state["epoch"] == 1 for state in states[:-1])
    for k, state in enumerate(states):
        assert resumed(lambda: CONFIGS[config](data_dir), state) == second[k:], f"k={k}"


@pytest.mark.parametrize(("loader", "workers"), [("streaming", 0), ("streaming", 2), ("stateful", 0), ("stateful", 2)])
def test_a_loader_state_taken_after_exhaustion_resumes_at_the_next_epoch(loader, workers, data_dir):
    """A loader's state saved after its loop ended, loaded into a fresh loader, serves the next epoch whole, as
    the loader that saved it does on its next pass (not the finished epoch again, not nothing).

    Was a bug with StatefulDataLoader and 2 workers (both passes served epoch 0's order: the workers' copies
    finished the epoch, the main process's stream stayed at epoch 0 and the next workers started from it); now
    the worker serving the pass's last unit tells the stream's shared flag (streaming.state.WorkerFlag)."""
    def make_loader():
        stream = _with_loader_batch(CONFIGS["shuffle_buffer"](data_dir), 4)
        if loader == "streaming":
            return StreamingDataLoader(stream, batch_size=4, num_workers=workers)
        stateful = pytest.importorskip("torchdata.stateful_dataloader")
        return stateful.StatefulDataLoader(stream, batch_size=4, num_workers=workers)

    first = make_loader()
    one = [batch_ids(b) for b in first]
    state = json_round_trip(first.state_dict())
    two = [batch_ids(b) for b in first]
    fresh = make_loader()
    fresh.load_state_dict(state)
    assert [batch_ids(b) for b in fresh] == two
    assert len(two) == len(one) == 6 and sorted(sum(two, [])) == list(range(24))
    assert two != one, "the next pass served the finished epoch's order again"


class _TorchdataStyleStream(torch.utils.data.IterableDataset):
    """A stream written as torchdata's own tests write one (position and epoch in state_dict; a pass that runs to
    its end moves to the next epoch, shuffled by it): the oracle for what a StatefulDataLoader state means."""

    def __init__(self, n: int = 24):
        self.n, self.epoch, self.position = n, 0, 0

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        mine = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.epoch)).tolist()[worker::workers]
        while self.position < len(mine):
            self.position += 1
            yield {"id": mine[self.position - 1]}
        self.epoch, self.position = self.epoch + 1, 0

    def state_dict(self):
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state):
        self.epoch, self.position = state["epoch"], state["position"]


def _exhausted_states(make_loader):
    """(the first pass's row ids, the state saved after its last batch, before the StopIteration; the state saved
    after the loop ended; the same loader's next pass)."""
    loader = make_loader()
    first, before_stop = [], None
    for batch in loader:
        first += batch_ids(batch)
        before_stop = json_round_trip(loader.state_dict())
    after_stop = json_round_trip(loader.state_dict())
    return first, before_stop, after_stop, [i for batch in loader for i in batch_ids(batch)]


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_a_stateful_loader_state_after_exhaustion_means_what_torchdata_says(workers, data_dir):
    """torchdata's own TestEndOfEpochBehavior and TestMultiEpochState: a StatefulDataLoader state saved after the
    loop ended serves the next epoch whole (in that epoch's order); one saved after the last batch, before the
    StopIteration, serves nothing, then the next epoch. Checked on a stream written as torchdata's tests write one
    (the oracle) and on ours, each loaded into a fresh StatefulDataLoader of the same num_workers, and ours also
    into a fresh stream and a fresh StreamingDataLoader (the merged worker states).

    Was a bug with workers (1 and 2): loaded into a stream or a StreamingDataLoader, the state saved after the
    loop ended served an empty epoch (the workers' states said every row of epoch 0 was served; torchdata's
    `_iterator_finished` was not read)."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def ours():
        return _with_loader_batch(CONFIGS["shuffle"](data_dir), 4)

    def ids(loader_or_stream):
        return [i for item in loader_or_stream for i in (batch_ids(item) if isinstance(item, list) else [row_id(item)])]

    # the oracle keeps its workers (as torchdata's multi-epoch test does): a fresh worker copy would restart epoch 0
    for make_stream, persistent in ((_TorchdataStyleStream, workers > 0), (ours, False)):
        def make_loader(make_stream=make_stream, persistent=persistent):
            return stateful.StatefulDataLoader(make_stream(), batch_size=4, num_workers=workers, collate_fn=list,
                                               persistent_workers=persistent)

        first, before_stop, after_stop, second = _exhausted_states(make_loader)
        assert sorted(first) == sorted(second) == list(range(24)) and second != first
        for state, passes in ((after_stop, [second]), (before_stop, [[], second])):
            fresh = make_loader()
            fresh.load_state_dict(state)
            assert [ids(fresh) for _ in passes] == passes
            if make_stream is ours:  # the loader's state loaded into a stream, and into our loader
                stream = ours()
                stream.load_state_dict(state)
                assert [ids(stream) for _ in passes] == passes
                loader = StreamingDataLoader(ours(), batch_size=4, num_workers=workers, collate_fn=list)
                loader.load_state_dict(state)
                assert [ids(loader) for _ in passes] == passes


@pytest.mark.parametrize("config", ["mix_probabilities", "json_files_shuffled", "mix_sized"])
def test_a_stateful_loader_state_after_exhaustion_loads_into_a_stream_as_the_next_epoch(config, data_dir):
    """As above for mixes and file streams, 2 workers: loaded into a fresh stream, the state saved after the loop
    ended serves epoch 1 whole, row for row as a stream that read epoch 0 to its end serves it (the rows of the
    loader's next pass; a file stream's workers deal whole files, so the loader's order is its own), and the one
    saved before the StopIteration an empty pass, then epoch 1."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def make_loader():
        return stateful.StatefulDataLoader(_with_loader_batch(CONFIGS[config](data_dir), 4), batch_size=4,
                                           num_workers=2, collate_fn=list)

    first, before_stop, after_stop, loader_second = _exhausted_states(make_loader)
    reference = CONFIGS[config](data_dir)
    assert [row_id(r) for r in reference] != []
    second = [row_id(r) for r in reference]  # epoch 1
    assert second != first and sorted(second) == sorted(loader_second)
    for state, passes in ((after_stop, [second]), (before_stop, [[], second])):
        stream = CONFIGS[config](data_dir)
        stream.load_state_dict(state)
        assert [[row_id(r) for r in stream] for _ in passes] == passes


def _stateful_states(config, workers, data_dir):
    """Row ids of a StatefulDataLoader's pass (batches of 4) and its state after each batch."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    loader = stateful.StatefulDataLoader(_with_loader_batch(CONFIGS[config](data_dir), 4), batch_size=4,
                                         num_workers=workers)
    rows, states = [], [json_round_trip(loader.state_dict())]
    for batch in loader:
        rows += batch_ids(batch)
        states.append(json_round_trip(loader.state_dict()))
    return rows, states


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("config", ["shuffle_buffer", "mix_probabilities", "json_files_shuffled"])
def test_a_stateful_dataloader_state_loads_into_a_stream_at_every_batch(config, workers, data_dir):
    """docs/training-streams.md: a StatefulDataLoader's whole state loads into a stream (`stream.load_state_dict(
    loader.state_dict())`), which serves the rest. Bug found (fixed): with num_workers=0 it was refused at every
    step ("this is no stream state (it has no format and no consumed)"): the stream's state sits in the
    loader's `dataset_state`. From the step every worker delivered a batch on (see the xfail below)."""
    rows, states = _stateful_states(config, workers, data_dir)
    for k in range(workers, len(states)):
        stream = _with_loader_batch(CONFIGS[config](data_dir), 4)
        stream.load_state_dict(states[k])
        if stream.epoch == 1:  # after a short last batch the loader read the stream to its end: the next epoch
            assert (k, stream.consumed, len(list(stream))) == (len(states) - 1, 0, len(rows))
            continue
        assert [row_id(r) for r in stream] == rows[4 * k:], f"k={k}"


@pytest.mark.parametrize("k", [0, 1])
def test_a_stateful_dataloader_state_before_every_worker_delivered_loads_into_a_stream(k, data_dir):
    """Was a bug (StateError "cannot merge: ... no per-worker stream states"): a worker that had delivered no batch
    saved the plain stream state; now it saves its pass's worker state with nothing served."""
    rows, states = _stateful_states("shuffle_buffer", 2, data_dir)
    stream = _with_loader_batch(CONFIGS["shuffle_buffer"](data_dir), 4)
    stream.load_state_dict(states[k])
    assert [row_id(r) for r in stream] == rows[4 * k:]


@pytest.mark.parametrize("source", ["ids", "json"])
def test_lanes_two_ranks_by_two_workers_resume_every_batch(source, data_dir):
    """2 ranks x 2 workers in lanes, batches of 2: each rank's loader resumes at every step, the ranks' states
    agree step by step (lockstep), and the two ranks together serve every row once."""
    def stream(rank):
        if source == "ids":
            return ids_source().to_iterable(rank=rank, world_size=2, lanes=True).shuffle(seed=0)
        files = sds.load_dataset("json", data_files=write_files(data_dir)["json"], split="train", streaming=True)
        return StreamingDataset(files.dataset, rank=rank, world_size=2, lanes=True).shuffle(seed=0, buffer_size=4)

    served, states = [], []
    for rank in range(2):
        loader = StreamingDataLoader(stream(rank), batch_size=2, num_workers=2)
        saved = [json_round_trip(loader.state_dict())]
        for batch in loader:
            served += batch_ids(batch)
            saved.append(json_round_trip(loader.state_dict()))
        states.append(saved)
        assert loader_failures(lambda r=rank: StreamingDataLoader(stream(r), batch_size=2, num_workers=2),
                               [1, 3, 5]) == []
    assert states[0][1:-1] == states[1][1:-1]  # one rank's state is everyone's (the last names the next epoch)
    assert sorted(served) == list(range(24))


def test_lanes_two_ranks_by_two_workers_through_stateful_dataloader_resume_and_merge():
    """The same 2 x 2 lanes through torchdata's StatefulDataLoader: each rank's loader resumes at every batch, and
    the ranks' states after 4 batches, merged into one stream on 1 rank without workers, serve the rest of the
    epoch: every row once."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def make_loader(rank):
        stream = ids_source().to_iterable(rank=rank, world_size=2, lanes=True, loader_batch_size=2).shuffle(seed=0)
        return stateful.StatefulDataLoader(stream, batch_size=2, num_workers=2)

    heads, states = [], []
    for rank in range(2):
        assert loader_failures(lambda r=rank: make_loader(r), [2, 5]) == []
        loader = make_loader(rank)
        iterator = iter(loader)
        heads += [i for _ in range(4) for i in batch_ids(next(iterator))]
        states.append(json_round_trip(loader.state_dict()))
        del iterator
    single = ids_source().to_iterable(lanes=True).shuffle(seed=0)
    single.load_state_dict(states[0])
    rest = [row_id(r) for r in single]
    assert len(heads) == 16 and sorted(heads + rest) == list(range(24))


# -- every rank gets data after shuffle() and after skip() on a node split ------------------------------------
def _worker_id(row):  # module level: a DataLoader worker runs it
    info = torch.utils.data.get_worker_info()
    return {**row, "worker": -1 if info is None else info.id}


@pytest.mark.parametrize("verbs", ["shuffle", "shuffle_skip", "skip"])
@pytest.mark.parametrize("lanes", [False, True, "files"])
def test_every_rank_and_worker_gets_data_after_shuffle_and_skip(verbs, lanes, data_dir):
    """The 2026 traps: only worker 0 getting data after `shuffle()`, and `skip()` after a node split giving
    every rank everything. On 2 ranks x 2 workers every rank and every worker serves rows, the ranks' rows are
    disjoint, and together they are exactly the skipped order."""
    def base(**placement):
        if lanes == "files":  # a stream of data files, split by node (it reads in lanes)
            files = sds.load_dataset("json", data_files=write_files(data_dir)["json"], split="train", streaming=True)
            return StreamingDataset(files.dataset, lanes=True, **placement)
        return StreamingDataset(ids_source(), lanes=lanes, **placement)

    def stream(rank):
        s = base(rank=rank, world_size=2)
        if "shuffle" in verbs:
            s = s.shuffle(seed=5, buffer_size=6)
        if "skip" in verbs:
            s = s.skip(4)
        return s

    whole = [row_id(r) for r in base().shuffle(seed=5, buffer_size=6).skip(4)] if verbs == "shuffle_skip" else None
    by_rank = []
    for rank in range(2):
        rows = [(int(i), int(w)) for batch in StreamingDataLoader(stream(rank).map(_worker_id), batch_size=2,
                                                                   num_workers=2)
                for i, w in zip(batch["id"], batch["worker"])]
        assert {w for _, w in rows} == {0, 1}, f"rank {rank}: workers {sorted({w for _, w in rows})} served rows"
        by_rank.append([i for i, _ in rows])
    assert len(by_rank[0]) == len(by_rank[1]) == (10 if "skip" in verbs else 12)
    assert not set(by_rank[0]) & set(by_rank[1])
    expected = set(range(4, 24)) if verbs == "skip" else set(whole) if whole else set(range(24))
    assert set(by_rank[0]) | set(by_rank[1]) == expected


# -- hypothesis: any size, seed, buffer, cut and rank -------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**32), buffer=st.integers(1, 12), skip=st.integers(0, 5),
       take=st.integers(0, 30), world=st.integers(1, 3), lanes=st.booleans(), kept=st.integers(1, 4),
       data=st.data())
def test_any_shuffled_rank_stream_resumes_at_every_step(n, seed, buffer, skip, take, world, lanes, kept, data):
    """Any rows, seed, buffer, skip/take, rank of any world size, lanes or not, filtered (rows whose id is a
    multiple of `kept` kept; 1: no filter): every step resumes the exact suffix."""
    rank = data.draw(st.integers(0, world - 1))
    source = ids_source(n)

    def make():
        stream = source.to_iterable(rank=rank, world_size=world, lanes=lanes) \
            .shuffle(seed=seed, buffer_size=buffer).skip(skip).take(take)
        return stream if kept == 1 else stream.filter(lambda r: r["id"] % kept == 0)

    assert failures_at_every_step(make, twice=False) == []


# -- golden orders ------------------------------------------------------------------------------------------
def _lanes_2x2() -> list[int]:
    """The first 4 batches (of 2 rows) each rank's loader yields, rank 0 then rank 1 (its 2 workers' first 2 each)."""
    firsts = []
    for rank in range(2):
        loader = StreamingDataLoader(ids_source().to_iterable(rank=rank, world_size=2, lanes=True).shuffle(seed=0),
                                     batch_size=2, num_workers=2)
        iterator = iter(loader)
        firsts += [i for _ in range(4) for i in batch_ids(next(iterator))]
        del iterator
    return firsts


GOLDEN = {
    "plain shuffle seed 0": (lambda d: CONFIGS["shuffle"](d), [13, 4, 22, 19, 20, 2, 3, 11, 12, 15, 5, 7]),
    "buffer shuffle": (lambda d: CONFIGS["shuffle_buffer"](d), [20, 21, 22, 23, 14, 12, 11, 10, 13, 9, 8, 7]),
    "2-source mix, probabilities": (lambda d: CONFIGS["mix_probabilities"](d),
                                    [112, 7, 6, 0, 100, 110, 104, 102, 101, 115, 108, 9]),
    "pack_stream first_fit": (lambda d: CONFIGS["pack_stream"](d),
                              [(24, 3, 15, 12, 19, 4), (22, 13, 11), (2,), (0, 9, 27, 6, 28, 25)]),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_orders_do_not_change(name, data_dir):
    """See the module docstring before changing a pinned order."""
    make, first = GOLDEN[name]
    assert [row_id(r) for r in make(data_dir)][:len(first)] == first, f"{name}: the order changed"


def test_golden_order_of_lanes_two_ranks_by_two_workers():
    assert _lanes_2x2() == [13, 4, 3, 11, 22, 19, 12, 15, 14, 9, 16, 6, 0, 23, 10, 18]


def test_golden_orders_are_pinned_to_this_state_format():
    """A changed order needs a new state format (module docstring): this pin moves with the orders above."""
    assert STATE_FORMAT == 2
