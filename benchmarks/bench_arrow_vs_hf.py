"""stable-datasets (arrow_shards) vs Hugging Face `datasets`, side by side on the same data.

Data: N rows of {~3 KB PNG image bytes, int label}, written by both libraries from the same
generator. Reads are "raw" (image bytes, no decode) on both sides.

    python benchmarks/bench_arrow_vs_hf.py --rows 200000

Each build runs in its own subprocess (to measure its peak RSS); reopen times are measured
in fresh subprocesses; all reads run in this process, alternating between the libraries.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import best_of, best_of_each, print_table  # noqa: E402

POOL = 512  # distinct images cycled through by the generator


def image_pool() -> list[bytes]:
    import cv2

    rng = np.random.default_rng(0)
    return [cv2.imencode(".png", rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))[1].tobytes()
            for _ in range(POOL)]


def examples(n: int):
    pool = image_pool()
    for i in range(n):
        yield i, {"image": pool[i % POOL], "label": i % 10}


# -- builds (each in a child process) --------------------------------------------------------
BUILDER_SOURCE = '''
import stable_datasets as sds
import sys
sys.path.insert(0, {here!r})
from bench_arrow_vs_hf import examples

class Bench(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features={{"image": sds.Image(), "label": sds.ClassLabel(num_classes=10)}})

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {{"n": {rows}}})]

    def _generate_examples(self, n):
        yield from examples(n)
'''


def build_ours(workdir: Path, rows: int) -> dict:
    import stable_datasets as sds

    script = workdir / "bench.py"
    script.write_text(BUILDER_SOURCE.format(here=str(HERE), rows=rows))
    started = time.perf_counter()
    ds = sds.load_dataset(str(script), split="train", cache_dir=workdir / "sds")
    return {"seconds": time.perf_counter() - started, "rows": len(ds), "dir": str(ds.cache_dirs[0])}


def build_hf(workdir: Path, rows: int) -> dict:
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)})

    def gen(n):
        for _, example in examples(n):
            yield example

    started = time.perf_counter()
    ds = datasets.Dataset.from_generator(gen, gen_kwargs={"n": rows}, features=features,
                                         cache_dir=str(workdir / "hf"))
    return {"seconds": time.perf_counter() - started, "rows": len(ds), "files": [f["filename"] for f in ds.cache_files]}


def reopen_ours(workdir: Path, rows: int) -> dict:
    import stable_datasets as sds

    script = workdir / "bench.py"
    started = time.perf_counter()
    ds = sds.load_dataset(str(script), split="train", cache_dir=workdir / "sds")
    ds[0]
    return {"seconds": time.perf_counter() - started}


def reopen_hf(workdir: Path, rows: int) -> dict:

    started = time.perf_counter()
    out = build_hf(workdir, rows)  # same generator + features: datasets finds its cache
    out["seconds"] = time.perf_counter() - started
    return out


def child(kind: str, workdir: Path, rows: int) -> dict:
    os.environ["STABLE_DATASETS_DISABLE_PROGRESS"] = "1"
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    from loguru import logger

    logger.disable("stable_datasets")
    started = time.perf_counter()
    import datasets  # noqa: F401 - import both so import cost is not in the timings

    import stable_datasets  # noqa: F401
    imported = time.perf_counter() - started
    result = {"build_ours": build_ours, "build_hf": build_hf, "reopen_ours": reopen_ours,
              "reopen_hf": reopen_hf}[kind](workdir, rows)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["import_seconds"] = imported
    return result


def run_child(kind: str, workdir: Path, rows: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--workdir", str(workdir), "--rows", str(rows)],
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- reads (in this process) ---------------------------------------------------------------
def measure_reads(ours, hf, rows: int, arrow_files: list[str]) -> list[tuple[str, float, float, str]]:
    import pyarrow as pa

    rng = np.random.default_rng(1)
    singles = rng.integers(0, rows, 20_000).tolist()
    batches = [rng.integers(0, rows, 256).tolist() for _ in range(200)]
    results = []

    # Each row or batch is dropped before the next is read, as in a training loop and in the floor
    # below; keeping them all would time the kernel handing out fresh pages as much as the reads.
    def row_loop(ds):
        def run():
            for i in singles:
                ds[i]
        return run

    def batch_loop(ds):
        def run():
            for b in batches:
                ds.__getitems__(b)
        return run

    assert ours[singles[0]]["image"] == hf[singles[0]]["image"]["bytes"]
    t_ours, t_hf = best_of_each([row_loop(ours), row_loop(hf)])
    results.append(("random `ds[i]`, raw", t_ours / len(singles) * 1e6, t_hf / len(singles) * 1e6, "µs/row"))
    t_ours, t_hf = best_of_each([batch_loop(ours), batch_loop(hf)])
    results.append(("`__getitems__` of 256 random indices", t_ours / len(batches) * 1e3, t_hf / len(batches) * 1e3,
                    "ms/batch"))
    t_ours = best_of(lambda: sum(1 for _ in ours), 2)
    t_hf = best_of(lambda: sum(1 for _ in hf), 2)
    results.append(("full sequential iteration", t_ours, t_hf, "s"))
    sh_ours, sh_hf = ours.shuffle(seed=0), hf.shuffle(seed=0)
    t_ours = best_of(lambda: sum(1 for _ in sh_ours), 2)
    t_hf = best_of(lambda: sum(1 for _ in sh_hf), 2)
    results.append(("iteration after `shuffle(seed=0)`", t_ours, t_hf, "s"))

    # The Python floor: a bare memoryview slice of the memory-mapped shards per random row.
    import bisect

    chunks = []
    for path in arrow_files:
        source = pa.memory_map(path)
        chunks.extend(pa.ipc.open_file(source).read_all().column("image").chunks)
    starts = np.cumsum([0] + [len(c) for c in chunks]).tolist()
    views = [(np.frombuffer(c.buffers()[1], np.int32).tolist(), memoryview(c.buffers()[2])) for c in chunks]

    def floor():
        for i in singles:
            b = bisect.bisect_right(starts, i) - 1
            offsets, data = views[b]
            k = i - starts[b]
            data[offsets[k]:offsets[k + 1]].tobytes()

    def floor_batches():
        for batch in batches:
            for i in batch:
                b = bisect.bisect_right(starts, i) - 1
                offsets, data = views[b]
                k = i - starts[b]
                data[offsets[k]:offsets[k + 1]].tobytes()

    t_floor = best_of(floor)
    t_floor_batches = best_of(floor_batches)
    results.append(("Python floor: memoryview slice of the mmap, random rows", t_floor / len(singles) * 1e6,
                    float("nan"), "µs/row"))
    results.append(("Python floor: the same for the 256-index batches above", t_floor_batches / len(batches) * 1e3,
                    float("nan"), "ms/batch"))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--child")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.workdir, args.rows)))
        return

    workdir = Path(tempfile.mkdtemp(prefix="bench-arrow-hf-", dir=os.environ.get("BENCH_DIR")))
    try:
        b_ours = run_child("build_ours", workdir, args.rows)
        b_hf = run_child("build_hf", workdir, args.rows)
        r_ours = run_child("reopen_ours", workdir, args.rows)
        r_hf = run_child("reopen_hf", workdir, args.rows)

        import datasets
        from loguru import logger

        import stable_datasets as sds

        logger.disable("stable_datasets")
        datasets.disable_progress_bars()
        ours = sds.open_cache(b_ours["dir"]).with_format("python", decode=False)
        hf = datasets.Dataset.from_file(b_hf["files"][0]) if len(b_hf["files"]) == 1 else \
            datasets.concatenate_datasets([datasets.Dataset.from_file(f) for f in b_hf["files"]])
        hf = hf.cast_column("image", datasets.Image(decode=False))
        reads = measure_reads(ours, hf, args.rows, [f["filename"] for f in ours.cache_files])
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    rows = [("build (encode + write) from the generator", b_ours["seconds"], b_hf["seconds"], "s"),
            ("build peak RSS", b_ours["peak_rss_mb"], b_hf["peak_rss_mb"], "MiB"),
            ("reopen the built cache in a fresh process", r_ours["seconds"] * 1e3, r_hf["seconds"] * 1e3, "ms"),
            *reads]
    print(f"\n{args.rows:,} rows of ~{np.mean([len(b) for b in image_pool()]) / 1024:.1f} KB PNG + int label; "
          f"datasets {datasets.__version__}, stable-datasets {sds.__version__}, {os.cpu_count()} cores\n")
    table = [(name, f"{ours_v:,.3g}", "" if hf_v != hf_v else f"{hf_v:,.3g}", unit,
              "" if hf_v != hf_v else f"{hf_v / ours_v:.1f}x") for name, ours_v, hf_v, unit in rows]
    print_table(["measure", "stable-datasets", "datasets", "unit", "speedup"], table, right=(1, 2, 4))


if __name__ == "__main__":
    main()
