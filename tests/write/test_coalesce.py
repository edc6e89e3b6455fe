"""Small record batches joined at the write boundary: a loader over many small files writes batches of
`batch_rows` rows, not one per file; rows and their order unchanged."""

from __future__ import annotations

import io
import itertools
import json
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.write.coalesce import coalesced


def _batches(sizes: list[int]) -> list[pa.RecordBatch]:
    out, start = [], 0
    for size in sizes:
        out.append(pa.record_batch({"i": pa.array(np.arange(start, start + size)),
                                    "s": pa.array([f"row {j}" for j in range(start, start + size)])}))
        start += size
    return out


def test_small_batches_are_joined_up_to_max_rows_and_big_ones_pass_uncopied():
    small = _batches([1] * 2500)
    assert [b.num_rows for b in coalesced(small, 1000)] == [1000, 1000, 500]
    mixed = _batches([3, 4, 5000, 2, 0, 6])
    out = list(coalesced(mixed, 1000))
    assert [b.num_rows for b in out] == [7, 5000, 8]
    assert out[1] is mixed[2]  # big enough alone: not copied
    assert pa.Table.from_batches(out).column("i").to_pylist() == list(range(5015))


def test_the_byte_bound_cuts_a_join_before_its_rows_do():
    batches = [pa.record_batch({"i": pa.array(np.arange(k * 10, k * 10 + 10))}) for k in range(100)]
    per_batch = batches[0].nbytes
    out = list(coalesced(batches, 10_000, max_bytes=5 * per_batch))
    assert [b.num_rows for b in out] == [50] * 20
    assert pa.Table.from_batches(out).column("i").to_pylist() == list(range(1000))


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), max_size=60), max_rows=st.integers(1, 50))
def test_rows_and_order_are_unchanged_and_joins_stay_within_the_bound(sizes, max_rows):
    batches = _batches(sizes)
    out = list(coalesced(batches, max_rows))
    assert [i for b in out for i in b.column("i").to_pylist()] == list(range(sum(sizes)))
    big = {id(b) for b in batches if b.num_rows >= max_rows}
    assert all(b.num_rows <= max_rows or id(b) in big for b in out)
    # no two neighbouring joins could have been one: a join is cut only when the next batch would not fit
    for first, second in itertools.pairwise(out):
        if id(first) not in big and id(second) not in big:
            assert first.num_rows + second.num_rows > max_rows


def _record_batches(ds: sds.StableDataset) -> int:
    """Record batches (Arrow) or row groups (Parquet) in a cache's shard files."""
    count = 0
    for entry in ds.cache_files:
        path = str(entry["filename"])
        if path.endswith(".parquet"):
            count += pq.ParquetFile(path).num_row_groups
        else:
            with pa.memory_map(path) as source:
                count += pa.ipc.open_file(source).num_record_batches
    return count


@pytest.mark.parametrize(("files", "storage_format"), [(20_000, "arrow"), (2_500, "parquet")])
def test_20000_one_row_csv_files_make_batches_of_batch_rows(tmp_path, cache_root, files, storage_format):
    """Before: 20,000 record batches (or Parquet row groups), one per file; each costs every process that
    opens the cache, and the block shuffle read one-row blocks."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(files):
        (data / f"f{i:05d}.csv").write_text(f"a,b\n{i},x{i}\n")
    ds = sds.load_dataset("csv", data_dir=str(data), split="train", storage_format=storage_format)
    assert len(ds) == files
    assert _record_batches(ds) == -(-files // 1000)
    assert ds["a"] == list(range(files)) and ds[files - 1] == {"a": files - 1, "b": f"x{files - 1}"}


def _write(path, kind: str, i: int) -> None:
    if kind == "json":
        path.write_text(json.dumps({"a": i, "b": f"x{i}"}) + "\n")
    elif kind == "text":
        path.write_text(f"line {i}\n")
    elif kind == "parquet":
        pq.write_table(pa.table({"a": [i], "b": [f"x{i}"]}), path)
    elif kind == "arrow":
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("a", pa.int64())])) as out:
            out.write_table(pa.table({"a": [i]}))


@pytest.mark.parametrize(("loader", "suffix"), [("json", ".jsonl"), ("text", ".txt"), ("parquet", ".parquet"),
                                                ("arrow", ".arrow")])
def test_every_tabular_loader_over_small_files_writes_joined_batches(tmp_path, cache_root, loader, suffix):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(1_200):
        _write(data / f"f{i:05d}{suffix}", loader, i)
    ds = sds.load_dataset(loader, data_dir=str(data), split="train")
    assert len(ds) == 1_200 and _record_batches(ds) == 2
    column = ds["text"] if loader == "text" else ds["a"]
    assert column == ([f"line {i}" for i in range(1_200)] if loader == "text" else list(range(1_200)))


def test_row_loaders_over_small_files_write_batches_of_batch_rows_too(tmp_path, cache_root):
    """Image folders and tar samples go through the features' encoder, which fills batches of `batch_rows`
    across files already: the same bound as the tabular loaders."""
    data = tmp_path / "tars"
    data.mkdir()
    for t in range(25):
        with tarfile.open(data / f"shard-{t:03d}.tar", "w") as tar:
            for j in range(100):
                payload = json.dumps({"n": t * 100 + j}).encode()
                info = tarfile.TarInfo(f"s{t:03d}{j:04d}.json")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    ds = sds.load_dataset("webdataset", data_dir=str(data), split="train")
    assert len(ds) == 2_500 and _record_batches(ds) == 3
    assert [row["json"]["n"] if isinstance(row["json"], dict) else json.loads(row["json"])["n"]
            for row in ds.select(range(0, 2_500, 500))] == [0, 500, 1000, 1500, 2000]
