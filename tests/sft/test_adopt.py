"""Megatron-style packed Parquet files (1,000-pack row groups, no pack_id) adopted once into a cache (item 9)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stable_datasets.sft import GPTSFTPackedParquetDataset, PackedSFTDataset, write_packed_parquet
from stable_datasets.sft.adopt import wants_adoption


def _megatron_file(path, packs, first=0, group=1000):
    rng = np.random.default_rng(first)
    lengths = rng.integers(8, 40, packs)
    ids = [list(range(first + i, first + i + n)) for i, n in enumerate(lengths)]
    table = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                      "loss_mask": pa.array([[1] * n for n in lengths], pa.list_(pa.uint8())),
                      "seq_start_id": pa.array([[0, n // 2] for n in lengths], pa.list_(pa.int32()))})
    pq.write_table(table, str(path), row_group_size=group)
    return path


def test_megatron_style_files_are_adopted_once_and_read_the_same(tmp_path, cache_root):
    files = [_megatron_file(tmp_path / f"shard_{i}.idx.parquet", 2500, first=10_000 * i) for i in range(2)]
    assert wants_adoption(files, None) and not wants_adoption(files, False)
    adopted = PackedSFTDataset(files, eos_id=0)
    plain = PackedSFTDataset(files, eos_id=0, adopt=False)
    assert len(adopted) == len(plain) == 5000
    for i in [*np.random.default_rng(0).integers(0, 5000, 50).tolist(), 0, 2499, 2500, 4999, -1]:
        a, b = adopted[i], plain[i]
        assert all(np.array_equal(a[k], b[k]) for k in ("input_ids", "seq_boundaries", "loss_mask"))
    assert adopted[2500]["input_ids"][0] == 10_000 and (adopted[-1]["loss_mask"] == 0).all()
    built = sorted(cache_root.rglob("_metadata.json"))
    again = PackedSFTDataset(files, eos_id=0)  # reopened, not adopted again
    assert sorted(cache_root.rglob("_metadata.json")) == built and again[7]["input_ids"].tolist() == \
        plain[7]["input_ids"].tolist()
    megatron = GPTSFTPackedParquetDataset(str(tmp_path / "shard_*.idx.parquet"), type("T", (), {"eos_id": 0})())
    assert megatron[4321] == {k: plain[4321][k].tolist() for k in ("input_ids", "seq_boundaries", "loss_mask")}


@pytest.mark.parametrize(("group", "pack_ids", "expected"), [(1000, False, True), (100, False, False),
                                                            (1000, True, False)])
def test_which_files_are_adopted(tmp_path, group, pack_ids, expected):
    if pack_ids:
        rows = [{"input_ids": np.arange(5), "loss_mask": np.ones(5, np.uint8), "seq_start_id": np.array([0])}] * 2000
        path = write_packed_parquet(rows, tmp_path / "ours", row_group_rows=group)
    else:
        path = _megatron_file(tmp_path / "m.parquet", 2000, group=group)
    assert wants_adoption([path], None) is expected
