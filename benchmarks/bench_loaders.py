"""Generic loaders vs Hugging Face `datasets` on the same files: cold build and warm reuse.

    python benchmarks/bench_loaders.py --rows 200000 --images 5000 --files 10000 --rounds 3

Data (real, shipped with scikit-learn and Python): the 1,797 handwritten digits of
`sklearn.datasets.load_digits`, repeated to `--rows` rows of `id`, `label`, the 64 pixel
values and a `text` column cut from `pydoc_data.topics` (Python's own documentation), written
once as CSV, JSON Lines and Parquet; and `--images` digit images as PNG files in one folder
per class for "imagefolder".

Cold build: `load_dataset(loader, data_files=..., split="train")` into an empty cache, each
library in turn (ours, theirs, ours, ...) for `--rounds` rounds; medians and ranges of the wall
time, and the median CPU time of the process (all threads), which a busy machine changes less. Warm
reuse: the second `load_dataset` of an unchanged input of `--files` files (one CSV file of a
few rows each, and a `--files`-image imagefolder), best of 5 (Hugging Face: best of
`--hf-warm-repeats`, default 3). Both libraries run in this process with their progress bars
off; `num_proc` is left at its default (one process) on both sides unless `--num-proc` is given.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import best_of, print_table, quiet, work_dir


def _digits():
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    return np.round(digits.images * (255 / 16)).astype(np.uint8), digits.target


def _texts(n: int) -> list[str]:
    from pydoc_data.topics import topics

    words = " ".join(topics.values()).split()
    return [" ".join(words[(i * 17) % (len(words) - 40):(i * 17) % (len(words) - 40) + 12 + i % 25])
            for i in range(n)]


def write_tabular(folder: Path, rows: int) -> dict[str, str]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    images, targets = _digits()
    index = np.arange(rows) % len(images)
    columns = {"id": np.arange(rows), "label": targets[index]}
    pixels = images.reshape(len(images), -1)[index]
    for j in range(pixels.shape[1]):
        columns[f"p{j}"] = pixels[:, j].astype(np.int64)
    columns["text"] = _texts(rows)
    table = pa.table(columns)
    paths = {"csv": str(folder / "digits.csv"), "json": str(folder / "digits.jsonl"),
             "parquet": str(folder / "digits.parquet")}
    pacsv.write_csv(table, paths["csv"])
    pq.write_table(table, paths["parquet"], row_group_size=50_000)
    import json

    with open(paths["json"], "w") as fh:
        for record in table.to_pylist():
            fh.write(json.dumps(record) + "\n")
    return paths


def write_images(folder: Path, count: int) -> str:
    import cv2

    images, targets = _digits()
    for i in range(count):
        label_dir = folder / f"class_{targets[i % len(images)]}"
        label_dir.mkdir(parents=True, exist_ok=True)
        (label_dir / f"{i:06d}.png").write_bytes(cv2.imencode(".png", images[i % len(images)])[1].tobytes())
    return str(folder)


def write_small_csvs(folder: Path, count: int) -> str:
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"part-{i:06d}.csv").write_text(f"id,text\n{2 * i},row {2 * i}\n{2 * i + 1},row {2 * i + 1}\n")
    return str(folder / "*.csv")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--images", type=int, default=5_000)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-proc", type=int, default=None)
    parser.add_argument("--only", default="csv,json,parquet,imagefolder,warm")
    parser.add_argument("--hf-warm-repeats", type=int, default=3, help="Hugging Face's warm reloads are slow")
    args = parser.parse_args()
    quiet()
    import datasets

    import stable_datasets as sds

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    only = args.only.split(",")
    root = work_dir("bench-loaders-")
    try:
        inputs = write_tabular(root, args.rows)
        image_dir = write_images(root / "images", args.images) if "imagefolder" in only else None
        counter = iter(range(10**9))

        def ours(loader: str, **kwargs) -> int:
            cache = root / f"ours-{next(counter)}"
            try:
                return len(sds.load_dataset(loader, split="train", cache_dir=str(cache), num_proc=args.num_proc,
                                            **kwargs))
            finally:
                shutil.rmtree(cache, ignore_errors=True)

        def theirs(loader: str, **kwargs) -> int:
            cache = root / f"hf-{next(counter)}"
            try:
                return len(datasets.load_dataset(loader, split="train", cache_dir=str(cache), num_proc=args.num_proc,
                                                 **kwargs))
            finally:
                shutil.rmtree(cache, ignore_errors=True)

        rows = []
        cases = [(name, {"data_files": inputs[name]}, args.rows) for name in ("csv", "json", "parquet")]
        cases.append(("imagefolder", {"data_dir": image_dir}, args.images))
        for loader, kwargs, expected in cases:
            if loader not in only:
                continue
            times: dict[str, list[float]] = {"ours": [], "theirs": []}
            cpu: dict[str, list[float]] = {"ours": [], "theirs": []}  # both threads' CPU: robust to a busy machine
            for _ in range(args.rounds):
                for side, fn in (("ours", ours), ("theirs", theirs)):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    assert fn(loader, **kwargs) == expected
                    times[side].append(time.perf_counter() - started)
                    cpu[side].append(time.process_time() - started_cpu)
            a, b = statistics.median(times["ours"]), statistics.median(times["theirs"])
            rows.append((f"cold build `{loader}`", f"{a:.2f} ({min(times['ours']):.2f}-{max(times['ours']):.2f})",
                         f"{b:.2f} ({min(times['theirs']):.2f}-{max(times['theirs']):.2f})", "s", f"{b / a:.1f}x"))
            cpu_a, cpu_b = statistics.median(cpu["ours"]), statistics.median(cpu["theirs"])
            rows.append((f"CPU of a cold build `{loader}`", f"{cpu_a:.2f}", f"{cpu_b:.2f}", "CPU-s",
                         f"{cpu_b / cpu_a:.1f}x"))
            print(*rows[-2:], sep="\n", flush=True)
        if "warm" in only:
            pattern = write_small_csvs(root / "many", args.files)
            many_images = write_images(root / "many-images", args.files)
            warm_cases = [("csv", {"data_files": pattern}, 2 * args.files, f"{args.files:,} CSV files"),
                          ("imagefolder", {"data_dir": many_images}, args.files, f"{args.files:,} images")]
            for loader, kwargs, expected, label in warm_cases:
                cache_ours, cache_hf = str(root / f"warm-ours-{loader}"), str(root / f"warm-hf-{loader}")

                def warm_ours(loader=loader, kwargs=kwargs, cache=cache_ours) -> int:
                    return len(sds.load_dataset(loader, split="train", cache_dir=cache, **kwargs))

                def warm_theirs(loader=loader, kwargs=kwargs, cache=cache_hf) -> int:
                    return len(datasets.load_dataset(loader, split="train", cache_dir=cache, **kwargs))

                assert warm_ours() == expected and warm_theirs() == expected  # the builds
                a, b = best_of(warm_ours, 5), best_of(warm_theirs, args.hf_warm_repeats)
                rows.append((f"warm reuse `{loader}`, {label}", f"{a:.3f}", f"{b:.3f}", "s", f"{b / a:.1f}x"))
                print(rows[-1], flush=True)
        load = os.getloadavg()
        print(f"{args.rows:,} rows (66 int columns + text) as CSV {os.path.getsize(inputs['csv']) >> 20} MiB, "
              f"JSONL {os.path.getsize(inputs['json']) >> 20} MiB, Parquet {os.path.getsize(inputs['parquet']) >> 20} "
              f"MiB; {args.images:,} PNG digits; datasets {datasets.__version__}, pyarrow "
              f"{__import__('pyarrow').__version__}; num_proc={args.num_proc}; {os.cpu_count()} cores, "
              f"load average {load[0]:.1f}\n")
        print_table(["measure", "stable-datasets", "datasets", "unit", "speedup"], rows, right=(1, 2, 4))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
