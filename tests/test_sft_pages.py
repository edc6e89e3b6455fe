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
    from tests.test_sft_validate import _random_packs

    rows = _random_packs(seed, 120)
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
