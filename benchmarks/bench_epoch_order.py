"""The first row of a shuffled epoch vs the number of rows, and the shuffle's quality vs a full permutation.

    python benchmarks/bench_epoch_order.py                       # 1M, 10M, 100M, 1B rows (about a minute)
    python benchmarks/bench_epoch_order.py --rows 1000000 10000000 --before   # also the full-length order
    python benchmarks/bench_epoch_order.py --sized-mix --before   # a mosaic-style sized mix of three sources
    python benchmarks/bench_epoch_order.py --shuffled-view --rows 1000000 10000000   # ds.shuffle() feeding a stream

Each size runs in a fresh child process (imports untimed), on a synthetic block layout: blocks of
8,192 rows (an Arrow record batch of small rows, a Parquet row group), windows of 8 blocks. Measured:
seconds from `BlockOrder(...)` to the first 1,024 rows of epoch 0 for rank 3 of 8 (`positions_at` of its
striped indices), and the process's peak memory above what it held after the imports (ru_maxrss delta),
plus the peak of numpy allocations (tracemalloc). `--before` measures the order this replaced beside it:
a full-length `np.lexsort` over rows, as `BlockOrder.epoch` did until issue 23 (re-implemented here).

`--sized-mix`: the same measure for a mix of three sources (50% / 33% / 17% of the rows, each on the
synthetic block layout and block-shuffled) with mosaic-style epoch sizes (`proportion=0.5/0.3/0.2`,
`epoch_size=rows`): seconds from `SizedMixPlan(...)` to the stored positions of the first 1,024 mixed rows of
rank 3 of 8, at the start of the epoch and at its middle (a resume). `--before` times the plan this
replaced (a sequential hypergeometric split per block of 1,000 positions, re-implemented here).

`--shuffled-view`: a real Arrow cache of `rows` int64 rows; in a fresh process, seconds from
`ds.shuffle(seed=0)` to the first 1,024 rows of `.to_iterable(rank=3, world_size=8)`, the peak RSS above
what the opened cache held (it counts the mapped file's pages that random reads touch), the peak of
Python and numpy allocations (tracemalloc), and the bytes of the pickled view (what every DataLoader
worker receives): the lazy keyed shuffle (`lazy=True`) vs the permutation array (`lazy=False`, the
order below 16.7M rows).

Quality (`--quality-rows`, default 1M): for each storage neighbour pair (i, i+1), how far apart the
epoch puts them, as a fraction of a full permutation's (N+1)/3 (1.0 = full permutation, 0 = storage
order, the measure of bench_streaming.py); the Spearman correlation of epoch index and stored position
(0 = no trace of the storage order); and the distinct blocks in a batch of 256 consecutive rows (a full
permutation: about 256; the block shuffle: at most the window's 8, the price of block reads).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, tracemalloc
import numpy as np
from stable_datasets.streaming.order import BlockOrder, rank_indices
rows, block, before = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
start = time.perf_counter()
bounds = np.append(np.arange(0, rows, block, dtype=np.int64), rows)
if before:  # the full-length order BlockOrder.epoch built before issue 23
    rng = np.random.default_rng([0, 0])
    starts, sizes = bounds[:-1], np.diff(bounds)
    order = rng.permutation(len(sizes))
    sizes_in_order = sizes[order]
    out_starts = np.cumsum(sizes_in_order) - sizes_in_order
    positions = np.arange(rows, dtype=np.int64) + np.repeat(starts[order] - out_starts, sizes_in_order)
    window = np.repeat(np.arange(len(sizes)) // 8, sizes_in_order)
    positions = positions[np.lexsort((rng.random(rows), window))]
    per_rank = -(-rows // 8)
    first = positions[3 * per_rank:3 * per_rank + 1024]
else:
    epoch = BlockOrder(rows, bounds, seed=0, window_blocks=8).epoch(0)
    first = epoch.positions_at(rank_indices(np.arange(1024), 0, 3, 8, rows))
seconds = time.perf_counter() - start
_, traced = tracemalloc.get_traced_memory()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"seconds": seconds, "peak_mb": peak / 1024, "numpy_mb": traced / 2**20, "first": int(first[0])}))
"""


