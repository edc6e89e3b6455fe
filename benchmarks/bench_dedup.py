"""Identical files stored once: a version bump that writes the same rows, ours beside Hugging Face.

    python benchmarks/bench_dedup.py --mb 64

A builder writes `--mb` MiB of rows (random bytes from a fixed seed); its VERSION is then
bumped and it is built again: a new fingerprint, the same rows. Reported: the bytes the two
caches list, the bytes they take on disk (each inode once), and each build's time (the second
one reads the stored copy back to check it before linking). Hugging Face `datasets` does the
same with `Dataset.from_generator` and a changed `gen_kwargs` version (`--no-hf` to skip).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table, quiet, work_dir

BUILDER = """
import numpy as np
import stable_datasets as sds

class Blobs(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("VERSION")

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"i": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        rng = np.random.default_rng(0)
        for i in range(ROWS):
            yield i, {"i": i, "blob": rng.bytes(65536)}
"""


def disk_bytes(folder: Path) -> tuple[int, int]:
    """(bytes of every file name, bytes of every distinct inode) under `folder`."""
    named, seen, unique = 0, set(), 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            info = os.lstat(os.path.join(dirpath, name))
            named += info.st_size
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                unique += info.st_size
    return named, unique


def ours(work: Path, rows: int) -> list[tuple]:
    import stable_datasets as sds

    script = work / "blobs.py"
    root = work / "ours"
    times = []
    for version in ("1.0.0", "1.0.1"):
        script.write_text(textwrap.dedent(BUILDER).replace("VERSION\")", f"{version}\")").replace("ROWS", str(rows)))
        started = time.perf_counter()
        sds.load_dataset(str(script), split="train", cache_dir=str(root))
        times.append(time.perf_counter() - started)
    listed = sum(sum(s.num_bytes for s in e.metadata.shards) for e in _caches(root))
    _named, unique = disk_bytes(root)
    return [("stable-datasets", listed, unique, times[0], times[1])]


def _caches(root: Path):
    from stable_datasets.cache.inventory import find_caches

    return find_caches(root)


def hf(work: Path, rows: int) -> list[tuple]:
    import datasets
    import numpy as np

    def generate(version):
        rng = np.random.default_rng(0)
        for i in range(rows):
            yield {"i": i, "blob": rng.bytes(65536)}

    root = work / "hf"
    times = []
    for version in ("1.0.0", "1.0.1"):
        started = time.perf_counter()
        datasets.Dataset.from_generator(generate, gen_kwargs={"version": version}, cache_dir=str(root))
        times.append(time.perf_counter() - started)
    _named, unique = disk_bytes(root)
    arrow = sum(p.stat().st_size for p in root.rglob("*.arrow"))
    return [(f"HF datasets {datasets.__version__}", arrow, unique, times[0], times[1])]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--no-hf", action="store_true")
    args = parser.parse_args()
    quiet()
    rows = args.mb * 16  # 64 KiB each
    work = work_dir("bench-dedup-")
    results = ours(work, rows)
    if not args.no_hf:
        results += hf(work, rows)
    print(f"{args.mb} MiB of rows, built twice (a version bump that writes the same rows)")
    print_table(["library", "bytes the caches list", "bytes on disk", "first build s", "second build s"],
                [(name, f"{listed:,}", f"{unique:,}", f"{t1:.2f}", f"{t2:.2f}")
                 for name, listed, unique, t1, t2 in results], right=(1, 2, 3, 4))


if __name__ == "__main__":
    main()
