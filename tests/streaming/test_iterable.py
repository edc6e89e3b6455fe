"""Streaming reads and the block shuffle: orders, rank x worker splits, exact resume, memory, layouts."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.streaming import BlockOrder, BlockShuffleSampler, StreamingDataset
from stable_datasets.streaming.order import rank_indices, worker_indices, worker_rows
from stable_datasets.streaming.reader import BlockReader
from stable_datasets.streaming.source import row_source
from tests.resume import ids, stop_and_resume

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402

ROWS = 1000
BLOCK = 100
LAYOUT_OPTIONS = {"arrow": {"batch_rows": BLOCK}, "parquet": {"row_group_rows": BLOCK},
                  "lance": {"max_rows_per_group": BLOCK, "max_rows_per_file": 450}}


class Rows(sds.GeneratorBasedBuilder):
    """`idx` tells each row's identity; `blob` gives rows a size."""

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"idx": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"n": ROWS}), sds.SplitGenerator("test", {"n": 30})]

    def _generate_examples(self, n):
        for i in range(n):
            yield i, {"idx": i, "blob": i.to_bytes(4, "little") * 8}


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    root = tmp_path_factory.mktemp("streaming-caches")
    return {fmt: sds.load_dataset(Rows, split="train", storage_format=fmt, cache_dir=root,
                                  layout_options=LAYOUT_OPTIONS[fmt]) for fmt in LAYOUT_OPTIONS}


# -- blocks --------------------------------------------------------------------------------------
def test_every_layout_reports_its_blocks(caches):
    blocks = np.arange(0, ROWS + 1, BLOCK).tolist()
    assert row_source(caches["arrow"]).block_bounds().tolist() == blocks  # record batches
    assert row_source(caches["parquet"]).block_bounds().tolist() == blocks  # row groups
    # Lance: fragments of 450 rows, cut every 100 rows inside each fragment
    lance_blocks = [0, 100, 200, 300, 400, 450, 550, 650, 750, 850, 900, 1000]
    assert row_source(caches["lance"]).block_bounds().tolist() == lance_blocks
    view = caches["arrow"].select(range(150, 420))
    assert row_source(view).block_bounds().tolist() == [0, 50, 150, 250, 270]  # runs inside stored blocks
    assert row_source(view).read_block(50, 150).column("idx").to_pylist() == list(range(200, 300))
    assert row_source(caches["arrow"].shuffle(seed=0)).block_bounds().tolist()[:3] != [0, 100, 200]


def test_block_order_windows_hold_whole_blocks_and_use_their_own_rng():
    bounds = np.array([0, 10, 25, 40, 41, 60, 80, 100])
    state = np.random.get_state()
    order = BlockOrder(100, bounds, seed=5, window_blocks=3)
    epoch = order.epoch(0)
    assert np.array_equal(np.random.get_state()[1], state[1])
    assert sorted(epoch.positions.tolist()) == list(range(100))
    block_of = np.searchsorted(bounds, epoch.positions, side="right") - 1
    # walk the order: each window is the whole rows of its blocks, and nothing else
    sizes = np.diff(bounds)
    at = 0
    for window in range(int(epoch.block_window.max()) + 1):
        members = np.flatnonzero(epoch.block_window == window)
        length = int(sizes[members].sum())
        assert sorted(set(block_of[at:at + length].tolist())) == sorted(members.tolist())
        at += length
    assert at == 100
    assert np.array_equal(BlockOrder(100, bounds, seed=5, window_blocks=3).epoch(0).positions, epoch.positions)
    assert not np.array_equal(order.epoch(1).positions, epoch.positions)
    assert BlockOrder(100, None, shuffle=False).epoch(3).positions.tolist() == list(range(100))
    with pytest.raises(ValueError, match="block bounds must rise strictly from 0 to the 100 rows"):
        BlockOrder(100, np.array([0, 50, 50, 100]))


