"""Page-level batch reads (sft/parquet_pages.py): the same samples and errors as the row-group path."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stable_datasets.errors import CacheError
from stable_datasets.sft import PackedSFTDataset, write_packed_parquet
from stable_datasets.sft.dataset import PackedRowError
from stable_datasets.sft.parquet_pages import PACK_ID, pack_id_problem

pytest.importorskip("datafusion")


def _packs(first: int, count: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        n = int(rng.integers(3, 40))
        starts = np.unique(np.concatenate([[0], rng.integers(1, n, int(rng.integers(0, 3)))])).astype(np.int32)
        rows.append({"input_ids": np.arange(first + i, first + i + n, dtype=np.int32) % 32000,
                     "loss_mask": rng.integers(0, 2, n).astype(np.int8), "seq_start_id": starts})
    return rows


def _assert_same_samples(got: list[dict], expected: list[dict]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key


def _outcome(call):
    try:
        return "ok", call()
    except (PackedRowError, IndexError) as exc:
        return type(exc).__name__, str(exc)


def test_batches_read_pages_and_equal_the_row_group_path(tmp_path):
    first = write_packed_parquet(_packs(0, 300), tmp_path / "a.idx.parquet", row_group_rows=40)
    second = write_packed_parquet(_packs(300, 77, seed=1), tmp_path / "b.idx.parquet", row_group_rows=40)
    meta = pq.read_metadata(first)
    assert meta.schema.to_arrow_schema().names == ["input_ids", "loss_mask", "seq_start_id", PACK_ID]
    assert meta.row_group(0).column(3).has_offset_index and pack_id_problem(str(first)) is None
    ds = PackedSFTDataset([str(first), str(second)], max_num_samples=500, seed=3)
    reference = PackedSFTDataset([str(first), str(second)], max_num_samples=500, seed=3, page_reads=False)
    indices = [*np.random.default_rng(0).integers(-len(ds), len(ds), 200).tolist(), 5, 5, -5, 499]
    got = ds.__getitems__(indices)
    assert ds._pages._usable == {0: True, 1: True}
    assert ds._source.misses == 0  # no row group was decoded: every pack came from its pages
    _assert_same_samples(got, [reference[i] for i in indices])
    assert got[-2]["loss_mask"].sum() == 0 and got[-3]["loss_mask"].sum() > 0  # -5 pads, 5 does not
    assert ds.__getitems__([]) == []
    with pytest.raises(IndexError, match="index 500 is out of range for 500 samples"):
        ds.__getitems__([1, 500])


def test_files_without_usable_pack_ids_fall_back_to_row_groups(tmp_path):
    plain = write_packed_parquet(_packs(0, 50), tmp_path / "plain.idx.parquet", pack_ids=False)
    assert pack_id_problem(str(plain)) == "it has no pack_id column"
    table = pq.read_table(plain)
    shuffled = tmp_path / "shuffled.idx.parquet"  # ids present but not the row numbers: would return other packs
    ids = np.arange(50)
    ids[[3, 4]] = ids[[4, 3]]
    pq.write_table(table.append_column(PACK_ID, pa.array(ids)), shuffled, write_page_index=True)
    assert pack_id_problem(str(shuffled)) == "its pack_id column is not the row number 0..49"
    no_index = tmp_path / "no_index.idx.parquet"
    pq.write_table(table.append_column(PACK_ID, pa.array(np.arange(50))), no_index)
    assert pack_id_problem(str(no_index)) == "it has no page index (offset index)"
    assert PackedSFTDataset(str(plain), page_reads=True)._pages is None  # no pack_id column: known from the footer
    for path in (plain, shuffled, no_index):
        ds = PackedSFTDataset(str(path), page_reads=True)
        got = ds.__getitems__([4, 3, 49, 0])
        assert (ds._pages is None) == (path == plain)
        assert ds._pages is None or ds._pages._usable == {0: False}
        _assert_same_samples(got, [ds[i] for i in [4, 3, 49, 0]])
        assert got[0]["input_ids"][0] == 4


@pytest.mark.parametrize("seed", [0, 1])
def test_validation_errors_are_the_row_group_paths(tmp_path, seed):
    from tests.sft.packs import random_packs

    rows = random_packs(seed, 120)
    path = write_packed_parquet(rows, tmp_path / "bad.idx.parquet", row_group_rows=16)
    ds = PackedSFTDataset(str(path), page_reads=True)  # pages even on 16-pack row groups
    reference = PackedSFTDataset(str(path), page_reads=False)
    good = next(i for i in range(len(rows)) if _outcome(lambda i=i: reference[i])[0] == "ok")
    verdicts = set()
    for i in range(len(rows)):
        expected = _outcome(lambda i=i: [reference[good], reference[i]])
        got = _outcome(lambda i=i: ds.__getitems__([good, i]))
        assert got[0] == expected[0]
        if got[0] == "ok":
            _assert_same_samples(got[1], expected[1])
        else:
            assert got[1] == expected[1]
        verdicts.add(got[0])
    assert verdicts == {"ok", "PackedRowError"} and ds._pages._usable == {0: True}


def test_null_packs_fail_as_on_the_row_group_path(tmp_path):
    path = tmp_path / "nulls.idx.parquet"
    table = pa.table({"input_ids": pa.array([[1, 2, 3], None, [4, 5]], pa.list_(pa.int32())),
                      "loss_mask": pa.array([[0, 1, 1], [1], [1, 0]], pa.list_(pa.int8())),
                      "seq_start_id": pa.array([[0], [0], [0]], pa.list_(pa.int32())),
                      PACK_ID: pa.array([0, 1, 2], pa.int64())})
    pq.write_table(table, path, write_page_index=True)
    ds = PackedSFTDataset(str(path), page_reads=True)
    # the row-group path raises a TypeError from its check of a null pack (not a PackedRowError); the
    # page path must give the same, whatever it is
    with pytest.raises(Exception) as expected:
        PackedSFTDataset(str(path), page_reads=False)[1]
    with pytest.raises(Exception) as got:
        ds.__getitems__([0, 1, 2])
    assert (type(got.value), str(got.value)) == (type(expected.value), str(expected.value))
    assert ds._pages._usable == {0: True}
    assert [s["input_ids"].tolist() for s in ds.__getitems__([2, 0])] == [[4, 5], [1, 2, 3]]


def test_a_damaged_page_is_a_cache_error_not_a_crash(tmp_path):
    path = write_packed_parquet(_packs(0, 200), tmp_path / "damaged.idx.parquet", row_group_rows=50)
    column = pq.read_metadata(path).row_group(1).column(0)  # input_ids of the second row group
    data = bytearray(path.read_bytes())
    data[column.data_page_offset:column.data_page_offset + 64] = b"\xff" * 64  # its first page header
    path.write_bytes(bytes(data))
    code = f"""
