"""Lanes: how 2 ranks x 2 DataLoader workers split a file stream's parsing, and 2 nodes a remote stream's shards.

    python benchmarks/bench_lanes.py --files 40 --rows-per-file 5000 --rows 20000 --blob 2000

1. File stream (issue 23): `--files` JSON Lines files (bench_file_stream.write_files: digits and text),
   `load_dataset("json", data_files=..., streaming=True)`, shuffled (`buffer_size=1000`), read by 2 rank
   processes started together (`rank=`, `world_size=2`), each through `StreamingDataLoader(batch_size=256,
   num_workers=2)`. Counted per epoch: the units parsed and the rows in them (a wrapper around
   `file_stream.read_unit` logs each parse to a file, from every worker process), and rows/s (rows served
   over the slower rank's wall time). Row stripes (`lanes=False`, the order before lanes) vs lanes.
   Also the time to open the stream (count the rows) the first time on a node, and again (another rank or
   a restart: the counts file), for the JSON Lines files (a numpy pass over the lines) and for the same rows
   as quoted CSV (`id`, `label`, `text`, every value quoted: counting parses them). And counting the
   samples of 20 WebDataset tars (a PNG, a json and a txt member per sample): by decoding every member
   (before) vs from the member headers (now), best of 3.
2. Remote cache stream (issue 28, shard affinity): `--rows` rows of `--blob` random bytes published to a moto
   S3 server on 127.0.0.1 (its own process), streamed by 2 simulated nodes (rank 0 and 1 of 2, each its own
   empty local shard cache), shuffled with `window_shards=2`. Bytes each node downloads in one epoch (the
   shard files in its local cache after the epoch; no cache limit), row stripes vs lanes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table, quiet, work_dir


def rank_main(args: argparse.Namespace) -> None:
    """One rank: read one shuffled epoch of the file stream through 2 workers; print rows and seconds."""
    quiet()
    import stable_datasets as sds
    from stable_datasets.loaders import file_stream
    from stable_datasets.streaming import StreamingDataLoader

    real = file_stream.read_unit
    log = args.log

    def logged(loader, unit, schema):  # forked workers inherit it
        table = real(loader, unit, schema)
        with open(log, "a") as fh:
            fh.write(f"{table.num_rows}\n")
        return table

    file_stream.read_unit = logged
    paths = json.loads(Path(args.paths).read_text())
    started = time.perf_counter()
    opened = sds.load_dataset("json", data_files=paths, split="train", streaming=True)
    stream = opened.dataset.to_iterable(window_shards=file_stream.WINDOW_UNITS, lanes=args.lanes == "on",
                                        rank=args.rank, world_size=2).shuffle(seed=0, buffer_size=1000)
    rows = sum(StreamingDataLoader(stream, batch_size=256, num_workers=2, collate_fn=len))
    print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started}))


def open_main(args: argparse.Namespace) -> None:
    """Time opening the file stream (counting its rows), after an untimed open of its first file (imports)."""
    quiet()
    import stable_datasets as sds

    paths = json.loads(Path(args.paths).read_text())
    loader = "csv" if paths[0].endswith(".csv") else "json"
    sds.load_dataset(loader, data_files=paths[:1], split="train", streaming=True)
    started = time.perf_counter()
    sds.load_dataset(loader, data_files=paths, split="train", streaming=True)
    print(time.perf_counter() - started)


def quoted_csv(paths: list[str]) -> list[str]:
    """The same rows as CSV with every value quoted: counting them needs a parse (a value may hold a line break)."""
    import csv

    out = []
    for path in paths:
        target = path.replace(".jsonl", ".csv")
        with open(path) as source, open(target, "w", newline="") as fh:
            writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
            writer.writerow(["id", "label", "text"])
            for line in source:
                row = json.loads(line)
                writer.writerow([row["id"], row["label"], row["text"]])
        out.append(target)
    return out


def open_times(listed: Path, env: dict, node: Path, rounds: int = 3) -> list[float]:
    """Seconds to open the stream the first time on a node (rows counted), then again (the counts known): the
    best of `rounds`, each on a fresh node folder."""
    cold, warm = [], []
    for round_ in range(rounds):
        for times in (cold, warm):
            command = [sys.executable, __file__, "--open", "--paths", str(listed)]
            out = subprocess.run(command, env={**env, "STABLE_DATASETS_LOCAL_CACHE_DIR": f"{node}-{round_}"},
                                 capture_output=True, text=True, check=True)
            times.append(float(out.stdout.split()[-1]))
    return [min(cold), min(warm)]


def tar_count(folder: Path, files: int, per_file: int) -> tuple:
    """Counting the samples of WebDataset tars (a PNG digit, a json and a txt member each) when the stream opens:
    before, by decoding every member (`examples_of_piece`, what `count_rows` did); now from the member headers."""
    import io
    import tarfile

    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    import stable_datasets as sds
    from stable_datasets.loaders.webdataset_files import count_samples

    digits = load_digits()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = folder / f"shard-{f:04d}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(per_file):
                n = f * per_file + i
                png = io.BytesIO()
                Image.fromarray((digits.images[n % len(digits.images)] * 15).astype(np.uint8)).save(png, "PNG")
                for name, data in ((f"{n:08d}.png", png.getvalue()), (f"{n:08d}.json", json.dumps({"id": n}).encode()),
                                   (f"{n:08d}.txt", f"digit {digits.target[n % len(digits.target)]}".encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(str(path))
    loader = sds.load_builder("webdataset", data_files=paths)
    loader.features  # noqa: B018  (inferred untimed)
    best = {}
    for name, count in (("decode", lambda p: sum(1 for _ in loader.examples_of_piece([p, None, None]))),
                        ("headers", count_samples)):
        times = []
        for _ in range(3):
            started = time.perf_counter()
            assert sum(count(p) for p in paths) == files * per_file
            times.append(time.perf_counter() - started)
        best[name] = min(times)
    size = sum(Path(p).stat().st_size for p in paths) / 2**20
    return (f"count {files} WebDataset tars ({files * per_file:,} samples, {size:.0f} MiB): decode / headers",
            f"{best['decode'] * 1000:.0f} ms", f"{best['headers'] * 1000:.0f} ms",
            f"{best['decode'] / best['headers']:.1f}x")


def file_split(folder: Path, files: int, per_file: int) -> list[tuple]:
    from bench_file_stream import write_files

    paths = write_files(folder / "data", files, per_file)
    listed = folder / "paths.json"
    listed.write_text(json.dumps(paths))
    size = sum(Path(p).stat().st_size for p in paths)
    env = {**os.environ, "STABLE_DATASETS_LOCAL_CACHE_DIR": str(folder / "node")}
    opens = open_times(listed, env, folder / "open-node")
    csv_listed = folder / "csv-paths.json"
    csv_listed.write_text(json.dumps(quoted_csv(paths)))
    csv_opens = open_times(csv_listed, env, folder / "csv-node")
    results = {}
    for lanes in ("off", "on"):
        log = folder / f"parsed-{lanes}.log"
        log.write_text("")
        ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--lanes", lanes, "--paths",
                                   str(listed), "--log", str(log)], env=env, stdout=subprocess.PIPE, text=True)
                 for r in range(2)]
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in ranks]
        assert all(p.returncode == 0 for p in ranks)
        parsed = [int(x) for x in log.read_text().split()]
        served = sum(o["rows"] for o in outs)
        assert served == files * per_file, served
        results[lanes] = (len(parsed), sum(parsed), served / max(o["seconds"] for o in outs))
    total = files * per_file
    print(f"{files} JSON Lines files x {per_file} rows ({size / 2**20:.0f} MiB), {total:,} rows, "
          f"2 ranks x 2 workers, shuffled (buffer 1000)")
    off, on = results["off"], results["on"]
    return [
        ("units parsed per epoch", f"{off[0]:,}", f"{on[0]:,}", f"{off[0] / on[0]:.2f}x fewer"),
        ("rows parsed per epoch", f"{off[1]:,} ({off[1] / total:.2f} per row)",
         f"{on[1]:,} ({on[1] / total:.2f} per row)", f"{off[1] / on[1]:.2f}x fewer"),
        ("rows/s (2 ranks together)", f"{off[2]:,.0f}", f"{on[2]:,.0f}", f"{on[2] / off[2]:.2f}x"),
        ("open JSON Lines: count rows, first on the node / known", f"{opens[0] * 1000:.0f} ms",
         f"{opens[1] * 1000:.0f} ms", f"{opens[0] / opens[1]:.2f}x"),
        ("open quoted CSV (a parse): first on the node / known", f"{csv_opens[0] * 1000:.0f} ms",
         f"{csv_opens[1] * 1000:.0f} ms", f"{csv_opens[0] / csv_opens[1]:.2f}x"),
    ]


def remote_split(folder: Path, rows: int, blob: int) -> list[tuple]:
    from bench_streaming import BUCKET, StreamBench, start_s3

    import stable_datasets as sds

    server = start_s3(folder)
    if server is None:
        return []
    try:
        StreamBench.ROWS, StreamBench.BLOB = rows, blob
        os.environ["STABLE_DATASETS_LOCAL_CACHE_DIR"] = str(folder / "publisher")
        options = {"max_shard_size": max(rows * blob // 16, 1 << 16)}
        sds.load_dataset(StreamBench, split="train", cache_dir=f"s3://{BUCKET}/cache", layout_options=options)
        os.environ["STABLE_DATASETS_LOCAL_CACHE_LIMIT"] = str(1 << 40)
        results, shards = {}, 0
        for lanes in (False, True):
            per_node = []
            for node in range(2):
                local = folder / f"node-{node}-{lanes}"
                os.environ["STABLE_DATASETS_LOCAL_CACHE_DIR"] = str(local)
                opened = sds.load_dataset(StreamBench, split="train", streaming=True, layout_options=options,
                                          cache_dir=f"s3://{BUCKET}/cache")
                shards = len(opened.dataset.cache_metadata[0].shards)
                stream = opened.dataset.to_iterable(rank=node, world_size=2, lanes=lanes).shuffle(seed=0,
                                                                                                  window_shards=2)
                assert sum(1 for _ in stream) == rows // 2
                per_node.append(sum(p.stat().st_size for p in local.rglob("shard-*") if p.is_file()))
            results[lanes] = per_node
        published = rows * blob
        print(f"remote: {rows:,} rows x {blob} B ({published / 2**20:.0f} MiB) in {shards} shards on moto S3, "
              "2 nodes, shuffled (window_shards=2)")
        off, on = results[False], results[True]
        return [(f"MiB downloaded by node {n}", f"{off[n] / 2**20:.1f}", f"{on[n] / 2**20:.1f}",
                 f"{off[n] / on[n]:.2f}x fewer") for n in range(2)] + \
            [("MiB downloaded, both nodes", f"{sum(off) / 2**20:.1f}", f"{sum(on) / 2**20:.1f}",
              f"{sum(off) / sum(on):.2f}x fewer")]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--rows-per-file", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--blob", type=int, default=2000)
    parser.add_argument("--no-remote", action="store_true")
    parser.add_argument("--open", action="store_true")  # internal: time one open of the file stream
    parser.add_argument("--rank", type=int)  # internal: one rank process of the file split
    parser.add_argument("--lanes", choices=("on", "off"))
    parser.add_argument("--paths")
    parser.add_argument("--log")
    args = parser.parse_args()
    if args.open:
        open_main(args)
        return
    if args.rank is not None:
        rank_main(args)
        return
    quiet()
    folder = work_dir("bench-lanes-")
    import shutil

    try:
        rows = file_split(folder / "files", args.files, args.rows_per_file)
        rows.append(tar_count(folder / "tars", 20, 1000))
        if not args.no_remote:
            rows += remote_split(folder / "remote", args.rows, args.blob)
        print_table(["measure", "row stripes (before)", "lanes", "ratio"], rows, right=(1, 2, 3))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
