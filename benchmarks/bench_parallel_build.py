"""Build throughput of a generation-bound builder at 1 and 2 processes, on a local Ray cluster,
and Hugging Face `datasets` (`from_generator(num_proc=...)`) on the same generator.

Every build runs in a fresh subprocess (so peak RSS is its own), sides in turns, several
rounds; the table gives medians and ranges, and ratios of medians.

    python benchmarks/bench_parallel_build.py --examples 20000 --rounds 3

`--marginal N` also builds every side with N examples in each round, and splits each side's
time into a fixed cost and a cost per example (the slope between the two sizes): the
throughput of a build once its workers are running, apart from what a build pays once
(starting processes, the generator's imports, merging and publishing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILDER = HERE / "bench_builders" / "digits_png.py"


def run_one(side: str, examples: int, cache: str, library_encodes: bool = False) -> dict:
    """One build in this process; returns seconds and peak RSS (this process, and its largest child)."""
    sys.path.insert(0, str(HERE))
    from common import quiet

    quiet()
    engine, fmt, procs = side.split(":")
    procs = int(procs)
    extra = {}
    if engine == "hf":
        import datasets
        from bench_builders.digits_png import CHUNKS, generate
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()
        features = datasets.Features({"image": datasets.Image(),
                                      "label": datasets.ClassLabel(names=[str(d) for d in range(10)])})

        def gen(chunks, examples):
            for _, example in generate(chunks, examples, library_encodes):
                image = example["image"] if library_encodes else {"bytes": example["image"], "path": None}
                yield {"image": image, "label": example["label"]}

        started = time.perf_counter()
        ds = datasets.Dataset.from_generator(gen, features=features, num_proc=procs if procs > 1 else None,
                                             gen_kwargs={"chunks": list(range(CHUNKS)), "examples": examples},
                                             cache_dir=cache)
        rows = len(ds)
    else:
        import stable_datasets as sds

        if engine == "ray":
            import ray

            began = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
            extra["ray_init_s"] = time.perf_counter() - began
        started = time.perf_counter()
        ds = sds.load_dataset(str(BUILDER), split="train", examples=examples, storage_format=fmt, cache_dir=cache,
                              num_proc=procs, engine="ray" if engine == "ray" else "process",
                              library_encodes=library_encodes)
        rows = len(ds)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": rows, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "child_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, **extra}


def measure(side: str, examples: int, work: Path, round_no: int, library_encodes: bool = False) -> dict:
    cache = work / f"{side.replace(':', '-')}-{round_no}"
    out = subprocess.run([sys.executable, __file__, "--run", side, "--examples", str(examples), "--cache", str(cache)]
                         + (["--library-encodes"] if library_encodes else []), capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default="arrow,parquet,lance")
    parser.add_argument("--run")
    parser.add_argument("--cache")
    parser.add_argument("--marginal", type=int, default=0,
                        help="also build N examples per side and round, to separate fixed cost from throughput")
    parser.add_argument("--library-encodes", action="store_true",
                        help="the generator yields arrays and each library PNG-encodes them with its own encoder")
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_one(args.run, args.examples, args.cache, args.library_encodes)))
        return
    sys.path.insert(0, str(HERE))
    from common import print_table, work_dir

    work = work_dir("bench-parallel-")
    sides = ["hf:arrow:1", "hf:arrow:2"]
    for fmt in args.formats.split(","):
        sides += [f"ours:{fmt}:1", f"ours:{fmt}:2", f"ray:{fmt}:2"]
    results: dict[str, list[dict]] = {s: [] for s in sides}
    small: dict[str, list[dict]] = {s: [] for s in sides}
    for round_no in range(args.rounds):
        for side in sides:  # in turns, so a slow spell hits every side alike
            results[side].append(measure(side, args.examples, work, round_no, args.library_encodes))
            print(f"round {round_no} {side}: {results[side][-1]['seconds']:.2f} s", file=sys.stderr)
            if args.marginal:
                small[side].append(measure(side, args.marginal, work, 100 + round_no, args.library_encodes))
                print(f"round {round_no} {side} x{args.marginal}: {small[side][-1]['seconds']:.2f} s",
                      file=sys.stderr)
    tiny = {s: measure(s, 16, work, 99)["seconds"] for s in ("ours:arrow:2", "ray:arrow:2") if s in results}

    def median(side: str, key: str = "seconds") -> float:
        return statistics.median(r[key] for r in results[side])

    rows = []
    for side in sides:
        engine, fmt, procs = side.split(":")
        times = [r["seconds"] for r in results[side]]
        one = f"{engine if engine != 'ray' else 'ours'}:{fmt}:1"
        speedup = median(one) / median(side) if one in results and procs != "1" else None
        vs_hf = median(f"hf:arrow:{procs}") / median(side) if engine != "hf" else None
        rows.append((
            {"hf": "HF datasets", "ours": "stable-datasets", "ray": "stable-datasets, Ray"}[engine], fmt, procs,
            f"{median(side):.2f} ({min(times):.2f}-{max(times):.2f})", f"{args.examples / median(side):,.0f}",
            f"{speedup:.2f}x" if speedup else "", f"{vs_hf:.2f}x" if vs_hf else "",
            f"{median(side, 'rss_mb'):.0f} / {median(side, 'child_rss_mb'):.0f}"))
    print(f"{args.examples} examples, {args.rounds} rounds, median (range) seconds; {os.cpu_count()} cores; "
          f"PNG encoded by {'each library' if args.library_encodes else 'the generator'}")
    print_table(["builder", "layout", "processes", "seconds", "examples/s", "vs 1 process", "vs HF same procs",
                 "peak RSS MB (driver / largest child)"], rows, right=(2, 3, 4, 5, 6, 7))
    if args.marginal:
        print_marginal(sides, results, small, args.examples, args.marginal, print_table)
    if len(tiny) == 2:
        ray_init = statistics.median(r["ray_init_s"] for r in results["ray:arrow:2"])
        print(f"\nRay fixed cost: ray.init(num_cpus=2) {ray_init:.1f} s; a 16-example build "
              f"{tiny['ray:arrow:2']:.2f} s on Ray vs {tiny['ours:arrow:2']:.2f} s with 2 processes")


def print_marginal(sides: list[str], big: dict[str, list[dict]], small: dict[str, list[dict]], n_big: int,
                   n_small: int, print_table) -> None:
    """Per side: the slope between the two sizes (seconds per example, round by round, median)
    and the intercept (fixed seconds); ratios of the slopes are throughput ratios."""
    slope, fixed = {}, {}
    for side in sides:
        per_round = [(b["seconds"] - s["seconds"]) / (n_big - n_small) for b, s in zip(big[side], small[side])]
        slope[side] = statistics.median(per_round)
        fixed[side] = statistics.median(s["seconds"] - slope[side] * n_small for s in small[side])
    rows = []
    for side in sides:
        engine, fmt, procs = side.split(":")
        one = f"{engine if engine != 'ray' else 'ours'}:{fmt}:1"
        speedup = slope[one] / slope[side] if one in slope and procs != "1" else None
        vs_hf = slope[f"hf:arrow:{procs}"] / slope[side] if engine != "hf" else None
        rows.append(({"hf": "HF datasets", "ours": "stable-datasets", "ray": "stable-datasets, Ray"}[engine], fmt,
                     procs, f"{fixed[side]:.2f}", f"{1 / slope[side]:,.0f}", f"{speedup:.2f}x" if speedup else "",
                     f"{vs_hf:.2f}x" if vs_hf else ""))
    print(f"\nThroughput apart from fixed cost: the slope between {n_small} and {n_big} examples "
          "(median of the rounds)")
    print_table(["builder", "layout", "processes", "fixed s", "examples/s", "vs 1 process", "vs HF same procs"],
                rows, right=(2, 3, 4, 5, 6))


if __name__ == "__main__":
    main()
