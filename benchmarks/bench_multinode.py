"""Builds and reads of an object-store cache on a real multi-node Ray cluster whose nodes share no disk.

One run, sides in turn, against an S3 server on 127.0.0.1 (moto) that counts the requests it
serves (LIST, GET, PUT, HEAD, DELETE, and COPY: a PUT naming a source object, which carries no
bytes) and the bytes put:

- build throughput of a generation-bound builder (benchmarks/bench_builders/digits_png.py)
  into an `s3://` root: one process, then Ray clusters of 1, 2 and 3 worker nodes (1 CPU each,
  a head without CPUs; every worker node in its own mount namespace, tests/ray_cluster.py);
  requests and bytes put per build, over the bytes of the published cache;
- requests of one open of the published cache (a cold local shard cache, then a warm one);
- `to_ray()` of a local cache with hundreds of shards, on a local 2-CPU Ray cluster: the read
  tasks Ray plans and the time to the first batch, with the row-range datasource's size estimate
  and without it (as before);
- the driver's side of a Ray build (`--driver-sizes`): `prepare()` of the split (no open after,
  which reads shards as any reader does) on 2 worker nodes, at each size: the requests the driver
  process made (told apart from the nodes' by the app id in its User-Agent, $AWS_SDK_UA_APP_ID),
  the bytes it downloaded per byte of cache, the peak bytes on its local disk (staging folder and
  local shard cache, sampled every 20 ms) per byte of cache, and the time.

- one large JSON Lines file on the store (`--jsonl-mb`): built in one part (the file read whole by one
  part on one node, as before) and in ranges (each part fetches its byte range on its own node), with
  the bytes each node and the driver GET (each worker node's S3 clients name it in their User-Agent,
  AWS_SDK_UA_APP_ID, which the counter keys its GET bytes by).

    sudo python benchmarks/bench_multinode.py --examples 3000 --to-ray-rows 30000
    sudo python benchmarks/bench_multinode.py --skip-builds --skip-to-ray --driver-sizes 2000 20000
    sudo python benchmarks/bench_multinode.py --skip-builds --skip-to-ray --driver-sizes 2000 20000 \
        --driver-format lance
    sudo python benchmarks/bench_multinode.py --only-jsonl --jsonl-mb 200

Needs root (the worker nodes' private mount namespaces) and the test extras (moto, ray).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
BUILDER = HERE / "bench_builders" / "digits_png.py"
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
       "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
       "AWS_CONFIG_FILE": "/nonexistent"}


DRIVER_APP = "bench-driver"  # the driver's S3 clients put "app/bench-driver" in their User-Agent; the nodes' do not


class Counting:
    """WSGI middleware in front of the S3 server: requests by kind, and the bytes of PUT bodies; apart, the
    requests of the driver process and the bytes of its GET answers."""

    def __init__(self, app: Any):
        self.app, self.lock = app, threading.Lock()
        self.counts, self.put_bytes, self.driver, self.driver_got = Counter(), 0, Counter(), 0

    def __call__(self, environ: dict, start_response: Any) -> Any:
        method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
        kind = {"PUT": "PUT", "HEAD": "HEAD", "DELETE": "DELETE"}.get(method)
        if method == "PUT" and "HTTP_X_AMZ_COPY_SOURCE" in environ:
            kind = "COPY"  # CopyObject (a PUT naming its source): no bytes travel
        if kind is None:
            kind = "DELETE" if method == "POST" and "delete" in query else (
                "LIST" if method == "GET" and ("list-type" in query or "prefix=" in query) else method)
        driver = f"app/{DRIVER_APP}" in environ.get("HTTP_USER_AGENT", "")
        with self.lock:
            self.counts[kind] += 1
            if method == "PUT":
                self.put_bytes += int(environ.get("CONTENT_LENGTH") or 0)
            if driver:
                self.driver[kind] += 1

        def started(status: str, headers: list, *args: Any) -> Any:
            if driver and kind == "GET":
                size = int(dict((k.lower(), v) for k, v in headers).get("content-length") or 0)
                with self.lock:
                    self.driver_got += size
            return start_response(status, headers, *args)

        return self.app(environ, started)

    def take(self) -> tuple[dict[str, int], int]:
        with self.lock:
            counts, put = dict(self.counts), self.put_bytes
            self.counts, self.put_bytes = Counter(), 0
        return counts, put

    def take_driver(self) -> tuple[dict[str, int], int]:
        """(the driver's requests by kind, the bytes it downloaded) since the last call."""
        with self.lock:
            counts, got = dict(self.driver), self.driver_got
            self.driver, self.driver_got = Counter(), 0
        return counts, got


def s3_server() -> tuple[str, Counting]:
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    counting = Counting(server._server.app)
    server._server.app = counting
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}", counting


