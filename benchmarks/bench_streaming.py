"""Streaming reads: ours vs mosaicml-streaming (MDS) and litdata on the same rows, shuffle quality, resume.

    python benchmarks/bench_streaming.py                  # 50,000 rows of 2 KB, 3 rounds (a few minutes)
    python benchmarks/bench_streaming.py --rows 5000 --rounds 1    # smoke run
    python benchmarks/bench_streaming.py --rows 20000 --only '(S3)'   # only the sides read from the S3 server

The peers are pinned in the `bench` extra (mosaicml-streaming==0.13.0, litdata==0.2.76), but
installing that extra lets pip replace our numpy (both peers cap it) and pull a CUDA torch.
Install them the way this script was run instead:

    .venv/bin/pip install --no-deps mosaicml-streaming==0.13.0 litdata==0.2.76 \\
        lightning-utilities catalogue zstd xxhash python-snappy brotli cramjam boto3 botocore \\
        s3transfer jmespath obstore

(mosaicml-streaming imports `transformers` and `torchvision`, whose pins clash with our torch; `import_mds`
puts stand-in modules in their place inside this benchmark, as bench_peers.py does.)

What is measured, each side in turn, `--rounds` times, medians and ranges:

1. Iterating one epoch in this process (no DataLoader): rows/s and MB/s of payload (blob bytes +
   8 for the label), in storage order and shuffled. Ours: `StableDataset.to_iterable()` on the
   Arrow (default), Parquet and Lance layouts; MDS `StreamingDataset(local=...)`; litdata
   `StreamingDataset(dir)`. Each library writes the rows its own default way (shard sizes).
   Then each shuffled side through a torch DataLoader (2 workers, batches of 256, the same
   collate for all), each epoch timed in a fresh child process (imports untimed).
2. Shuffle quality: for each original neighbour pair (i, i+1), how far apart the epoch puts them,
   as a fraction of what a full permutation gives ((N+1)/3 on average); 1.0 is a full permutation,
   0 is storage order. Beside it, the rows each library reads together (our blocks, MDS shards,
   litdata chunks) and the rows its shuffle mixes at a time (its window / shuffle block).
3. Resume: for 1 and 2 ranks x 2 DataLoader workers, rows after `load_state_dict` equal the
   uninterrupted run.

With moto installed (`pip install 'moto[server]'`), the same rows are also read from an S3 server on
127.0.0.1 (moto in server mode, started here in its own process): ours published to `s3://bench/cache` and read with
`load_dataset(..., streaming=True)` (a shard at a time through the local shard cache), MDS with
`remote=`, litdata from its `s3://` folder. Every remote epoch starts with an empty local cache, so it
includes the downloads. The "(S3)" rows are compared with the peers' "(S3)" rows. `--no-remote` skips them.
Each DataLoader side also runs with `.batch(256)` for ours (batches built column-wise in the workers).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import stable_datasets as sds
from stable_datasets.streaming.source import row_source

BLOB_SEED = 1234
_blobs: dict[str, Any] = {}


def payload(rows: int, blob_bytes: int) -> bytes:
    key = f"{rows}:{blob_bytes}"
    if key not in _blobs:
        _blobs.clear()
        _blobs[key] = np.random.default_rng(BLOB_SEED).bytes(rows * blob_bytes)
    return _blobs[key]


def example(i: int, blob_bytes: int, data: bytes) -> dict[str, Any]:
    return {"idx": i, "blob": data[i * blob_bytes:(i + 1) * blob_bytes]}


class StreamBench(sds.GeneratorBasedBuilder):
    ROWS = 0
    BLOB = 0

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"idx": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"rows": self.ROWS, "blob": self.BLOB})]

    def _generate_examples(self, rows, blob):
        data = payload(rows, blob)
        for i in range(rows):
            yield i, example(i, blob, data)


# -- the peers ------------------------------------------------------------------------------------
def import_mds() -> Any:
    """mosaicml-streaming's core (`streaming.base`). Its package imports `transformers` and `torchvision`
    (isinstance checks, example datasets), whose pins clash with our torch: `bench_peers.import_streaming`
    puts modules of stand-in classes in their place, in this process only."""
    if "streaming.base" not in sys.modules:
        if importlib.util.find_spec("streaming") is None:
            raise ImportError("mosaicml-streaming is not installed (see this script's docstring)")
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_peers import import_streaming

        import_streaming()
    import streaming.base as base
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    return base


def write_mds(folder: Path, rows: int, blob: int) -> None:
    base = import_mds()
    data = payload(rows, blob)
    with base.MDSWriter(out=str(folder), columns={"idx": "int64", "blob": "bytes"}) as writer:
        for i in range(rows):
            writer.write(example(i, blob, data))


def _litdata_row(i: int) -> dict[str, Any]:
    data = payload(int(os.environ["BENCH_ROWS"]), int(os.environ["BENCH_BLOB"]))
    return example(i, int(os.environ["BENCH_BLOB"]), data)


def write_litdata(folder: Path, rows: int, blob: int) -> None:
    import litdata

    os.environ["BENCH_ROWS"], os.environ["BENCH_BLOB"] = str(rows), str(blob)
    litdata.optimize(fn=_litdata_row, inputs=list(range(rows)), output_dir=str(folder), chunk_bytes="64MB",
                     num_workers=1, verbose=False, start_method="fork")


def mds_dataset(folder: Path | None, shuffle: bool, seed: int = 0, **options: Any) -> Any:
    base = import_mds()
    if folder is not None:
        options["local"] = str(folder)
    return base.StreamingDataset(shuffle=shuffle, shuffle_seed=seed, batch_size=256, **options)


def litdata_dataset(folder: Path, shuffle: bool, seed: int = 0) -> Any:
    import litdata

    return litdata.StreamingDataset(str(folder), shuffle=shuffle, seed=seed)


# -- measures -------------------------------------------------------------------------------------
def epoch_ids(dataset: Any) -> np.ndarray:
    return np.fromiter((int(row["idx"]) for row in dataset), dtype=np.int64)


def cpu_seconds() -> float:
    """CPU time of this process's threads and of its reaped children (DataLoader workers)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed_epoch(make: Any) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, rows, payload bytes) of one epoch iterated in this process."""
    dataset = make()
    start, cpu = time.perf_counter(), cpu_seconds()
    rows = nbytes = 0
    for row in dataset:
        rows += 1
        nbytes += len(row["blob"]) + 8
    elapsed, used = time.perf_counter() - start, cpu_seconds() - cpu
    del dataset
    return elapsed, used, rows, nbytes