MIX_CHILD = r"""
import json, resource, sys, time, tracemalloc
import numpy as np
from stable_datasets.streaming.order import BlockOrder, rank_indices
from stable_datasets.streaming.sized_mix import BLOCK, SizedMixPlan, epoch_counts
rows, block, before = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
lengths = [rows // 2, rows // 3, rows - rows // 2 - rows // 3]
counts = epoch_counts(lengths, proportion=[0.5, 0.3, 0.2], epoch_size=rows)


class Before(SizedMixPlan):  # the plan before: a sequential hypergeometric split per block, kept per block
    def __init__(self, lengths, counts, seed):
        super().__init__(lengths, counts, seed)
        rng = np.random.default_rng([self.seed, 1])
        remaining = self.counts.copy()
        self._before = np.zeros((self.blocks, len(self.counts)), dtype=np.int64)
        self._in = np.zeros((self.blocks, len(self.counts)), dtype=np.int64)
        for b in range(self.blocks):
            self._before[b] = self.counts - remaining
            size = min(BLOCK, int(remaining.sum()))
            take = rng.multivariate_hypergeometric(remaining, size) if size < remaining.sum() else remaining.copy()
            self._in[b] = take
            remaining = remaining - take

    def block_counts(self, b):
        return self._before[b], self._in[b]


def first_rows(start):
    t0 = time.perf_counter()
    plan = (Before if before else SizedMixPlan)(lengths, counts, 0)
    orders = [BlockOrder(n, np.append(np.arange(0, n, block, dtype=np.int64), n), seed=k).epoch(0)
              for k, n in enumerate(lengths)]
    mix = rank_indices(np.arange(1024), start, 3, 8, rows)
    source, passes, row = plan.at_with_pass(mix)
    stored = np.empty_like(row)
    for s in range(3):
        stored[source == s] = orders[s].positions_at(row[source == s])
    return time.perf_counter() - t0, int(stored[0])


first, _ = first_rows(0)
middle, _ = first_rows(rows // 2)
_, traced = tracemalloc.get_traced_memory()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"seconds": first, "middle": middle, "peak_mb": peak / 1024, "numpy_mb": traced / 2**20}))
"""


VIEW_CHILD = r"""
import json, pickle, resource, sys, time, tracemalloc
import stable_datasets as sds
from stable_datasets.streaming.iterable import StreamingDataset
path, lazy = sys.argv[1], sys.argv[3] == "1"
ds = sds.load_from_disk(path)
ds[0]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
start = time.perf_counter()
view = ds.shuffle(seed=0, lazy=lazy)
stream = StreamingDataset(view, rank=3, world_size=8)
rows = [row for row, _ in zip(stream, range(1024))]
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
_, traced = tracemalloc.get_traced_memory()
print(json.dumps({"seconds": seconds, "peak_mb": peak / 1024, "numpy_mb": traced / 2**20,
                  "pickled": len(pickle.dumps(view)),
                  "first": rows[0]["x"]}))
"""


def shuffled_view(args: argparse.Namespace) -> None:
    import tempfile

    import numpy as np
    import pyarrow as pa

    import stable_datasets as sds

    print("| rows | shuffle | first 1,024 rows of a stream, rank 3/8 (s) | peak RSS above the opened cache (MB) | "
          "allocated peak (MB) | pickled view (bytes) |")
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bench-shuffled-view-") as work:
        for rows in args.rows:
            saved = f"{work}/saved{rows}"
            ds = sds.StableDataset.from_arrow(pa.table({"x": np.arange(rows, dtype=np.int64)}),
                                              cache_dir=f"{work}/cache")
            ds.save_to_disk(saved)
            del ds
            for lazy in (True, False):
                out = measure_view(saved, lazy)
                name = "lazy keyed bijection" if lazy else "permutation array (HF order)"
                print(f"| {rows:,} | {name} | {out['seconds']:.3f} | {out['peak_mb']:.1f} | {out['numpy_mb']:.1f} | "
                      f"{out['pickled']:,} |")