def test_rank_and_worker_shares_stripe_the_order():
    """Rank r of N serves epoch indices r, r + N, ... (padded by wrapping); workers get units in turn."""
    padded = [rank_indices(np.arange(26), 0, r, 4, 103) for r in range(4)]
    assert padded[3].tolist()[-2:] == [99, 0]  # wraps around to the start of the order
    assert sorted(np.concatenate([*padded[:3], padded[3][:-1]]).tolist()) == list(range(103))
    resumed = rank_indices(np.arange(3), 10, 1, 3, 103)  # a pass that starts at global position 10
    assert resumed.tolist() == [11, 14, 17]
    shares = [worker_indices(np.arange(worker_rows(10, 3, w, 2)), 3, w, 2).tolist() for w in range(2)]
    assert shares == [[0, 1, 2, 6, 7, 8], [3, 4, 5, 9]]


# -- rank x worker splits ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["arrow", "parquet", "lance"])
@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize("workers", [0, 2])
def test_each_rank_gets_its_exact_share_with_any_workers(caches, fmt, world_size, workers):
    seen = []
    for rank in range(world_size):
        stream = caches[fmt].to_iterable(rank=rank, world_size=world_size, drop_last=True).shuffle(seed=11,
                                                                                                  window_blocks=3)
        expected = stream.rank_order().tolist()
        got = ids(StreamingDataLoader(stream, batch_size=64, num_workers=workers))
        assert got == expected  # the rank's share in order, whatever the workers
        seen.extend(got)
    assert sorted(seen) == list(range(ROWS))  # no row twice, none lost


def test_uneven_rows_are_padded_by_wrapping_or_dropped(caches):
    ds = caches["arrow"].select(range(7))
    padded = [[r["idx"] for r in ds.to_iterable(rank=r, world_size=3)] for r in range(3)]
    assert padded == [[0, 3, 6], [1, 4, 0], [2, 5, 1]]  # stripes of one order, padded from its start
    dropped = [[r["idx"] for r in ds.to_iterable(rank=r, world_size=3, drop_last=True)] for r in range(3)]
    assert dropped == [[0, 3], [1, 4], [2, 5]]