def timed_loader(make: Any, batch: int, workers: int) -> tuple[float, float, int]:
    """One epoch through a torch DataLoader with `workers` workers: (wall seconds, CPU seconds, rows)."""
    import torch

    from stable_datasets.streaming import StreamingDataLoader, StreamingDataset

    dataset = make()
    loader_class = StreamingDataLoader if isinstance(dataset, StreamingDataset) else torch.utils.data.DataLoader
    if isinstance(dataset, StreamingDataset) and dataset.batch_size is not None:  # .batch(): built in the workers
        loader = loader_class(dataset, batch_size=None, num_workers=workers)
    else:
        loader = loader_class(dataset, batch_size=batch, num_workers=workers, collate_fn=collate_rows)
    start, cpu = time.perf_counter(), cpu_seconds()
    rows = sum(len(b["idx"]) for b in loader)
    del loader
    return time.perf_counter() - start, cpu_seconds() - cpu, rows


def collate_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The same collate for every side: labels to an array, blobs kept as a list of bytes."""
    return {"idx": np.asarray([int(r["idx"]) for r in rows]), "blob": [r["blob"] for r in rows]}


def neighbour_spread(order: np.ndarray) -> float:
    """Mean |pos(i+1) - pos(i)| over original neighbours, divided by a full permutation's (N+1)/3."""
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    return float(np.abs(np.diff(position)).mean() / ((n + 1) / 3))


def resume_check(dataset: Any, world_size: int, workers: int = 2, batch: int = 64, stop_after: int = 5) -> bool:
    from stable_datasets.streaming import StreamingDataLoader

    exact = True
    for rank in range(world_size):
        def stream(rank: int = rank) -> Any:
            return dataset.to_iterable(rank=rank, world_size=world_size).shuffle(seed=7)

        full = [int(v) for b in StreamingDataLoader(stream(), batch_size=batch, num_workers=workers) for v in b["idx"]]
        first = stream()
        loader = StreamingDataLoader(first, batch_size=batch, num_workers=workers)
        head = []
        for step, b in enumerate(loader):
            head.extend(int(v) for v in b["idx"])
            if step + 1 == stop_after:
                break
        state = loader.state_dict()
        second = stream()
        second.load_state_dict(state)
        tail = [int(v) for b in StreamingDataLoader(second, batch_size=batch, num_workers=workers) for v in b["idx"]]
        exact &= head + tail == full and sorted(full) == sorted(set(full))
    return exact


