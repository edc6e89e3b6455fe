"""Streaming data files without a cache vs Hugging Face `datasets`, on the same JSON Lines files.

    python benchmarks/bench_file_stream.py --files 200 --rows-per-file 2000 --rounds 3

Data (real, shipped with scikit-learn and Python): `--files` JSON Lines files of `--rows-per-file`
rows each: `id`, `label` and the 64 pixels of a digit of `sklearn.datasets.load_digits`, and a
`text` cut from `pydoc_data.topics`. Both sides open the files with
`load_dataset("json", data_files=<the list>, streaming=True)`, each in a fresh cache root:

- first row: from the `load_dataset` call to the first row (ours counts each file's lines first,
  which is what lets ranks, workers and a resume split the rows exactly);
- rows/s: one whole pass over the stream, rows as Python dicts, in this process;
- rows/s shuffled: ours `shuffle(seed=0, buffer_size=1000)`, theirs `shuffle(seed=0, buffer_size=1000)`;
- first row, counts known: ours opened a second time on the same node (its own local folder per run, so
  the first open counts): the row counts come from the node's counts file, as for another rank or a restart.

Both libraries are imported and run once on two small files first (imports are not timed).
Each measure runs in turns (ours, theirs, ours, ...) for `--rounds` rounds; the best is kept.
Nothing is written to a cache on either side (checked after each of our runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table, quiet, work_dir


def write_files(folder: Path, files: int, per_file: int) -> list[str]:
    from pydoc_data.topics import topics

    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = np.round(digits.images.reshape(len(digits.images), -1) * (255 / 16)).astype(int).tolist()
    words = " ".join(topics.values()).split()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        lines = []
        for i in range(per_file):
            n = f * per_file + i
            start = (n * 17) % (len(words) - 40)
            lines.append(json.dumps({"id": n, "label": int(digits.target[n % len(pixels)]),
                                     "pixels": pixels[n % len(pixels)],
                                     "text": " ".join(words[start:start + 12 + n % 25])}))
        path = folder / f"part-{f:05d}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def read_stream(stream, shuffled: bool, started: float) -> tuple[float, float, int]:
    """(seconds to the first row, rows/s, rows) of one pass over `stream`, timed from `started`."""
    if shuffled:
        stream = stream.shuffle(seed=0, buffer_size=1000)
    rows = iter(stream)
    next(rows)
    first = time.perf_counter() - started
    count = 1 + sum(1 for _ in rows)
    return first, count / (time.perf_counter() - started), count


def ours(paths: list[str], cache: Path, shuffled: bool) -> tuple[float, float, int]:
    """A fresh node each run (its own local folder): the rows are counted when the stream opens."""
    import os

    import stable_datasets as sds

    os.environ["STABLE_DATASETS_LOCAL_CACHE_DIR"] = str(cache / "node")
    started = time.perf_counter()
    stream = sds.load_dataset("json", data_files=paths, split="train", streaming=True, cache_dir=str(cache))
    result = read_stream(stream, shuffled, started)
    assert not any(cache.rglob("*.arrow")), "a cache was written"
    return result


def ours_counted(paths: list[str], cache: Path, shuffled: bool) -> tuple[float, float, int]:
    """The same node again (another rank, a restart): the counts are known from the node's counts file."""
    ours(paths, cache, shuffled)
    return ours(paths, cache, shuffled)


def theirs(paths: list[str], cache: Path, shuffled: bool) -> tuple[float, float, int]:
    import datasets

    started = time.perf_counter()
    stream = datasets.load_dataset("json", data_files=paths, split="train", streaming=True, cache_dir=str(cache))
    return read_stream(stream, shuffled, started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows-per-file", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    quiet()
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    folder = work_dir("bench-file-stream-")
    try:
        paths = write_files(folder / "data", args.files, args.rows_per_file)
        size = sum(Path(p).stat().st_size for p in paths)
        warm = write_files(folder / "warm", 2, 10)  # imports (torch on our side) and first-call costs, untimed
        ours(warm, folder / "warm-ours", False)
        theirs(warm, folder / "warm-theirs", False)
        results: dict[tuple[str, bool], list[tuple[float, float, int]]] = {}
        for round_ in range(args.rounds):
            for shuffled in (False, True):
                for name, run in (("ours", ours), ("theirs", theirs), ("ours, counts known", ours_counted)):
                    cache = folder / f"cache-{name}-{round_}-{shuffled}"
                    results.setdefault((name, shuffled), []).append(run(paths, cache, shuffled))
                    shutil.rmtree(cache, ignore_errors=True)
        rows = []
        for shuffled in (False, True):
            mine, other = results[("ours", shuffled)], results[("theirs", shuffled)]
            assert {r[2] for r in mine} == {r[2] for r in other} == {args.files * args.rows_per_file}
            label = "shuffled (buffer 1000)" if shuffled else "in order"
            first_ours, first_theirs = min(r[0] for r in mine), min(r[0] for r in other)
            rate_ours, rate_theirs = max(r[1] for r in mine), max(r[1] for r in other)
            rows.append((f"first row, {label}", f"{first_ours * 1000:.0f}", f"{first_theirs * 1000:.0f}", "ms",
                         f"{first_theirs / first_ours:.2f}x"))
            rows.append((f"rows/s, {label}", f"{rate_ours:,.0f}", f"{rate_theirs:,.0f}", "rows/s",
                         f"{rate_ours / rate_theirs:.2f}x"))
            first_known = min(r[0] for r in results[("ours, counts known", shuffled)])
            rows.append((f"first row, {label}, counts known (another rank, a restart)", f"{first_known * 1000:.0f}",
                         f"{first_theirs * 1000:.0f}", "ms", f"{first_theirs / first_known:.2f}x"))
        print(f"{args.files} JSON Lines files x {args.rows_per_file} rows ({size / 2**20:.0f} MiB); "
              f"datasets {datasets.__version__}")
        print_table(["measure", "stable-datasets", "datasets", "unit", "speedup"], rows, right=(1, 2, 4))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