def test_rank_comes_from_torchrun_environment(caches, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    stream = caches["arrow"].to_iterable()
    assert (stream.rank, stream.world_size) == (1, 2)
    assert [r["idx"] for r in stream][:3] == [1, 3, 5]
    with pytest.raises(ValueError, match="rank 2 is not in"):
        caches["arrow"].to_iterable(rank=2, world_size=2)


# -- resume --------------------------------------------------------------------------------------
@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize("workers", [0, 2])
def test_resume_continues_with_the_next_row_exactly(caches, world_size, workers):
    for rank in range(world_size):
        def stream(rank=rank):
            return caches["arrow"].to_iterable(rank=rank, world_size=world_size).shuffle(seed=3, window_blocks=2)

        full = ids(StreamingDataLoader(stream(), batch_size=32, num_workers=workers))
        first = stream()
        loader = StreamingDataLoader(first, batch_size=32, num_workers=workers)
        head = []
        for step, batch in enumerate(loader):
            head.extend(int(v) for v in batch["idx"])
            if step == 4:
                saved = json.loads(json.dumps(loader.state_dict()))  # a checkpoint holds plain JSON
                break
        # the global position: every rank received 5 batches of 32
        assert saved["consumed"] == 160 * world_size and first.state_dict()["consumed"] == 160 * world_size
        second = stream()
        resumed = StreamingDataLoader(second, batch_size=32, num_workers=workers)
        resumed.load_state_dict(saved)
        assert head + ids(resumed) == full
        assert second.state_dict()["epoch"] == 1 and second.state_dict()["consumed"] == 0


@pytest.mark.parametrize("fmt", ["parquet", "lance"])
def test_resume_is_exact_on_other_layouts_with_workers(caches, fmt):
    def stream():
        return caches[fmt].to_iterable(rank=1, world_size=2).shuffle(seed=9, window_blocks=2)

    full = ids(StreamingDataLoader(stream(), batch_size=50, num_workers=2))
    head, rest, _ = stop_and_resume(stream, stop_after=3, batch_size=50)
    assert head + rest == full


def test_resume_in_process_counts_each_row(caches):
    stream = caches["parquet"].to_iterable().shuffle(seed=1)
    full = [r["idx"] for r in stream]
    run = caches["parquet"].to_iterable().shuffle(seed=1)
    iterator = iter(run)
    head = [next(iterator)["idx"] for _ in range(321)]
    again = caches["parquet"].to_iterable().shuffle(seed=1)
    again.load_state_dict(run.state_dict())
    assert head + [r["idx"] for r in again] == full
    with pytest.raises(ValueError, match="the saved stream had seed=1, this one has 2"):
        caches["parquet"].to_iterable().shuffle(seed=2).load_state_dict(run.state_dict())
    with pytest.raises(ValueError, match="saved stream read another dataset, mix or order"):
        caches["parquet"].to_iterable().shuffle(seed=1, window_blocks=4).load_state_dict(run.state_dict())


def test_a_state_that_is_no_stream_state_is_refused_naming_what_is_wrong(caches):
    """A checkpoint's state from something else (an empty dict, a hand-edited epoch) is refused when it is
    loaded, with the stream's 'cannot resume' message. Before: `load_state_dict({})` raised KeyError:
    'consumed'; `{**state, "epoch": -1}` loaded, and the next pass failed inside numpy with 'expected
    non-negative integer'."""
    stream = caches["arrow"].to_iterable().shuffle(seed=1)
    state = stream.state_dict()
    with pytest.raises(ValueError, match="cannot resume: .*consumed"):
        caches["arrow"].to_iterable().shuffle(seed=1).load_state_dict({})
    with pytest.raises(ValueError, match="cannot resume: .*epoch"):
        caches["arrow"].to_iterable().shuffle(seed=1).load_state_dict({**state, "epoch": -1})


def test_a_state_that_is_none_or_lacks_its_seed_is_refused(caches):
    """Before: load_state_dict(None) was a TypeError and a state without its seed was accepted."""
    state = caches["arrow"].to_iterable().shuffle(seed=1).state_dict()
    with pytest.raises(ValueError, match=r"^cannot resume: a stream state is a dict, got NoneType$"):
        caches["arrow"].to_iterable().shuffle(seed=1).load_state_dict(None)
    without_seed = {k: v for k, v in state.items() if k != "seed"}
    with pytest.raises(ValueError, match=r"^cannot resume: the saved stream state has no 'seed' \(keys: "):
        caches["arrow"].to_iterable().shuffle(seed=1).load_state_dict(without_seed)


def test_set_epoch_changes_the_order_deterministically(caches):
    stream = caches["lance"].to_iterable().shuffle(seed=4, window_blocks=2)
    first = [r["idx"] for r in stream]
    second = [r["idx"] for r in stream]  # a finished pass moves on to the next epoch
    assert first != second and sorted(first) == sorted(second) == list(range(ROWS))
    stream.set_epoch(0)
    assert [r["idx"] for r in stream] == first
    arrow, parquet = (caches[f].to_iterable().shuffle(seed=4, window_blocks=2) for f in ("arrow", "parquet"))
    parquet.set_epoch(1)
    arrow.set_epoch(1)  # the order depends on the blocks, seed and epoch, not on the layout that stores them
    assert [r["idx"] for r in arrow] == [r["idx"] for r in parquet] != second


def test_persistent_workers_are_refused(caches):
    with pytest.raises(ValueError, match="persistent_workers=True would keep stale copies"):
        StreamingDataLoader(caches["arrow"].to_iterable(), batch_size=4, num_workers=1, persistent_workers=True)


# -- the sampler for map-style datasets ---------------------------------------------------------
def test_block_shuffle_sampler_with_a_map_style_loader_resumes_exactly(caches):
    ds = caches["parquet"]

    def loader(sampler):
        return StreamingDataLoader(ds, batch_size=40, sampler=sampler, num_workers=2)

    full = ids(loader(BlockShuffleSampler(ds, seed=2, window_blocks=2, rank=0, world_size=2)))
    sampler = BlockShuffleSampler(ds, seed=2, window_blocks=2, rank=0, world_size=2)
    head = []
    run = loader(sampler)
    for step, batch in enumerate(run):
        head.extend(int(v) for v in batch["idx"])
        if step == 2:
            break
    assert sampler.state_dict()["consumed"] == 240  # 120 rows received on each of 2 ranks, not what was prefetched
    resumed = BlockShuffleSampler(ds, seed=2, window_blocks=2, rank=0, world_size=2)
    resumed.load_state_dict(sampler.state_dict())
    assert head + ids(loader(resumed)) == full
    blocks = {i // BLOCK for i in full[:100]}  # rank 0's half of the first 200 rows of the order
    assert len(blocks) == 2  # the first window: two whole row groups


# -- memory --------------------------------------------------------------------------------------
def test_streaming_holds_a_window_of_blocks_not_the_table(tmp_path):
    """Decoded Parquet row groups live in Arrow's memory pool: the peak stays near a window's worth
    (a window of 80 blocks, the whole table, measures 16 MB here; 4 blocks measure 2 MB)."""
    class Big(sds.GeneratorBasedBuilder):
        def _info(self):
            return sds.DatasetInfo(features=sds.Features({"idx": sds.Value("int64"), "blob": sds.Value("binary")}))

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {})]

        def _generate_examples(self):
            for i in range(8000):
                yield i, {"idx": i, "blob": bytes([i % 251]) * 2048}

    ds = sds.load_dataset(Big, split="train", storage_format="parquet", cache_dir=tmp_path,
                          layout_options={"row_group_rows": 100})
    total = 8000 * 2048
    base = pa.total_allocated_bytes()
    peak, count = 0, 0
    for row in ds.to_iterable().shuffle(seed=0, window_blocks=4).batch(256):
        peak = max(peak, pa.total_allocated_bytes() - base)
        count += len(row["idx"])
    assert count == 8000
    assert peak < total // 4, f"{peak} bytes held while streaming a {total}-byte table"


