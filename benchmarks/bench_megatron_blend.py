"""Megatron-Core's blending index (which source each blended sample comes from): the plain loop (one Python step per
sample, what `stable_datasets.megatron.blend.blending_indices` was), ours now (`blend_index`: segments stepped
together in numpy, exact), and megatron-core's own C++ `helpers.build_blending_indices`, at 10^5, 10^6 and 10^7
samples with 2 and 10 sources (random weights, fixed seed). Every result is checked equal to megatron-core's.

    python benchmarks/bench_megatron_blend.py [--sizes 100000 1000000 10000000] [--sources 2 10] [--loop-max 10000000]

`--loop-max`: the largest size the plain loop is timed at (it takes ~2.4 s per million samples with 2 sources).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stable_datasets.megatron.blend import blending_indices, normalise
from stable_datasets.megatron.blend_index import stepwise_blending_indices


def megatron(shares: list[float], size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """megatron-core's C++ helper, or None where megatron-core (with its compiled helpers) is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from megatron.core.datasets import helpers
    except ImportError:
        return None
    dataset_index, dataset_sample_index = np.zeros(size, dtype=np.int16), np.zeros(size, dtype=np.int64)
    helpers.build_blending_indices(dataset_index, dataset_sample_index, np.asarray(shares), len(shares), size, False)
    return dataset_index, dataset_sample_index


def timed(fn, *args):
    started = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--sources", type=int, nargs="+", default=[2, 10])
    parser.add_argument("--loop-max", type=int, default=10_000_000)
    args = parser.parse_args()
    megatron([0.5, 0.5], 10)  # import megatron-core before timing it
    print("| sources | samples | plain loop (before) | ours (after) | speed-up | megatron-core C++ | equal |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for sources in args.sources:
        shares = normalise(np.random.default_rng(sources).random(sources) + 0.05)
        for size in args.sizes:
            ours_s, ours = timed(blending_indices, shares, size)
            loop_s, loop = timed(stepwise_blending_indices, shares, size) if size <= args.loop_max else (None, None)
            cpp_s, cpp = timed(megatron, shares, size)
            equal = all(np.array_equal(a, b) for ref in (loop, cpp) if ref is not None for a, b in zip(ours, ref))
            loop_text = f"{loop_s:.2f} s" if loop_s is not None else "-"
            ratio = f"{loop_s / ours_s:.0f}x" if loop_s is not None else "-"
            cpp_text = f"{cpp_s * 1e3:.0f} ms" if cpp is not None else "-"
            print(f"| {sources} | {size:,} | {loop_text} | {ours_s:.3f} s | {ratio} | {cpp_text} | "
                  f"{'yes' if equal else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
