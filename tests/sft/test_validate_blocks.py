"""Block validation of packs (sft/validate.py) flags exactly the packs the per-pack check rejects."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stable_datasets as sds
from stable_datasets.sft import PackedSFTDataset
from stable_datasets.sft.dataset import PackedRowError
from stable_datasets.sft.validate import CACHE_BLOCK_ROWS, bad_packs
from tests.sft.packs import random_packs


def _per_pack_verdicts(path, n: int) -> list[str | None]:
    """What the per-pack check (run on every pack, as before block validation) says of each pack."""
    ds = PackedSFTDataset(path, validate=False)
    verdicts = []
    for i in range(n):
        row = ds[i]
        starts = row["seq_boundaries"][:-1]
        try:
            ds._check(i, row["input_ids"], row["loss_mask"], starts)
            verdicts.append(None)
        except PackedRowError as exc:
            verdicts.append(str(exc))
    return verdicts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_block_flags_agree_with_the_per_pack_check(tmp_path, seed):
    packs = random_packs(seed, 400)
    table = pa.table({c: pa.array([p[c] for p in packs], pa.list_(pa.int32())) for c in packs[0]})
    path = tmp_path / "packs.idx.parquet"
    pq.write_table(table, path, row_group_size=64)  # several blocks, bad packs in each
    expected = _per_pack_verdicts(path, len(packs))
    flags = bad_packs(table.column("input_ids"), table.column("loss_mask"), table.column("seq_start_id"))
    assert flags.tolist() == [v is not None for v in expected]
    assert 50 < flags.sum() < 350  # both kinds are exercised
    ds = PackedSFTDataset(path)
    for i, verdict in enumerate(expected):
        if verdict is None:
            assert ds[i]["input_ids"].tolist() == packs[i]["input_ids"]  # good neighbours of bad packs read
        else:
            with pytest.raises(PackedRowError) as raised:
                ds[i]
            assert str(raised.value) == verdict  # the same message as the per-pack check


def test_sliced_and_chunked_columns_are_checked_at_their_own_offsets():
    good = pa.array([[0], [0, 2], [0]], pa.list_(pa.int32()))
    ids = pa.chunked_array([pa.array([[5], [1, 2, 3]], pa.list_(pa.int32())), pa.array([[7]], pa.list_(pa.int32()))])
    masks = pa.array([[9, 9], [1], [1, 1, 1], [1]], pa.list_(pa.int8())).slice(1)
    assert bad_packs(ids, masks, good).tolist() == [False, False, False]
    starts = pa.array([[0, 0], [0], [0, 2], [0]], pa.list_(pa.int32())).slice(1)
    assert bad_packs(ids, masks, starts).tolist() == [False, False, False]
    nulls = pa.array([[0], None, [0]], pa.list_(pa.int32()))
    assert bad_packs(ids, masks, nulls).tolist() == [False, True, False]


def test_npy_packs_are_checked_once_at_their_first_read(tmp_path):
    rows = np.array([{"input_ids": np.arange(3), "loss_mask": np.ones(3, np.int8), "seq_start_id": np.array([0])},
                     {"input_ids": np.arange(3), "loss_mask": np.ones(3, np.int8), "seq_start_id": np.array([0, 5])}],
                    dtype=object)
    path = tmp_path / "packs.npy"
    np.save(path, rows, allow_pickle=True)
    ds = PackedSFTDataset(path, allow_pickle=True)
    assert ds[0]["seq_boundaries"].tolist() == [0, 3]
    with pytest.raises(PackedRowError, match=r"pack 1 of .*: seq_start_id\[1\]=5 >= len\(input_ids\)=3$"):
        ds[1]
    assert PackedSFTDataset(path, allow_pickle=True, validate=False)[1]["seq_boundaries"].tolist() == [0, 5, 3]


@pytest.mark.parametrize("storage_format", ["arrow", "parquet"])
def test_cache_packs_are_checked_a_block_at_a_time(tmp_path, storage_format):
    n = CACHE_BLOCK_ROWS + 5  # two blocks, the bad pack in the second
    lengths = np.full(n, 2)
    starts = [[0]] * n
    starts[n - 2] = [0, 2]  # past the end of its 2 tokens
    starts[3] = [0, 1, 1]  # an empty sequence: allowed

    class Packs(sds.GeneratorBasedBuilder):
        def _info(self):
            seq = sds.Sequence(sds.Value("int32"))
            return sds.DatasetInfo(features={"input_ids": seq, "loss_mask": sds.Sequence(sds.Value("int8")),
                                             "seq_start_id": seq})

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {})]

        def _generate_examples(self):
            for i in range(n):
                yield i, {"input_ids": [i, i], "loss_mask": [1] * int(lengths[i]), "seq_start_id": starts[i]}

    ds = sds.load_dataset(Packs, split="train", cache_dir=tmp_path, storage_format=storage_format)
    packs = PackedSFTDataset(ds)
    assert packs[n - 1]["input_ids"].tolist() == [n - 1, n - 1]
    assert packs[3]["seq_boundaries"].tolist() == [0, 1, 1, 2]
    assert packs[4]["seq_boundaries"].tolist() == [0, 2]
    with pytest.raises(PackedRowError, match=f"pack {n - 2} of .*: seq_start_id\\[1\\]=2 >= len\\(input_ids\\)=2$"):
        packs[n - 2]
    if storage_format == "arrow":
        assert sorted(packs._checks.blocks) == [0, 1]
    else:  # the Parquet row groups that reads decode anyway, not a second decode of 16,384 rows
        assert packs._checks.row_groups and len(packs._checks.blocks) >= 2