def kind(side: str) -> str:
    where = " (S3)" if "(S3)" in side else ""
    return ("storage order" if "storage order" in side else "shuffle") + where + (" batch" if ".batch" in side else "")


def fmt_range(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def make_sides(work: Path, rows: int, blob: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(our datasets by layout, side name -> a function making that side's fresh dataset); builds what is missing."""
    StreamBench.ROWS, StreamBench.BLOB = rows, blob
    ours = {fmt: sds.load_dataset(StreamBench, split="train", storage_format=fmt, cache_dir=work / "ours")
            for fmt in ("arrow", "parquet", "lance")}
    sides: dict[str, Any] = {}
    for fmt, ds in ours.items():
        sides[f"ours {fmt}, storage order"] = lambda ds=ds: ds.to_iterable()
        sides[f"ours {fmt}, block shuffle"] = lambda ds=ds: ds.to_iterable().shuffle(seed=0)
        sides[f"ours {fmt}, block shuffle, .batch(256)"] = \
            lambda ds=ds: ds.with_format("numpy").to_iterable().shuffle(seed=0).batch(256)
    try:
        if not (work / "mds" / "index.json").exists():
            write_mds(work / "mds", rows, blob)
        sides["MDS, storage order"] = lambda: mds_dataset(work / "mds", False)
        sides["MDS, shuffle (py1e)"] = lambda: mds_dataset(work / "mds", True)
    except ImportError as exc:
        print(f"skipping MDS: {exc}")
    try:
        if not (work / "litdata" / "index.json").exists():
            write_litdata(work / "litdata", rows, blob)
        sides["litdata, storage order"] = lambda: litdata_dataset(work / "litdata", False)
        sides["litdata, shuffle"] = lambda: litdata_dataset(work / "litdata", True)
    except ImportError as exc:
        print(f"skipping litdata: {exc}")
    return ours, sides


# -- the S3 side ----------------------------------------------------------------------------------
BUCKET = "bench"


class S3ServerProcess:
    """moto in server mode in its own process, as a real endpoint would be: in a thread of this
    process it would share the GIL with the readers being timed."""

    def __init__(self) -> None:
        import socket
        import subprocess
        import time
        import urllib.request

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def start_s3(work: Path) -> Any:
    """A moto S3 server on 127.0.0.1 (its own process) with the AWS variables pointing at it (None
    without moto)."""
    try:
        import moto.server  # noqa: F401
    except ImportError:
        print("skipping the S3 side: moto is not installed (pip install 'moto[server]')")
        return None
    import boto3

    server = S3ServerProcess()
    endpoint = server.endpoint
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "S3_ENDPOINT_URL": endpoint,
                       "AWS_EC2_METADATA_DISABLED": "true"})
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    return server


def upload_folder(folder: Path, prefix: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(folder).as_posix()}")


def fresh_dir(work: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix="node-", dir=work / "nodes"))