import numpy as np
from stable_datasets.errors import CacheError
from stable_datasets.sft import PackedSFTDataset
ds = PackedSFTDataset({str(path)!r})
print(ds.__getitems__([0, 199])[1]["input_ids"][0])
try:
    ds.__getitems__([0, 50])
except CacheError as exc:
    print("CacheError", "damaged.idx.parquet: pages of 2 packs cannot be read" in str(exc))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["199", "CacheError", "True"]
    assert issubclass(CacheError, Exception)


def _first_ids_and_path(batch):
    import torch

    pages = torch.utils.data.get_worker_info().dataset._pages
    return [int(x["input_ids"][0]) for x in batch], bool(pages._datafusion) and all(pages._usable.values())


@pytest.mark.parametrize(("method", "parent_reads"), [("fork", False), ("fork", True), ("spawn", True)])
def test_dataloader_workers(tmp_path, method, parent_reads):
    """Workers read pages; a worker forked after the parent started DataFusion uses row groups (its runtime
    does not survive a fork, and a query there would hang)."""
    torch = pytest.importorskip("torch")
    import multiprocessing

    path = write_packed_parquet(_packs(0, 120), tmp_path / "w.idx.parquet", row_group_rows=30)
    ds = PackedSFTDataset(str(path), eos_id=0, max_seq_length=64, page_reads=True)
    if parent_reads:
        assert ds.__getitems__([7, 3])[0]["input_ids"][0] == 7
    from stable_datasets.sft import parquet_pages

    started = parquet_pages._RUNTIME_PID is not None  # also by an earlier test in this process
    assert started or not parent_reads
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, collate_fn=_first_ids_and_path,
                                         multiprocessing_context=multiprocessing.get_context(method), timeout=120)
    batches = list(loader)
    assert [i for ids, _ in batches for i in ids] == list(range(120))
    assert {paged for _, paged in batches} == {not (method == "fork" and started)}