@pytest.mark.parametrize("fmt", ["arrow", "parquet", "lance"])
def test_block_reader_drops_blocks_the_order_has_left(caches, fmt):
    ds = caches[fmt]
    source = row_source(ds)
    order = BlockOrder(ROWS, source.block_bounds(), seed=0, window_blocks=2).epoch(0)
    reader = BlockReader(source, source.block_bounds(), order.block_window)
    held = []
    got = []
    for lo in range(0, ROWS, 64):
        got.extend(reader.table(order.positions[lo:lo + 64]).column("idx").to_pylist())
        held.append(reader.held_rows())
    assert got == order.positions.tolist()
    assert max(held) <= 4 * BLOCK  # two windows of two blocks at most
    assert reader.blocks_read == len(source.block_bounds()) - 1  # each block read once


# -- lazy ops, formats, packed SFT, front doors ---------------------------------------------------
def test_batch_and_map_are_lazy_and_applied_in_workers(caches):
    stream = caches["arrow"].with_format("numpy").to_iterable(drop_last=True).batch(64).map(
        lambda b: {"idx": b["idx"] * 2})
    batches = list(StreamingDataLoader(stream, batch_size=None, num_workers=2))
    assert [len(b["idx"]) for b in batches] == [64] * 15 + [40]
    served = np.concatenate([b["idx"].numpy() for b in batches])
    assert served.tolist() == (stream.rank_order(0) * 2).tolist()  # storage order, whatever the workers
    assert sorted(served.tolist()) == list(range(0, 2 * ROWS, 2))
    with pytest.raises(ValueError, match="pass batch_size=None to the loader"):
        StreamingDataLoader(stream, batch_size=8)
    torch_rows = list(caches["arrow"].with_format("torch").to_iterable().batch(500))
    assert torch_rows[1]["idx"].dtype == torch.int64 and torch_rows[1]["idx"][0].item() == 500


def test_packed_sft_packs_stream_into_the_megatron_collate(tmp_path):
    from stable_datasets.sft import PackedSFTDataset, write_packed_parquet

    packs = [{"input_ids": np.arange(i, i + 6, dtype=np.int32), "loss_mask": np.ones(6, np.int8),
              "seq_start_id": np.array([0, 3], np.int32)} for i in range(40)]
    path = write_packed_parquet(packs, tmp_path / "packs.idx.parquet", row_group_rows=5)
    dataset = PackedSFTDataset(path, eos_id=0, max_seq_length=8)
    assert dataset.block_bounds().tolist() == list(range(0, 41, 5))
    stream = StreamingDataset(dataset, shuffle=True, seed=1, window_blocks=2)
    batches = list(StreamingDataLoader(stream, batch_size=4, collate_fn=dataset.collate_fn, num_workers=2))
    firsts = sorted(int(b) for batch in batches for b in batch["tokens"][:, 0])
    assert firsts == list(range(40))  # every pack once; tokens are the pack's input_ids
    assert batches[0]["tokens"].shape == (4, 8)