def remote_sides(work: Path, rows: int, blob: int, sides: dict[str, Any]) -> dict[str, Any]:
    """Sides reading from the S3 server, each epoch from an empty local cache."""
    (work / "nodes").mkdir(exist_ok=True)
    remote: dict[str, Any] = {}
    for fmt in ("arrow", "parquet", "lance"):
        os.environ["STABLE_DATASETS_LOCAL_CACHE_DIR"] = str(fresh_dir(work))
        sds.load_dataset(StreamBench, split="train", storage_format=fmt, cache_dir=f"s3://{BUCKET}/cache")

        def ours(fmt: str = fmt, shuffle: bool = False) -> Any:
            os.environ["STABLE_DATASETS_LOCAL_CACHE_DIR"] = str(fresh_dir(work))
            stream = sds.load_dataset(StreamBench, split="train", storage_format=fmt, streaming=True,
                                      cache_dir=f"s3://{BUCKET}/cache")
            return stream.shuffle(seed=0) if shuffle else stream

        remote[f"ours {fmt} (S3), storage order"] = ours
        remote[f"ours {fmt} (S3), block shuffle"] = lambda ours=ours: ours(shuffle=True)
    if "MDS, storage order" in sides:
        upload_folder(work / "mds", "mds")
        remote["MDS (S3), storage order"] = lambda: mds_dataset(None, False, remote=f"s3://{BUCKET}/mds",
                                                                local=str(fresh_dir(work)))
        remote["MDS (S3), shuffle (py1e)"] = lambda: mds_dataset(None, True, remote=f"s3://{BUCKET}/mds",
                                                                 local=str(fresh_dir(work)))
    if "litdata, storage order" in sides:
        import litdata

        upload_folder(work / "litdata", "litdata")
        options = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
        with contextlib.suppress(ImportError, AttributeError, TypeError):  # its obstore path refuses http:// else
            from litdata.streaming import downloader

            downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = "true"
        for name, shuffle in (("litdata (S3), storage order", False), ("litdata (S3), shuffle", True)):
            remote[name] = lambda shuffle=shuffle: litdata.StreamingDataset(
                f"s3://{BUCKET}/litdata", shuffle=shuffle, seed=0, cache_dir=str(fresh_dir(work)),
                storage_options=options)
    return remote


