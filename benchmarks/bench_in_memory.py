"""`StableDataset.from_pandas` / `to_pandas` vs Hugging Face `Dataset.from_pandas` / `to_pandas`.

Data: a pandas DataFrame of N rows: int64 id, float64 score, a short text, an int label
(10 classes, given as a ClassLabel to both libraries).

    python benchmarks/bench_in_memory.py --rows 1000000 --rounds 5

Measured, with the sides in turns (ours, theirs, ours, ...) for `--rounds` rounds; medians
and ranges are printed:

- from_pandas. Ours publishes a cache on disk (encode, content hash, Arrow shards, fsync,
  rename) into a fresh cache folder each round. Hugging Face's `from_pandas` keeps the table
  in memory and writes nothing, so it is timed alone and also followed by `save_to_disk`
  (its way to persist a dataset) for the like-for-like figure.
- from_pandas again with the same data: ours finds the cache by content and reopens it.
- to_pandas of the whole dataset, each read from its files on disk (ours memory-mapped from
  the cache, theirs from `load_from_disk`, memory-mapped too).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import print_table, quiet, work_dir  # noqa: E402

NAMES = [f"class_{i}" for i in range(10)]


def frame(rows: int):
    import pandas as pd

    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
    text = [f"{a} {b} {i}" for i, (a, b) in enumerate(zip(words[rng.integers(0, 8, rows)],
                                                            words[rng.integers(0, 8, rows)]))]
    return pd.DataFrame({"id": np.arange(rows, dtype=np.int64), "score": rng.random(rows),
                         "text": text, "label": rng.integers(0, 10, rows)})


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        result = fn()
        return time.perf_counter() - started, result
    finally:
        gc.enable()


def summary(times: list[float]) -> str:
    return f"{statistics.median(times):.3f} ({min(times):.3f} to {max(times):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    quiet()
    import datasets

    import stable_datasets as sds

    datasets.disable_progress_bars()
    df = frame(args.rows)
    ours_features = sds.Features({"id": sds.Value("int64"), "score": sds.Value("float64"),
                                  "text": sds.Value("string"), "label": sds.ClassLabel(names=NAMES)})
    hf_features = datasets.Features({"id": datasets.Value("int64"), "score": datasets.Value("float64"),
                                     "text": datasets.Value("string"), "label": datasets.ClassLabel(names=NAMES)})
    scratch = work_dir("bench_in_memory_")
    times: dict[str, list[float]] = {k: [] for k in (
        "ours_from", "hf_from", "hf_from_save", "ours_again", "ours_to", "hf_to")}
    try:
        for round_ in range(args.rounds):
            folder = scratch / f"round{round_}"
            # -- from_pandas, in turns
            t, ours = timed(lambda f=folder: sds.StableDataset.from_pandas(df, features=ours_features,
                                                                           cache_dir=f / "ours"))
            times["ours_from"].append(t)
            t, hf = timed(lambda: datasets.Dataset.from_pandas(df, features=hf_features, preserve_index=False))
            times["hf_from"].append(t)
            t, _ = timed(lambda f=folder: datasets.Dataset.from_pandas(
                df, features=hf_features, preserve_index=False).save_to_disk(str(f / "hf")))
            times["hf_from_save"].append(t)
            t, _ = timed(lambda f=folder: sds.StableDataset.from_pandas(df, features=ours_features,
                                                                        cache_dir=f / "ours"))
            times["ours_again"].append(t)
            # -- to_pandas from the files on disk, in turns
            on_disk = datasets.load_from_disk(str(folder / "hf"))
            t, ours_df = timed(ours.to_pandas)
            times["ours_to"].append(t)
            t, hf_df = timed(on_disk.to_pandas)
            times["hf_to"].append(t)
            if round_ == 0:
                assert ours_df["text"].tolist()[:3] == hf_df["text"].tolist()[:3] == df["text"].tolist()[:3]
                assert ours_df["label"].tolist() == hf_df["label"].tolist()
            del ours, hf, on_disk, ours_df, hf_df
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def ratio(theirs: str, ours_key: str) -> str:
        return f"{statistics.median(times[theirs]) / statistics.median(times[ours_key]):.2f}x"

    print(f"{args.rows:,} rows (int64, float64, text, ClassLabel); {args.rounds} rounds in turns; "
          f"datasets {datasets.__version__}, stable-datasets {sds.__version__}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print()
    print_table(["measure", "stable-datasets s", "datasets s", "datasets / ours"], [
        ("from_pandas, published on disk (ours) vs in memory (theirs)", summary(times["ours_from"]),
         summary(times["hf_from"]), ratio("hf_from", "ours_from")),
        ("from_pandas, on disk both (theirs: + save_to_disk)", summary(times["ours_from"]),
         summary(times["hf_from_save"]), ratio("hf_from_save", "ours_from")),
        ("from_pandas of the same data again (ours: cache found by content)", summary(times["ours_again"]),
         summary(times["hf_from"]), ratio("hf_from", "ours_again")),
        ("to_pandas of every row, from the files on disk", summary(times["ours_to"]), summary(times["hf_to"]),
         ratio("hf_to", "ours_to")),
    ], right=(1, 2, 3))


if __name__ == "__main__":
    main()
