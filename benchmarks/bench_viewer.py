"""The viewer on a large cache: a page of rows at any offset, and the bounded statistics pass.

Side by side with Hugging Face `datasets` slicing the same rows out of the same table (what a
notebook user does to look at rows 10,000,000-10,000,019). Run:

    .venv/bin/python benchmarks/bench_viewer.py [--rows 20000000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.common import best_of_each, quiet


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000_000)
    n = parser.parse_args().rows
    quiet()
    import datasets

    import stable_datasets as sds
    from stable_datasets.viewer import serve_in_thread

    work = Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    try:
        table = pa.table({"x": np.arange(n), "y": np.random.default_rng(0).random(n)})
        ours = sds.StableDataset.from_arrow(table, cache_dir=work / "cache")
        hf = datasets.Dataset(table)
        server, url = serve_in_thread(work / "cache")
        cache = json.load(urllib.request.urlopen(url + "/api/caches"))[0]["id"]
        print(f"{n:,} rows; best of 5, ms")
        print("offset      | viewer page (HTTP + JSON) | ours ds[a:a+20] | HF ds[a:a+20] | HF / ours")
        for offset in (0, n // 2, n - 20):
            page = f"{url}/api/caches/{cache}/rows?offset={offset}&limit=20"
            view, mine, theirs = best_of_each([lambda p=page: urllib.request.urlopen(p).read(),
                                               lambda o=offset: ours[o:o + 20], lambda o=offset: hf[o:o + 20]])
            print(f"{offset:>11,} | {view * 1e3:25.2f} | {mine * 1e3:15.3f} | {theirs * 1e3:13.3f} | "
                  f"{theirs / mine:9.1f}")
        started = time.perf_counter()
        stats = json.load(urllib.request.urlopen(f"{url}/api/caches/{cache}/stats"))
        print(f"stats: a sample of {stats['sample_size']:,} rows in {time.perf_counter() - started:.2f} s "
              f"(kept: the next request reads them back)")
        server.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