def cache_bytes(ds: Any) -> int:
    meta = ds.cache_metadata[0]
    return sum(s.num_bytes for s in [*meta.shards, *meta.extra_files])


def build(examples: int, engine: str, num_proc: int | None) -> tuple[float, Any]:
    import stable_datasets as sds

    started = time.perf_counter()
    ds = sds.load_dataset(str(BUILDER), split="train", examples=examples, engine=engine, num_proc=num_proc,
                          download_mode="force_rebuild")
    return time.perf_counter() - started, ds


def row(side: str, seconds: float, examples: int, counts: dict[str, int], put: int, size: int,
        base: float | None) -> dict:
    return {"side": side, "seconds": round(seconds, 2), "examples_per_s": round(examples / seconds, 1),
            "vs_one_process": None if base is None else round(base / seconds, 2),
            "requests": counts, "put_bytes_per_cache_byte": round(put / size, 2)}


ROWS_BUILDER = """
import stable_datasets as sds

class Rows(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"i": sds.Value("int64"), "t": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"rows": ROWS})]

    def _generate_examples(self, rows):
        for i in range(rows):
            yield i, {"i": i, "t": f"row {i}"}
"""


def to_ray_side(rows: int, estimate: bool, work: Path) -> dict:
    import stable_datasets as sds
    from stable_datasets.dataset import ray_data

    script = work / "rows.py"
    script.write_text(ROWS_BUILDER.replace("ROWS", str(rows)))
    ds = sds.load_dataset(str(script), split="train", layout_options={"max_shard_size": 4096, "batch_rows": 100},
                          cache_dir=str(work / "local-cache"))
    view = ds.shuffle(seed=1)  # a shuffle always goes through the row-range datasource
    saved = ray_data.RowRanges.estimate_inmemory_data_size
    if not estimate:
        ray_data.RowRanges.estimate_inmemory_data_size = lambda self: None
    try:
        started = time.perf_counter()
        first = next(iter(view.to_ray().iter_batches(batch_size=256)))
        first_batch = time.perf_counter() - started
        blocks = view.to_ray().materialize().num_blocks()
    finally:
        ray_data.RowRanges.estimate_inmemory_data_size = saved
    assert len(first["i"]) == 256
    return {"side": f"to_ray, {'with' if estimate else 'without'} the size estimate", "rows": rows,
            "shards": len(ds.cache_metadata[0].shards), "read_tasks_planned": blocks,
            "first_batch_s": round(first_batch, 2)}


FEATURES_JSON = {"i": "int64", "text": "string"}


class GetBytesByNode:
    """WSGI middleware: the bytes of GET answers, by the app id in the asker's User-Agent (a worker node's S3
    clients carry $AWS_SDK_UA_APP_ID; anything else counts as the driver)."""

    def __init__(self, app: Any):
        self.app, self.lock, self.got = app, threading.Lock(), Counter()

    def __call__(self, environ: dict, start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] != "GET":
            return self.app(environ, start_response)
        agent = environ.get("HTTP_USER_AGENT", "")
        node = next((word[4:] for word in agent.split() if word.startswith("app/node-")), "driver")

        def counted(status: str, headers: list, *rest: Any) -> Any:
            length = next((int(v) for k, v in headers if k.lower() == "content-length" and v.isdigit()), 0)
            with self.lock:
                self.got[node] += length
            return start_response(status, headers, *rest)

        return self.app(environ, counted)