def measure_view(path: str, lazy: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", VIEW_CHILD, path, "0", "1" if lazy else "0"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(rows: int, block: int, before: bool, child: str = CHILD) -> dict:
    out = subprocess.run([sys.executable, "-c", child, str(rows), str(block), "1" if before else "0"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def quality(rows: int, block: int) -> list[tuple[str, float, float, float]]:
    import numpy as np

    from stable_datasets.streaming.order import BlockOrder

    bounds = np.append(np.arange(0, rows, block, dtype=np.int64), rows)
    sides = {"full permutation (np.random.permutation)": np.random.default_rng(0).permutation(rows),
             "block shuffle, windows of 8 blocks (ours)":
                 BlockOrder(rows, bounds, seed=0, window_blocks=8).epoch(0).positions,
             "block shuffle, windows of 64 blocks (ours)":
                 BlockOrder(rows, bounds, seed=0, window_blocks=64).epoch(0).positions,
             "keyed bijection, no blocks (ours, full)": BlockOrder(rows, None, seed=0).epoch(0).positions}
    results = []
    for name, order in sides.items():
        where = np.empty(rows, dtype=np.int64)
        where[order] = np.arange(rows)  # epoch index of each stored row
        gap = np.abs(np.diff(where)).mean() / ((rows + 1) / 3)
        ranks = where.astype(np.float64) - where.mean()
        stored = np.arange(rows, dtype=np.float64) - (rows - 1) / 2
        spearman = float((ranks * stored).sum() / np.sqrt((ranks ** 2).sum() * (stored ** 2).sum()))
        batches = order[: (rows // 256) * 256].reshape(-1, 256) // block
        distinct = float(np.mean([len(np.unique(b)) for b in batches[:2000]]))
        results.append((name, float(gap), spearman, distinct))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10**6, 10**7, 10**8, 10**9])
    parser.add_argument("--block", type=int, default=8192)
    parser.add_argument("--before", action="store_true", help="also time the full-length order (<= 1e7 rows)")
    parser.add_argument("--quality-rows", type=int, default=10**6)
    parser.add_argument("--sized-mix", action="store_true", help="a sized mix of three sources instead")
    parser.add_argument("--shuffled-view", action="store_true", help="StableDataset.shuffle() feeding a stream")
    args = parser.parse_args()
    if args.shuffled_view:
        shuffled_view(args)
        return
    if args.sized_mix:
        sized_mix(args)
        return
    print("| rows | first 1,024 rows of rank 3/8 (s) | peak RSS above imports (MB) | numpy peak (MB) | "
          "full-length order before (s / MB) |")
    print("|---:|---:|---:|---:|---:|")
    for rows in args.rows:
        ours = measure(rows, args.block, False)
        before = "not run"
        if args.before and rows <= 10**7:
            old = measure(rows, args.block, True)
            before = f"{old['seconds']:.2f} s / {old['peak_mb']:.0f} MB ({old['seconds'] / ours['seconds']:.0f}x)"
        print(f"| {rows:,} | {ours['seconds']:.4f} | {ours['peak_mb']:.1f} | {ours['numpy_mb']:.1f} | {before} |")
    print(f"\nquality at {args.quality_rows:,} rows, blocks of {args.block:,}:\n")
    print("| order | neighbour distance / full permutation's | Spearman(epoch index, stored position) | "
          "distinct blocks per 256 rows |")
    print("|---|---:|---:|---:|")
    for name, gap, spearman, distinct in quality(args.quality_rows, args.block):
        print(f"| {name} | {gap:.3f} | {spearman:+.4f} | {distinct:.1f} |")


def sized_mix(args: argparse.Namespace) -> None:
    print("| rows | first 1,024 mixed rows of rank 3/8 (s) | the same from the middle (s) | peak RSS above imports "
          "(MB) | numpy peak (MB) | plan before: first rows (s) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for rows in args.rows:
        ours = measure(rows, args.block, False, MIX_CHILD)
        before = "not run"
        if args.before and rows <= 10**8:
            old = measure(rows, args.block, True, MIX_CHILD)
            before = f"{old['seconds']:.2f} ({old['seconds'] / ours['seconds']:.0f}x)"
        print(f"| {rows:,} | {ours['seconds']:.4f} | {ours['middle']:.4f} | {ours['peak_mb']:.1f} | "
              f"{ours['numpy_mb']:.1f} | {before} |")


if __name__ == "__main__":
    main()