def _count_queries(ds) -> list[int]:
    """Spy on the real page reader: the sizes of the queries it runs (it still runs them)."""
    sizes: list[int] = []
    query = ds._pages._query

    def counted(f, wanted):
        sizes.append(len(wanted))
        return query(f, wanted)

    ds._pages._query = counted
    return sizes


@pytest.mark.parametrize("stride", [1, 3])
def test_strided_singles_are_read_ahead_from_pages(tmp_path, stride):
    """ds[i] in a steady stride (a sequential sampler over samples_mapping, one rank or worker of many) reads
    the next samples in one query; the samples are the row-group path's, padding included."""
    path = write_packed_parquet(_packs(0, 600), tmp_path / "s.idx.parquet", row_group_rows=100)
    ds = PackedSFTDataset(str(path), max_num_samples=900, seed=5, readahead=100)
    reference = PackedSFTDataset(str(path), max_num_samples=900, seed=5, page_reads=False)
    queries = _count_queries(ds)
    positions = list(range(0, 900, stride))
    got = [ds[i] for i in positions]
    _assert_same_samples(got, [reference[i] for i in positions])
    # the first two samples show no steady stride yet: lone packs, read from row groups before DataFusion runs
    assert ds._source.misses == len({ds._source.locate(int(ds.samples_mapping[i]))[0] for i in positions[:2]})
    mapping = ds.samples_mapping
    expected = []
    at = 2
    while at < len(positions):  # then runs of up to 100 samples, each distinct pack once
        run = positions[at:at + 100]
        expected.append(len(np.unique(mapping[run])))
        at += len(run)
    assert queries == expected
    assert ds[-1]["loss_mask"].sum() == 0 and ds[-1]["input_ids"].tolist() == reference[899]["input_ids"].tolist()


def test_lone_packs_of_large_row_groups_read_pages_once_datafusion_runs(tmp_path):
    path = write_packed_parquet(_packs(0, 400), tmp_path / "l.idx.parquet", row_group_rows=200)
    ds = PackedSFTDataset(str(path), cache_row_groups=1)
    reference = PackedSFTDataset(str(path), page_reads=False)
    queries = _count_queries(ds)
    picks = [5, 300, 17, 250, 33, 399, 0, 211, 80, 390, 7, 260]  # the two row groups in turns, no steady stride
    _assert_same_samples([ds[i] for i in picks], [reference[i] for i in picks])
    # the first 8 lone packs decode row groups (DataFusion is not imported for a few packs); then packs of
    # the second group come from the one decoded group kept (211's), and those of the first from their pages
    assert ds._source.misses == 8 and queries == [1, 1]


@pytest.mark.parametrize("seed", [0, 1])
def test_read_ahead_gives_the_row_group_paths_errors(tmp_path, seed):
    from tests.sft.packs import random_packs

    rows = random_packs(seed, 200)
    path = write_packed_parquet(rows, tmp_path / "bad.idx.parquet", row_group_rows=50)
    ds = PackedSFTDataset(str(path), readahead=16)
    reference = PackedSFTDataset(str(path), page_reads=False)
    verdicts = set()
    for i in range(len(rows)):  # sequential: read ahead 16 at a time, bad packs among them
        expected, got = _outcome(lambda i=i: reference[i]), _outcome(lambda i=i: ds[i])
        assert got[0] == expected[0]
        if got[0] == "ok":
            _assert_same_samples([got[1]], [expected[1]])
        else:
            assert got[1] == expected[1]
        verdicts.add(got[0])
    assert verdicts == {"ok", "PackedRowError"} and ds._source.misses == 1  # the first pack: no stride yet