def large_jsonl_sides(megabytes: int, endpoint: str, counting: Counting, work: Path) -> list[dict]:
    """A JSONL file of `megabytes` on the store built by 2 worker nodes in one part, then in ranges."""
    import boto3
    import ray

    import stable_datasets as sds
    from stable_datasets.loaders import base as loaders_base
    from tests.ray_cluster import ray_cluster

    rows = megabytes * (1 << 20) // 100
    line = '{{"i": {i}, "text": "row {i} {pad}"}}\n'
    data = "".join(line.format(i=i, pad="x" * (60 + i % 17)) for i in range(rows)).encode()
    boto3.client("s3", region_name="us-east-1").put_object(Bucket="bench", Key="big/one.jsonl", Body=data)
    url = "s3://bench/big/one.jsonl"
    features = sds.Features({name: sds.Value(kind) for name, kind in FEATURES_JSON.items()})
    per_node = counting.app = GetBytesByNode(counting.app)
    out = []
    if ray.is_initialized():
        ray.shutdown()
    with ray_cluster(0, {**AWS, "AWS_ENDPOINT_URL": endpoint}) as cluster:
        cluster.add_worker({"AWS_SDK_UA_APP_ID": "node-A"})
        cluster.add_worker({"AWS_SDK_UA_APP_ID": "node-B"})
        cluster.wait_for_workers(2)
        floor = loaders_base.MIN_RANGE_BYTES
        for side, least in (("one part (the file whole)", 1 << 62), ("ranges (one per part)", floor)):
            loaders_base.MIN_RANGE_BYTES = least
            per_node.got.clear()
            started = time.perf_counter()
            try:  # prepare(): the build alone (an open after it would read the shards, as any reader does)
                built = sds.load_builder("json", data_files=url, features=features).prepare(
                    "train", engine="ray", download_mode="force_rebuild")["train"]
            finally:
                loaders_base.MIN_RANGE_BYTES = floor
            seconds = time.perf_counter() - started
            read = {h: round(b / 2**20, 1) for h, b in sorted(per_node.got.items())}
            meta = sds.open_cache(built).cache_metadata[0]
            assert meta.num_rows == rows
            nodes = meta.extra["part_nodes"]
            out.append({"side": f"{megabytes} MB JSONL, Ray 2 worker nodes, {side}", "seconds": round(seconds, 2),
                        "parts": len(nodes), "part_nodes": len(set(nodes)), "get_mb_by_host": read,
                        "file_mb": round(len(data) / 2**20, 1)})
            print(json.dumps(out[-1]), flush=True)
    return out


class DiskPeak:
    """The most bytes a folder held, sampled every 20 ms while it runs (the driver's local disk)."""

    def __init__(self, folder: Path):
        self.folder, self.peak, self._stop = folder, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _size(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.folder):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_size
        return total

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._size())
            time.sleep(0.02)

    def __enter__(self) -> DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._size())


