"""A mixed stream of three sources read by 2 DataLoader workers: ours vs mosaicml-streaming and litdata.

    python benchmarks/bench_peers.py --install-peers   # once: the pinned peers, without touching numpy/torch
    python benchmarks/bench_mixing.py                   # 3 sources (30k, 20k, 10k rows of 1 KB), 3 rounds
    python benchmarks/bench_mixing.py --rows 3000 --rounds 1   # smoke run

Each library writes the same rows its own default way. Each side mixes the three sources with weights
0.5 / 0.3 / 0.2, shuffled, and is read through a DataLoader with 2 workers and batches of 256, for the
first `--take` rows (default: half the rows, so every side stops before a source runs out), each
round in a fresh child process (imports untimed). Sides:

- ours: `sds.interleave_datasets([s.to_iterable().shuffle(seed=k) ...], probabilities=, seed=)` read by
  `StreamingDataLoader` (the mix resumes exactly, on another cluster size too);
- mosaicml-streaming: `StreamingDataset(streams=[Stream(local=..., proportion=p), ...], shuffle=True)`;
- litdata: `CombinedStreamingDataset([StreamingDataset(dir, shuffle=True), ...], weights=...)` read by
  litdata's own `StreamingDataLoader` (it needs it for the combined state).

Reported: rows/s (median and range over rounds), the ratio of ours to the faster peer (of the medians, and
per round: ours over the faster peer of the same round, whose median and range are steadier on a shared
machine), and the CPU seconds of the process and its workers per 1,000 rows.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import bench_streaming as bs

WEIGHTS = (0.5, 0.3, 0.2)
SHARES = (0.5, 0.333, 0.167)  # rows of each source, as a share of --rows


def source_rows(rows: int) -> list[int]:
    return [int(rows * s) for s in SHARES]


def write_sources(work: Path, rows: int, blob: int) -> None:
    """Each source written by each library, once (a marker file says it is there)."""
    import stable_datasets as sds

    if (work / "written").exists():
        return
    for k, n in enumerate(source_rows(rows)):
        bench = type(f"MixSource{k}", (bs.StreamBench,), {"ROWS": n, "BLOB": blob})
        sds.load_dataset(bench, split="train", cache_dir=work / f"ours{k}")
        bs.write_mds(work / f"mds{k}", n, blob)
        bs.write_litdata(work / f"litdata{k}", n, blob)
    (work / "written").write_text("ok")


def loader(side: str, work: Path, rows: int, blob: int) -> Any:
    import torch

    if side == "ours":
        import stable_datasets as sds
        from stable_datasets.streaming import StreamingDataLoader

        streams = []
        for k, n in enumerate(source_rows(rows)):
            bench = type(f"MixSource{k}", (bs.StreamBench,), {"ROWS": n, "BLOB": blob})
            ds = sds.load_dataset(bench, split="train", cache_dir=work / f"ours{k}")
            streams.append(ds.to_iterable().shuffle(seed=k))
        mixed = sds.interleave_datasets(streams, probabilities=list(WEIGHTS), seed=0)
        return StreamingDataLoader(mixed, batch_size=256, num_workers=2, collate_fn=bs.collate_rows)
    if side == "mosaicml-streaming":
        base = bs.import_mds()
        streams = [base.Stream(local=str(work / f"mds{k}"), proportion=w) for k, w in enumerate(WEIGHTS)]
        dataset = base.StreamingDataset(streams=streams, shuffle=True, shuffle_seed=0, batch_size=256,
                                        epoch_size=rows)
        return torch.utils.data.DataLoader(dataset, batch_size=256, num_workers=2, collate_fn=bs.collate_rows)
    if side == "litdata":
        import litdata

        sources = [litdata.StreamingDataset(str(work / f"litdata{k}"), shuffle=True, seed=k) for k in range(3)]
        combined = litdata.CombinedStreamingDataset(sources, weights=list(WEIGHTS), seed=0, iterate_over_all=False)
        return litdata.StreamingDataLoader(combined, batch_size=256, num_workers=2, collate_fn=bs.collate_rows)
    raise ValueError(side)


def child(work: str, rows: int, blob: int, side: str, take: int) -> None:
    import torch  # noqa: F401  (imports untimed)

    made = loader(side, Path(work), rows, blob)
    start, cpu = time.perf_counter(), bs.cpu_seconds()
    count = 0
    for batch in made:
        count += len(batch["idx"])
        if count >= take:
            break
    elapsed, used = time.perf_counter() - start, bs.cpu_seconds() - cpu
    print(f"RESULT {count} {elapsed} {used}")


def run_side(work: Path, rows: int, blob: int, side: str, take: int) -> tuple[float, float]:
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_mixing as b; "
            f"b.child({str(work)!r}, {rows}, {blob}, {side!r}, {take})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{side} failed:\n{done.stderr[-3000:]}")
    count, elapsed, used = lines[-1].split()[1:]
    return int(count) / float(elapsed), float(used) / int(count) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=60_000, help="rows of the three sources together")
    parser.add_argument("--blob", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--take", type=int, default=None)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-mixing-"))
    take = args.take or args.rows // 2
    write_sources(work, args.rows, args.blob)
    sides = ["ours", "mosaicml-streaming", "litdata"]
    speed: dict[str, list[float]] = {s: [] for s in sides}
    cpu: dict[str, list[float]] = {s: [] for s in sides}
    for _ in range(args.rounds):
        for side in sides:
            rate, per_k = run_side(work, args.rows, args.blob, side, take)
            speed[side].append(rate)
            cpu[side].append(per_k)
    best_peer = max(statistics.median(speed[s]) for s in sides[1:])
    # the sides of one round ran minutes apart at most: their ratio is steadier than a ratio of medians on a
    # shared machine, where the load moves between rounds
    paired = [speed["ours"][r] / max(speed[s][r] for s in sides[1:]) for r in range(args.rounds)]
    print(f"\n{args.rows:,} rows of {args.blob} B in 3 sources (weights {WEIGHTS}), first {take:,} mixed rows, "
          f"2 workers, batches of 256, {args.rounds} rounds\n")
    print("| side | rows/s (median, range) | ours / faster peer (of medians; per round: median, range) | "
          "CPU s per 1,000 rows |")
    print("|---|---:|---:|---:|")
    for side in sides:
        med = statistics.median(speed[side])
        ratio = (f"{statistics.median(speed['ours']) / best_peer:.2f}x; {statistics.median(paired):.2f}x "
                 f"({min(paired):.2f}-{max(paired):.2f})") if side == "ours" else ""
        print(f"| {side} | {med:,.0f} ({min(speed[side]):,.0f}-{max(speed[side]):,.0f}) | {ratio} | "
              f"{statistics.median(cpu[side]):.3f} |")


if __name__ == "__main__":
    main()