def loader_side_in_child(work: Path, rows: int, blob: int, side: str) -> tuple[float, float]:
    """Seconds for one DataLoader epoch of `side`, timed in a fresh process: the parent has read every
    side in process, and a parent that opened Lance makes forked workers read through a helper process."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_streaming as b; "
            f"b.child_loader_epoch({str(work)!r}, {rows}, {blob}, {side!r})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("ELAPSED ")]
    if done.returncode or not lines:
        raise SystemExit(f"{side} through a DataLoader failed:\n{done.stderr[-3000:]}")
    return float(lines[-1].split()[1]), float(lines[-1].split()[2])


def child_loader_epoch(work: str, rows: int, blob: int, side: str) -> None:
    import torch  # noqa: F401

    with contextlib.suppress(ImportError):  # imports are untimed: lance (and the pandas it imports) takes ~0.5 s CPU
        import lance  # noqa: F401

    _, sides = make_sides(Path(work), rows, blob)
    elapsed, used, count = timed_loader(sides[side], 256, 2)
    if count != rows:
        raise SystemExit(f"{side} through a DataLoader served {count} rows, not {rows}")
    print(f"ELAPSED {elapsed} {used}")


def unit_rows(work: Path, library: str, rows: int) -> int:
    """Rows per shard (MDS) or chunk (litdata), from their index files."""
    index = json.loads((work / library / "index.json").read_text())
    units = index["shards"] if library == "mds" else index["chunks"]
    return rows // max(len(units), 1)


def ratio_cells(name: str, names: list[str], wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> list[str]:
    """Per peer: how many times its median wall time and CPU time ours is (>1: ours faster)."""
    cells = []
    for peer in ("MDS", "litdata"):
        wanted = kind(name).replace(" batch", "")
        match = next((p for p in names if p.startswith(peer) and kind(p) == wanted), None)
        if match is None or name.startswith(peer):
            cells.append("")
            continue
        ratios = [statistics.median(t[match]) / statistics.median(t[name]) for t in (wall, cpu)]
        cells.append(f"{ratios[0]:.2f}x / {ratios[1]:.2f}x")
    return cells


def print_table(title: str, names: list[str], rows: int, payload_bytes: int, wall: dict[str, list[float]],
                cpu: dict[str, list[float]]) -> None:
    print(f"\n| {title} | rows/s | MB/s | CPU s per epoch | vs MDS (wall / CPU) | vs litdata (wall / CPU) |")
    print("|---|---|---|---|---|---|")
    for name in names:
        rate = [rows / t for t in wall[name]]
        mb = [payload_bytes / t / 1e6 for t in wall[name]]
        used = statistics.median(cpu[name])
        print(f"| {name} | {fmt_range(rate)} | {fmt_range(mb)} | {used:.2f} | "
              + " | ".join(ratio_cells(name, names, wall, cpu)) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--blob-bytes", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-remote", action="store_true", help="skip the S3 (moto) side")
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="time only the sides whose names contain one of these (e.g. --only '(S3)'), and skip "
                             "the shuffle-quality and resume tables: a quick check of a few rows")
    args = parser.parse_args()
    import torch  # noqa: F401  (imported once up front: its first import takes seconds, in no side's timing)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    rows, blob = args.rows, args.blob_bytes
    print(f"# {rows:,} rows of {blob} distinct bytes + int64 label; load before: {os.getloadavg()}", flush=True)
    ours, sides = make_sides(work, rows, blob)
    loader_only = [name for name in sides if ".batch" in name]
    server = None if args.no_remote else start_s3(work)
    if server is not None:
        sides.update(remote_sides(work, rows, blob, sides))
    if args.only:
        sides = {name: make for name, make in sides.items() if any(text in name for text in args.only)}
        loader_only = [name for name in loader_only if name in sides]
    names = [name for name in sides if name not in loader_only]

    # 1. one epoch in this process, sides in turns
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    payload_bytes = 0
    for _ in range(args.rounds):
        for name in names:
            elapsed, used, count, payload_bytes = timed_epoch(sides[name])
            if count != rows:
                raise SystemExit(f"{name} served {count} rows, not {rows}")
            times[name].append(elapsed)
            cpu[name].append(used)
    print_table("one epoch in process", names, rows, payload_bytes, times, cpu)

    # 1b. shuffled epochs through a torch DataLoader (2 workers, batches of 256), each in a fresh process
    shuffled = [name for name in sides if kind(name) in ("shuffle", "shuffle batch")]
    loader_times: dict[str, list[float]] = {name: [] for name in shuffled}
    loader_cpu: dict[str, list[float]] = {name: [] for name in shuffled}
    for _ in range(args.rounds):
        for name in shuffled:
            elapsed, used = loader_side_in_child(work, rows, blob, name)
            loader_times[name].append(elapsed)
            loader_cpu[name].append(used)
    print_table("shuffled epoch, torch DataLoader, 2 workers, batch 256", shuffled, rows, payload_bytes,
                loader_times, loader_cpu)

    if args.only:
        print(f"\nload after: {os.getloadavg()}")
        if server is not None:
            server.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        return

    # 2. shuffle quality
    arrow = ours["arrow"]
    block = int(np.diff(row_source(arrow).block_bounds()).max())
    qualities: list[tuple[str, np.ndarray, str, str]] = [
        ("full permutation", np.random.default_rng(0).permutation(rows), "1", f"{rows:,} (all)")]
    for window in (2, 8, 32):
        qualities.append((f"ours, block shuffle, window_blocks={window}",
                          epoch_ids(arrow.to_iterable().shuffle(seed=0, window_blocks=window)),
                          f"{block:,} (record batch)", f"{window * block:,}"))
    if "MDS, storage order" in sides:
        shard = f"{unit_rows(work, 'mds', rows):,} (shard)"
        for algo in ("py1e", "py1br"):
            qualities.append((f"MDS {algo}, default shuffle_block_size",
                              epoch_ids(mds_dataset(work / "mds", True, shuffle_algo=algo)), shard, "262,144"))
            qualities.append((f"MDS {algo}, shuffle_block_size={8 * block}", epoch_ids(
                mds_dataset(work / "mds", True, shuffle_algo=algo, shuffle_block_size=8 * block)), shard,
                f"{8 * block:,}"))
    if "litdata, storage order" in sides:
        qualities.append(("litdata shuffle=True", epoch_ids(litdata_dataset(work / "litdata", True)),
                          f"{unit_rows(work, 'litdata', rows):,} (chunk)", "its chunks"))
    print("\n| shuffle | neighbour spread (1.0 = full permutation) | rows read together | shuffle window (rows) |")
    print("|---|---|---|---|")
    for name, order, unit, window in qualities:
        if sorted(order.tolist()) != list(range(rows)):
            raise SystemExit(f"{name}: the epoch is not a permutation of the rows")
        print(f"| {name} | {neighbour_spread(order):.3f} | {unit} | {window} |")

    # 3. resume
    print("\n| resume after 5 batches of 64, 2 DataLoader workers | rows after load_state_dict equal the "
          "uninterrupted run |")
    print("|---|---|")
    for world_size in (1, 2):
        for fmt in ("arrow", "parquet", "lance"):
            print(f"| {world_size} rank(s), {fmt} | {'exact' if resume_check(ours[fmt], world_size) else 'DIFFERS'} |",
                  flush=True)
    print(f"\nload after: {os.getloadavg()}")
    if server is not None:
        server.stop()
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