def test_load_dataset_streaming(tmp_path):
    stream = sds.load_dataset(Rows, split="test", streaming=True, cache_dir=tmp_path)
    assert isinstance(stream, StreamingDataset) and isinstance(stream, torch.utils.data.IterableDataset)
    assert [r["idx"] for r in stream] == list(range(30))
    every = sds.load_dataset(Rows, streaming=True, cache_dir=tmp_path)
    assert sorted(every) == ["test", "train"] and len(every["train"]) == ROWS


def test_streaming_works_without_torch(caches):
    cache = caches["arrow"].cache_dirs[0]
    code = f"""
import sys
sys.modules["torch"] = None  # import torch raises ImportError
import stable_datasets as sds
stream = sds.open_cache({str(cache)!r}).to_iterable().shuffle(seed=0)
rows = [r["idx"] for r in stream]
bases = [c.__name__ for c in type(stream).__mro__]
assert sorted(rows) == list(range({ROWS})) and bases == ["StreamingDataset", "StreamVerbs", "object"], bases
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_video_frame_windows_stream_a_video_at_a_time():
    ds = sds.load_dataset("moving_digits", name="frames", split="train", train_videos=6, test_videos=2)
    assert row_source(ds).block_bounds().tolist() == [0, 2, 4, 6, 8, 10, 12]  # two windows per 20-frame video
    stream = ds.with_format("numpy", columns=["video_index", "start_frame"]).to_iterable().shuffle(
        seed=0, window_blocks=2)
    rows = [(int(r["video_index"]), int(r["start_frame"])) for r in stream]
    assert sorted(rows) == [(v, s) for v in range(6) for s in (0, 8)]
    assert all(len({v for v, _ in rows[i:i + 4]}) == 2 for i in range(0, 12, 4))  # a window: two whole videos


def test_mapped_arrow_is_gathered_in_place_and_other_layouts_a_window_at_a_time(caches):
    from stable_datasets.streaming.reader import make_reader

    arrow_rows, parquet_rows = row_source(caches["arrow"]), row_source(caches["parquet"])
    order = BlockOrder(ROWS, arrow_rows.block_bounds(), seed=0, window_blocks=2).epoch(0)
    assert arrow_rows.reads_rows_in_place() and not parquet_rows.reads_rows_in_place()
    arrow = make_reader(arrow_rows, arrow_rows.block_bounds(), order.block_window)
    parquet = make_reader(parquet_rows, parquet_rows.block_bounds(), order.block_window)
    for reader in (arrow, parquet):
        got = reader.table(order.positions[:150]).column("idx").to_pylist()
        assert got == order.positions[:150].tolist()
    assert arrow.held_rows() == 0 and arrow.blocks_read == 0  # nothing held: one gather over the map
    assert parquet.held_rows() == 2 * BLOCK and parquet.blocks_read == 2  # the first window, read once


def test_lance_v2_streams_through_the_mapped_blobs_in_place(caches):
    from stable_datasets.layouts.lance import blobs as lance_blobs
    from stable_datasets.streaming.reader import make_reader

    lance = caches["lance"]
    assert lance.cache_metadata[0].extra["lance_rows_version"] == lance_blobs.BLOB_LAYOUT_VERSION
    source = row_source(lance)
    assert source.reads_rows_in_place()
    order = BlockOrder(ROWS, source.block_bounds(), seed=0, window_blocks=2).epoch(0)
    reader = make_reader(source, source.block_bounds(), order.block_window)
    table = reader.table(order.positions[:150])
    assert table.column("idx").to_pylist() == order.positions[:150].tolist()
    assert table.column("blob").to_pylist() == [int(i).to_bytes(4, "little") * 8 for i in order.positions[:150]]
    assert reader.held_rows() == 0 and reader.blocks_read == 0  # one gather over the maps and held columns


def _lance_handle_is_closed(row, backend=None):
    return {**row, "no_lance_call": backend._dataset is None}


@pytest.mark.parametrize("world_size", [1, 2])
def test_lance_v2_workers_read_the_parents_maps_and_resume_exactly(caches, world_size):
    """StreamingDataLoader opens a v2 Lance cache before forking: workers gather from the inherited maps and
    held columns and never reopen Lance (their handle stays None), and resume stays exact."""
    import functools

    lance = caches["lance"]
    for rank in range(world_size):
        def stream(rank=rank):
            return lance.to_iterable(rank=rank, world_size=world_size).shuffle(seed=4, window_blocks=2)

        probe = stream().map(functools.partial(_lance_handle_is_closed, backend=lance.backends[0]))
        batches = list(StreamingDataLoader(probe, batch_size=40, num_workers=2))
        assert all(all(b["no_lance_call"]) for b in batches)
        full = ids(batches)
        assert full == stream().rank_order().tolist()
        head, rest, _ = stop_and_resume(stream, stop_after=4, batch_size=40)
        assert head + rest == full
    every = [i for rank in range(world_size)
             for i in lance.to_iterable(rank=rank, world_size=world_size).shuffle(seed=4).rank_order().tolist()]
    assert sorted(every) == list(range(ROWS))


def test_shard_windows_bound_the_shards_a_stretch_of_the_order_touches():
    bounds, shards = np.arange(0, 1001, 50), np.array([0, 200, 400, 600, 800, 1000])
    order = BlockOrder(1000, bounds, seed=1, window_blocks=2, shards=shards, window_shards=2)
    for epoch in range(3):
        e = order.epoch(epoch)
        assert sorted(e.positions.tolist()) == list(range(1000))
        shard_of_row = np.searchsorted(shards, e.positions, side="right") - 1
        # the order is shard windows one after another: each shard's rows form one stretch with one other shard's
        first_seen = {s: int(np.flatnonzero(shard_of_row == s)[0]) for s in range(5)}
        last_seen = {s: int(np.flatnonzero(shard_of_row == s)[-1]) for s in range(5)}
        for s in range(5):
            inside = set(shard_of_row[first_seen[s]:last_seen[s] + 1].tolist())
            assert len(inside) <= 2
        shard_of_block = np.searchsorted(shards, bounds[:-1], side="right") - 1
        for window in np.unique(e.block_window):
            assert np.sum(e.block_window == window) <= 2 and len(set(shard_of_block[e.block_window == window])) <= 2
    assert not np.array_equal(order.epoch(0).positions, order.epoch(1).positions)
    plain = BlockOrder(1000, bounds, seed=1, window_blocks=2)
    wide = BlockOrder(1000, bounds, seed=1, window_blocks=2, shards=shards, window_shards=5)  # holds every shard
    assert np.array_equal(plain.epoch(0).positions, wide.epoch(0).positions) and plain.identity() == wide.identity()
    assert order.identity() != plain.identity()
    with pytest.raises(ValueError, match="window_shards must be a positive int"):
        BlockOrder(1000, bounds, shards=shards, window_shards=0)


def test_a_stream_with_shard_windows_resumes_exactly_through_workers(caches):
    lance = caches["lance"]  # 3 data files of 450, 450, 100 rows
    assert lance.to_iterable().shuffle(window_shards=1).order.shards.tolist() == [0, 450, 900, 1000]

    def stream():
        return lance.to_iterable(rank=1, world_size=2).shuffle(seed=3, window_blocks=2, window_shards=1)

    full = ids(StreamingDataLoader(stream(), batch_size=50, num_workers=2))
    head, rest, saved = stop_and_resume(stream, stop_after=3, batch_size=50)
    assert head + rest == full
    other = lance.to_iterable(rank=1, world_size=2).shuffle(seed=3, window_blocks=2)
    with pytest.raises(ValueError, match="cannot resume"):
        other.load_state_dict(saved)  # another order: refused
    whole = [int(r["idx"]) for r in lance.to_iterable().shuffle(seed=3, window_shards=1)]
    assert sorted(whole) == list(range(ROWS))
    shard_of_row = np.searchsorted([0, 450, 900, 1000], whole, side="right") - 1
    assert np.count_nonzero(np.diff(shard_of_row)) == 2  # one data file after another
