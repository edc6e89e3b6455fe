"""Reads of a cache published to an S3 endpoint (moto on 127.0.0.1) vs the same cache on local disk.

- random access after warm-up: the remote cache read through the local shard cache (its shards
  downloaded and verified once) vs a local cache of the same rows; single rows and batches of
  256 (`__getitems__`, what a DataLoader asks for); sides in turns (A B, B A, ...), several rounds.
- cold open: open the remote cache on a "fresh node" (an empty local shard cache: download,
  verify, map) vs opening the local cache.
- Lance: random batches read in place from the store vs from local disk (for reference).

    python benchmarks/bench_object_storage.py --rows 200000 --rounds 5
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import print_table, quiet, work_dir  # noqa: E402

BUILDER = '''
import numpy as np
import stable_datasets as sds

class Rows(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "id": sds.Value("int64"), "text": sds.Value("string"), "label": sds.ClassLabel(num_classes=10),
            "vec": sds.Sequence(sds.Value("float32"))}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"n": ROWS})]

    def _generate_examples(self, n):
        rng = np.random.default_rng(0)
        for i in range(n):
            yield i, {"id": i, "text": f"row {i} " + "lorem ipsum " * int(rng.integers(1, 8)),
                      "label": i % 10, "vec": rng.random(16, dtype=np.float32)}
'''


def start_server() -> tuple[object, str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def summary(times: list[float]) -> str:
    return f"{statistics.median(times):.3f} ({min(times):.3f}-{max(times):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reads", type=int, default=20_000, help="random single-row reads per round")
    parser.add_argument("--batches", type=int, default=200, help="random 256-row batches per round")
    parser.add_argument("--lance-batches", type=int, default=5,
                        help="random 256-row batches per round for Lance read in place (each row is a ranged GET)")
    args = parser.parse_args()
    quiet()
    scratch = work_dir("bench-objstore-")
    server, endpoint = start_server()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=endpoint, AWS_EC2_METADATA_DISABLED="true",
                      STABLE_DATASETS_LOCAL_CACHE_DIR=str(scratch / "node-0"))
    import boto3

    import stable_datasets as sds

    boto3.client("s3").create_bucket(Bucket="bench-bucket")
    script = scratch / "rows.py"
    script.write_text(BUILDER.replace("ROWS", str(args.rows)))
    remote_root, local_root = "s3://bench-bucket/cache", str(scratch / "local-cache")

    results = []
    cold: dict[str, list[float]] = {"remote": [], "local": []}
    for storage_format in ("arrow", "lance"):
        started = time.perf_counter()
        remote = sds.load_dataset(str(script), split="train", storage_format=storage_format, cache_dir=remote_root)
        build_remote = time.perf_counter() - started
        started = time.perf_counter()
        local = sds.load_dataset(str(script), split="train", storage_format=storage_format, cache_dir=local_root)
        build_local = time.perf_counter() - started
        print(f"{storage_format}: built + published in {build_remote:.1f}s (local build {build_local:.1f}s), "
              f"{remote.cache_metadata[0].num_bytes / 2**20:.1f} MiB", file=sys.stderr)
        url = f"{remote_root}/{remote.cache_dirs[0].as_posix().split('/cache/', 1)[1].rsplit('/attempts/', 1)[0]}"
        rng = np.random.default_rng(1)
        singles = rng.integers(0, args.rows, args.reads).tolist()
        batches = [rng.integers(0, args.rows, 256).tolist() for _ in range(args.batches)]
        if storage_format == "arrow":
            sides = {"remote, local shard cache": (remote, args.batches), "local cache": (local, args.batches)}
        else:  # in place every row is a ranged GET: fewer batches; downloaded, the files are read as a local cache's
            os.environ["STABLE_DATASETS_REMOTE_LANCE"] = "download"
            downloaded = sds.open_cache(url)
            del os.environ["STABLE_DATASETS_REMOTE_LANCE"]
            sides = {"remote, read in place": (remote, args.lance_batches),
                     "remote, downloaded (STABLE_DATASETS_REMOTE_LANCE=download)": (downloaded, args.batches),
                     "local cache": (local, args.batches)}
        for ds, _ in sides.values():  # warm-up: handles open, pages in the page cache
            ds[0], ds.__getitems__(batches[0])
        single = {name: [] for name in sides}
        batched = {name: [] for name in sides}
        for round_number in range(args.rounds):
            order = list(sides.items())
            for name, (ds, count) in order if round_number % 2 == 0 else order[::-1]:  # A B, B A: none always first
                if storage_format == "arrow":
                    single[name].append(timed(lambda ds=ds, rows=singles: [ds[i] for i in rows]))
                batched[name].append(timed(lambda ds=ds, groups=batches[:count]: [ds.__getitems__(b) for b in groups]))
            if storage_format == "arrow":  # cold open on a fresh node: download + verify + map
                node = tempfile.mkdtemp(dir=scratch, prefix="node-")
                os.environ["STABLE_DATASETS_LOCAL_CACHE_DIR"] = node
                cold["remote"].append(timed(lambda url=url: sds.open_cache(url)[0]))
                cold["local"].append(timed(lambda path=local.cache_dirs[0]: sds.open_cache(path)[0]))
        reads = (("single rows", single, {name: args.reads for name in sides}),
                 ("batches of 256", batched, {name: count * 256 for name, (_, count) in sides.items()}))
        for kind, measured, rows_read in reads:
            if not measured["local cache"]:
                continue
            base = rows_read["local cache"] / statistics.median(measured["local cache"])
            for name, times in measured.items():
                rate = rows_read[name] / statistics.median(times)
                results.append((storage_format, kind, name, summary(times), f"{rate:,.0f}", f"{rate / base:.2f}x"))
    server.stop()
    load = os.getloadavg()
    print(f"\n{args.rows:,} rows, {args.rounds} rounds, median (range) seconds; load average {load[0]:.1f}\n")
    print_table(["layout", "reads", "side", "seconds", "rows/s", "vs local"], results, right=(3, 4, 5))
    print()
    print_table(["open on a fresh node", "seconds"],
                [("remote: download + verify + map", summary(cold["remote"])),
                 ("local cache", summary(cold["local"]))], right=(1,))


if __name__ == "__main__":
    main()