def driver_side(examples: int, counting: Counting, local: Path, storage_format: str = "arrow") -> dict:
    """`prepare()` on the cluster this process is connected to: the driver's requests, bytes downloaded, peak disk
    and time (a fresh build each time: `force_rebuild`)."""
    import stable_datasets as sds

    builder = sds.load_builder(str(BUILDER), examples=examples)
    shutil.rmtree(local, ignore_errors=True)  # the shard cache an earlier open filled
    local.mkdir(parents=True)
    counting.take_driver()
    with DiskPeak(local) as disk:
        started = time.perf_counter()
        url = builder.prepare("train", storage_format, engine="ray", download_mode="force_rebuild")["train"]
        seconds = time.perf_counter() - started
    counts, got = counting.take_driver()
    meta = sds.open_cache(url).cache_metadata[0]
    size = sum(s.num_bytes for s in [*meta.shards, *meta.extra_files])
    counting.take_driver()  # the open above is a reader's, not the build's
    return {"side": f"driver of a Ray build, {examples} examples, {storage_format}", "cache_bytes": size,
            "parts": len(meta.extra["part_nodes"]), "seconds": round(seconds, 2), "driver_requests": counts,
            "driver_downloaded_bytes": got, "downloaded_per_cache_byte": round(got / size, 4),
            "driver_disk_peak_bytes": disk.peak, "disk_peak_per_cache_byte": round(disk.peak / size, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--nodes", type=int, nargs="*", default=[1, 2, 3])
    parser.add_argument("--to-ray-rows", type=int, default=30000)
    parser.add_argument("--skip-builds", action="store_true", help="only the to_ray() sides")
    parser.add_argument("--jsonl-mb", type=int, default=0, help="also: one JSONL file this large, in one part "
                        "and in ranges")
    parser.add_argument("--only-jsonl", action="store_true", help="only the large JSONL sides")
    parser.add_argument("--skip-to-ray", action="store_true", help="no to_ray() sides")
    parser.add_argument("--driver-sizes", type=int, nargs="*", default=[],
                        help="examples of each driver-side build (2 worker nodes)")
    parser.add_argument("--driver-format", default="arrow", choices=["arrow", "parquet", "lance"])
    args = parser.parse_args()

    from common import quiet

    quiet()
    import boto3
    import ray

    from tests.ray_cluster import ray_cluster

    endpoint, counting = s3_server()
    # under ~/.cache, which every worker node sees as its own empty tmpfs (tests/ray_cluster.py): as on separate
    # machines, the driver's disk holds only what the driver writes
    (Path.home() / ".cache").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-multinode-", dir=Path.home() / ".cache"))
    os.environ.update({**AWS, "AWS_ENDPOINT_URL": endpoint, "STABLE_DATASETS_CACHE_DIR": "s3://bench/cache",
                       "STABLE_DATASETS_LOCAL_CACHE_DIR": str(work / "local"), "AWS_SDK_UA_APP_ID": DRIVER_APP})
    node_env = {**AWS, "AWS_ENDPOINT_URL": endpoint, "AWS_SDK_UA_APP_ID": "bench-node"}
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bench")
    results: list[dict] = []
    try:
        if args.jsonl_mb:
            results.extend(large_jsonl_sides(args.jsonl_mb, endpoint, counting, work))
        if args.only_jsonl:
            return
        counting.take()
        if args.skip_builds:
            args.nodes = []
        seconds, ds = build(args.examples, "process", None) if not args.skip_builds else (1.0, None)
        counts, put = counting.take()
        base = seconds
        if ds is not None:
            results.append(row("one process", seconds, args.examples, counts, put, cache_bytes(ds), None))
            print(json.dumps(results[-1]), flush=True)
        del ds
        for open_kind in ("cold", "warm") if not args.skip_builds else ():
            if open_kind == "cold":
                shutil.rmtree(work / "local", ignore_errors=True)
            import stable_datasets as sds

            counting.take()
            started = time.perf_counter()
            sds.load_dataset(str(BUILDER), split="train", examples=args.examples)
            opened = time.perf_counter() - started
            counts, _ = counting.take()
            results.append({"side": f"open, {open_kind} local shard cache", "seconds": round(opened, 2),
                            "requests": counts})
            print(json.dumps(results[-1]), flush=True)
        for nodes in args.nodes:
            with ray_cluster(nodes, node_env):
                counting.take()
                seconds, ds = build(args.examples, "ray", None)
                counts, put = counting.take()
                results.append(row(f"Ray, {nodes} worker node(s)", seconds, args.examples, counts, put,
                                   cache_bytes(ds), base))
                results[-1]["part_nodes"] = len(set(ds.cache_metadata[0].extra["part_nodes"]))
                del ds
                print(json.dumps(results[-1]), flush=True)
            if ray.is_initialized():
                ray.shutdown()
        if args.driver_sizes:
            with ray_cluster(2, node_env):
                # a warm-up build first: each node's worker process starts cold once
                driver_side(min(args.driver_sizes), counting, work / "local", args.driver_format)
                for examples in args.driver_sizes:
                    results.append(driver_side(examples, counting, work / "local", args.driver_format))
                    print(json.dumps(results[-1]), flush=True)
            if ray.is_initialized():
                ray.shutdown()
        if args.skip_to_ray:
            return
        # to_ray of a local cache, on a local cluster as in the issue (a remote cache's row ranges are measured
        # by the builds above: each node fetches the files into its own shard cache)
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
        to_ray_side(args.to_ray_rows, True, work)  # warm-up: Ray's worker processes start once, for neither side
        for estimate in (False, True):
            results.append(to_ray_side(args.to_ray_rows, estimate, work))
            print(json.dumps(results[-1]), flush=True)
        ray.shutdown()
    finally:
        with contextlib.suppress(Exception):
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