def test_dataloader_reaches_the_batch_read(tmp_path):
    """torch's DataLoader calls __getitems__ with each batch: with PackedSampler and the Megatron collate, one
    page query per batch and no row-group decode; with micro-batches of one (Megatron's packed default) the
    singles are read ahead."""
    torch = pytest.importorskip("torch")
    from stable_datasets.sft import PackedSampler

    path = write_packed_parquet(_packs(0, 400), tmp_path / "d.idx.parquet", row_group_rows=100)
    ds = PackedSFTDataset(str(path), eos_id=0, max_seq_length=64, max_num_samples=400, seed=2, readahead=64)
    queries = _count_queries(ds)
    sampler = PackedSampler(len(ds), seed=0)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, sampler=sampler, collate_fn=ds.collate_fn)
    batches = list(loader)
    assert len(batches) == 25 and queries == [16] * 25 and ds._source.misses == 0
    order = list(PackedSampler(len(ds), seed=0))  # the same epoch-0 order
    first = ds.collate_fn([PackedSFTDataset(str(path), max_num_samples=400, seed=2, page_reads=False)[i]
                           for i in order[:16]])
    assert torch.equal(torch.as_tensor(batches[0]["tokens"]), torch.as_tensor(first["tokens"]))
    queries.clear()
    singles = torch.utils.data.DataLoader(ds, batch_sampler=[[i] for i in range(400)], collate_fn=ds.collate_fn)
    assert sum(1 for _ in singles) == 400
    # two lone packs (no steady stride yet; DataFusion runs, so from their pages), then runs of 64 ahead
    assert queries == [1, 1, *[64] * 6, 398 - 6 * 64] and ds._source.misses == 0


def test_the_read_path_is_logged_once(tmp_path):
    from loguru import logger

    paged = write_packed_parquet(_packs(0, 100), tmp_path / "p.idx.parquet", row_group_rows=50)
    plain = write_packed_parquet(_packs(0, 100), tmp_path / "n.idx.parquet", pack_ids=False)
    small = write_packed_parquet(_packs(0, 100), tmp_path / "m.idx.parquet", row_group_rows=10)
    messages: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda m: messages.append(str(m)), level="INFO", format="{message}")
    try:
        for path in (paged, paged, plain, small):
            PackedSFTDataset(str(path))
    finally:
        logger.remove(sink)
        logger.disable("stable_datasets")
    assert len(messages) == 3
    assert f"packed Parquet {paged}: page-level reads through DataFusion" in messages[0]
    assert f"packed Parquet {plain}: row-group reads: the files have no pack_id column" in messages[1]
    assert "row groups of 10 packs on average decode faster than a page query" in messages[2]


def test_opening_and_reading_a_pack_import_neither_datafusion_pandas_nor_torch(tmp_path):
    """Opening is a footer read: DataFusion (~0.7 s to import), pandas (pyarrow's to_numpy imports it) and torch
    (through the sampler's module) wait until something needs them."""
    path = write_packed_parquet(_packs(0, 300), tmp_path / "o.idx.parquet", row_group_rows=100)
    code = f"""
import sys
from stable_datasets.sft import PackedSFTDataset
ds = PackedSFTDataset({str(path)!r})
print(int(ds[len(ds) - 1]["input_ids"][0]), int(ds[7]["input_ids"][0]))
print(*sorted(m for m in ("datafusion", "pandas", "torch") if m in sys.modules) or ["none"])
ds.__getitems__([1, 2])
print("datafusion" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["299", "7", "none", "True"]
