"""Random single packs from a Megatron-style packed Parquet file: ours (adopted once) vs the plan's reader.

    python benchmarks/bench_adopt_parquet.py --groups 200 --group-rows 1000 --tokens 256 --reads 400

Data: one Parquet file written the Megatron-Bridge way (pyarrow `write_table`, `--group-rows`
packs per row group, no `pack_id`, three packed columns, random token ids), `--groups` row
groups: far more than our row-group LRU (16). Both readers get the same `--reads` random pack
indices (uniform, seeded), one at a time, in turns (3 rounds, median):
- the plan's reader design (benchmarks/bench_packed_sft.py MegatronStyleReader: one cached row
  group decoded on a miss, the row converted with `.as_py()`);
- ours: `GPTSFTPackedParquetDataset` (Python lists, as the plan's `__getitem__` returns) and
  `PackedSFTDataset` (numpy), both reading through the cache the file is adopted into.
The one-time adoption (first open) and a warm reopen are timed too, and the cache's size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_packed_sft import MegatronStyleReader
from common import print_table, quiet, work_dir


def write_megatron_file(path: Path, groups: int, group_rows: int, tokens: int) -> None:
    rng = np.random.default_rng(0)
    with pq.ParquetWriter(str(path), pa.schema([("input_ids", pa.list_(pa.int32())),
                                                ("loss_mask", pa.list_(pa.uint8())),
                                                ("seq_start_id", pa.list_(pa.int32()))]),
                          compression="zstd") as writer:
        for _ in range(groups):
            ids = rng.integers(0, 128_000, (group_rows, tokens), dtype=np.int32)
            offsets = pa.array(np.arange(0, group_rows * tokens + 1, tokens, dtype=np.int32))
            starts = np.tile(np.asarray([0, tokens // 3, 2 * tokens // 3], np.int32), (group_rows, 1))
            table = pa.table({
                "input_ids": pa.ListArray.from_arrays(offsets, pa.array(ids.ravel())),
                "loss_mask": pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 2, group_rows * tokens,
                                                                                    dtype=np.uint8))),
                "seq_start_id": pa.ListArray.from_arrays(pa.array(np.arange(0, group_rows * 3 + 1, 3,
                                                                            dtype=np.int32)),
                                                         pa.array(starts.ravel()))})
            writer.write_table(table, row_group_size=group_rows)


def timed_reads(reader, indices) -> float:
    start = time.perf_counter()
    for i in indices:
        reader[int(i)]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--group-rows", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--reads", type=int, default=400)
    args = parser.parse_args()
    quiet()
    folder = work_dir("bench-adopt-")
    os.environ["STABLE_DATASETS_CACHE_DIR"] = str(folder / "cache")
    path = folder / "megatron.idx.parquet"
    write_megatron_file(path, args.groups, args.group_rows, args.tokens)
    from stable_datasets.sft import GPTSFTPackedParquetDataset, PackedSFTDataset

    class Tokenizer:
        eos_id = 0

    start = time.perf_counter()
    lists = GPTSFTPackedParquetDataset(str(path), Tokenizer())
    adopt_s = time.perf_counter() - start
    start = time.perf_counter()
    arrays = PackedSFTDataset(str(path), eos_id=0)
    reopen_s = time.perf_counter() - start
    plan = MegatronStyleReader([str(path)])
    n = len(plan)
    assert len(lists) == len(arrays) == n
    indices = np.random.default_rng(1).integers(0, n, args.reads)
    sample = int(indices[0])
    assert lists[sample]["input_ids"] == plan[sample]["input_ids"]
    times: dict[str, list[float]] = {"plan": [], "lists": [], "arrays": []}
    for _ in range(3):
        for name, reader in (("plan", plan), ("lists", lists), ("arrays", arrays)):
            times[name].append(timed_reads(reader, indices))
    rate = {k: args.reads / statistics.median(v) for k, v in times.items()}
    cache_mb = sum(p.stat().st_size for p in (folder / "cache").rglob("*") if p.is_file()) / 1e6
    print(f"file: {n:,} packs of {args.tokens} tokens, {args.groups} row groups of {args.group_rows} packs, "
          f"{path.stat().st_size / 1e6:.1f} MB; adopted cache {cache_mb:.1f} MB; one-time adoption {adopt_s:.1f} s, "
          f"warm reopen {reopen_s * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f}")
    print_table(["reader", "random packs/s", "ratio to the plan's reader"], [
        ("plan's reader design (row group + as_py)", f"{rate['plan']:,.0f}", "1.0x"),
        ("GPTSFTPackedParquetDataset (lists, adopted)", f"{rate['lists']:,.0f}",
         f"{rate['lists'] / rate['plan']:.0f}x"),
        ("PackedSFTDataset (numpy, adopted)", f"{rate['arrays']:,.0f}", f"{rate['arrays'] / rate['plan']:.0f}x"),
    ], right=(1, 2))


if __name__ == "__main__":
    main()
