"""The floor under a cold CSV / Parquet build: each piece of the work timed alone, beside both whole builds.

    python benchmarks/bench_loader_floor.py --rows 100000 --rounds 5

Issue 11 asks for cold builds 2x faster than Hugging Face `datasets`. This measures what the
build cannot avoid on this machine, on the same files as bench_loaders.py: parsing (pyarrow,
and pandas as `datasets` uses for CSV), writing the Arrow shard, its sha256 (recorded in
`_metadata.json`), and its fsync before the publishing rename (DESIGN.md: "local: fsync + one
rename"). A build needs at least its CPU work spread over the cores, and at least the disk time
of the shard's bytes; the table puts that floor beside half of Hugging Face's time (the target).
Each piece and each build: best of `--rounds`, wall seconds and CPU seconds (all threads).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loaders import write_tabular
from common import print_table, quiet


def best(fn, rounds: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `rounds` calls."""
    runs = []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(runs)


def shard_pieces(table, folder: Path, rounds: int) -> dict[str, tuple[float, float]]:
    """Arrow IPC write of the table to the page cache, fsync of that file, sha256 of its bytes."""
    import pyarrow as pa

    path = folder / "shard.arrow"
    writes, syncs = [], []
    for _ in range(rounds):
        path.unlink(missing_ok=True)
        wall, cpu = time.perf_counter(), time.process_time()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        writes.append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        syncs.append((time.perf_counter() - wall, time.process_time() - cpu))
    data = path.read_bytes()
    return {"Arrow IPC write of the shard": min(writes), "fsync of the shard": min(syncs),
            "sha256 of the shard": best(lambda: hashlib.sha256(data).digest(), rounds),
            "_size": (len(data), 0.0)}


def build(library: str, loader: str, path: str, cache: Path) -> None:
    if library == "ours":
        from stable_datasets import load_dataset

        load_dataset(loader, data_files=path, split="train", cache_dir=str(cache))
    else:
        import datasets

        datasets.load_dataset(loader, data_files=path, split="train", cache_dir=str(cache))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    quiet()
    import pandas as pd
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="loader-floor-") as tmp:
        root = Path(tmp)
        inputs = write_tabular(root, args.rows)
        caches = iter(range(10 ** 6))

        def whole(library: str, loader: str) -> tuple[float, float]:
            return best(lambda: build(library, loader, inputs[loader], root / f"cache-{next(caches)}"), args.rounds)

        table = pacsv.read_csv(inputs["csv"])
        pieces = shard_pieces(table, root, args.rounds)
        size = pieces.pop("_size")[0]
        rows, floors = [], {}
        for loader, parse_pieces in (
            ("csv", {"pyarrow read_csv (threads)": lambda: pacsv.read_csv(inputs["csv"]),
                     "pandas read_csv (what datasets uses)": lambda: pd.read_csv(inputs["csv"])}),
            ("parquet", {"pyarrow Parquet decode (threads)": lambda: pq.read_table(inputs["parquet"])}),
        ):
            measured = {name: best(fn, args.rounds) for name, fn in parse_pieces.items()}
            parse = next(iter(measured.values()))
            cpu = parse[1] + sum(pieces[k][1] for k in ("Arrow IPC write of the shard", "sha256 of the shard"))
            ours, theirs = whole("ours", loader), whole("datasets", loader)
            floors[loader] = (max(cpu / 2, pieces["fsync of the shard"][0]), theirs[0] / 2, ours[0], theirs[0])
            for name, (wall, cpu_s) in {**measured, **pieces, f"whole build, ours ({loader})": ours,
                                        f"whole build, datasets ({loader})": theirs}.items():
                rows.append([loader, name, f"{wall:.3f}", f"{cpu_s:.3f}"])
        print(f"{args.rows:,} rows; CSV {os.path.getsize(inputs['csv']) / 1e6:.0f} MB, Parquet "
              f"{os.path.getsize(inputs['parquet']) / 1e6:.0f} MB, shard {size / 1e6:.0f} MB; "
              f"best of {args.rounds}; load {os.getloadavg()[0]:.1f}")
        print_table(["input", "piece", "wall s", "CPU s"], rows)
        print_table(["input", "floor s: max(CPU of parse+write+sha256 / 2 cores, fsync)", "2x target s",
                     "ours s", "datasets s"],
                    [[k, f"{f:.3f}", f"{t:.3f}", f"{o:.3f}", f"{h:.3f}"] for k, (f, t, o, h) in floors.items()])


if __name__ == "__main__":
    main()
