"""Lance random reads: which file version, row-group size, encoding and take path is fastest.

    python benchmarks/bench_lance_take.py --rows 100000 --rounds 3

The rows of bench_peers.py (3 KB random blobs + int label) are written once per variant with
`lance.write_dataset`; then, in every round, each variant is read in turns (a, b, c, ...), and
the table gives the median and range over rounds of:

- one row by `dataset.take([i])` (µs),
- 256 random rows by `dataset.take` in the order asked (ms),
- the same rows deduplicated and sorted, through `fragment.take` per fragment, then put back in
  the asked order with one Arrow take (what `RowTaker` does) (ms),
- the 256 rows as Lance blob descriptions (position, size) only, for the blob-encoded variant:
  the bytes would then be read from the data file directly (ms),
- for the blob-encoded variant, the path `lance_rows` caches take now (layouts/lance/blobs.py):
  the descriptions read once at open (`open_ms`), then one row as a slice of the mapped data
  file (µs) and 256 rows as one Arrow take over it (ms), with the label column held in memory,
- a full scan (s).

Thread settings are read by Lance at start-up, so `--env LANCE_IO_THREADS=2` runs the whole
measurement in a child process with that environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_peers import blob  # noqa: E402
from common import print_table, work_dir  # noqa: E402

BLOB_META = {"lance-encoding:blob": "true"}
VARIANTS = {
    "file 2.0": {"data_storage_version": "2.0"},
    "file 2.1": {"data_storage_version": "2.1"},
    "file 2.2 (pylance default)": {},
    "2.2, 256 rows per group": {"max_rows_per_group": 256},
    "2.2, fragments of 16,384 rows": {"max_rows_per_file": 16384},
    "2.1, fullzip encoding": {"data_storage_version": "2.1", "meta": {"lance-encoding:structural-encoding": "fullzip"}},
    "2.1, blob encoding": {"data_storage_version": "2.1", "meta": BLOB_META},
}


def reader(rows: int, meta: dict[str, str] | None) -> pa.RecordBatchReader:
    blob_type = pa.large_binary() if meta and "lance-encoding:blob" in meta else pa.binary()
    schema = pa.schema([pa.field("blob", blob_type, metadata=meta), pa.field("label", pa.int64())])

    def batches():
        for lo in range(0, rows, 8192):
            hi = min(rows, lo + 8192)
            yield pa.record_batch([pa.array([blob(i) for i in range(lo, hi)], blob_type),
                                   pa.array(np.arange(lo, hi) % 1000, pa.int64())], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def sorted_fragment_take(dataset, fragments, starts: np.ndarray, rows: np.ndarray) -> pa.Table:
    distinct, order = np.unique(rows, return_inverse=True)
    bounds = np.searchsorted(distinct, starts)
    parts = [f.take(distinct[lo:hi] - s) for f, s, lo, hi in zip(fragments, starts, bounds, bounds[1:]) if hi > lo]
    table = pa.concat_tables(parts).combine_chunks()
    return table.take(pa.array(order))


def measure(path: str, rows: int, seed: int, singles: int, batches: int, blob_encoded: bool) -> dict[str, float]:
    import lance

    dataset = lance.dataset(path)
    fragments = dataset.get_fragments()
    starts = np.cumsum([0] + [f.count_rows() for f in fragments])
    rng = np.random.default_rng(seed)
    one = rng.integers(0, rows, singles)
    many = [rng.integers(0, rows, 256) for _ in range(batches)]
    dataset.take([0])
    out = {}
    started = time.perf_counter()
    for i in one:
        dataset.take([int(i)])
    out["take1_us"] = (time.perf_counter() - started) / singles * 1e6
    started = time.perf_counter()
    for b in many:
        dataset.take(b)
    out["take256_ms"] = (time.perf_counter() - started) / batches * 1e3
    started = time.perf_counter()
    for b in many:
        sorted_fragment_take(dataset, fragments, starts, b)
    out["fragment_sorted_ms"] = (time.perf_counter() - started) / batches * 1e3
    if blob_encoded:
        started = time.perf_counter()
        for b in many:
            dataset.take(b, columns=["blob"])  # struct<position, size>: the descriptions only
        out["descriptions_ms"] = (time.perf_counter() - started) / batches * 1e3
        out.update(measure_mapped(dataset, Path(path), one, many))
    started = time.perf_counter()
    sum(batch.num_rows for batch in dataset.to_batches(batch_size=1024))
    out["scan_s"] = time.perf_counter() - started
    return out


def measure_mapped(dataset, path: Path, one: np.ndarray, many: list[np.ndarray]) -> dict[str, float]:
    """Our blob path: descriptions once, then slices of the mapped data files (see lance_blobs)."""
    from stable_datasets.layouts.lance import blobs as lance_blobs

    started = time.perf_counter()
    layout, descriptions = lance_blobs.blob_descriptions(dataset, ["blob"])
    reader = lance_blobs.BlobReader(path, ["blob"], layout, descriptions, {}, None)
    labels = dataset.to_table(columns=["label"]).column("label").combine_chunks()
    out = {"mapped_open_ms": (time.perf_counter() - started) * 1e3}
    cell = reader.cell_getter("blob")
    label_values = labels.to_numpy()
    started = time.perf_counter()
    for i in one.tolist():
        (cell(i), int(label_values[i]))
    out["mapped1_us"] = (time.perf_counter() - started) / len(one) * 1e6
    started = time.perf_counter()
    for b in many:
        pa.Table.from_arrays([reader.take("blob", b), labels.take(pa.array(b))], names=["blob", "label"])
    out["mapped256_ms"] = (time.perf_counter() - started) / len(many) * 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--variants", default="", help="comma-separated names (default: all)")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for Lance's threads (re-runs)")
    args = parser.parse_args()
    if args.env:
        env = {**os.environ, **dict(item.split("=", 1) for item in args.env)}
        cmd = [sys.executable, __file__, "--rows", str(args.rows), "--rounds", str(args.rounds),
               "--singles", str(args.singles), "--batches", str(args.batches), "--variants", args.variants]
        print("environment:", " ".join(args.env))
        raise SystemExit(subprocess.run(cmd, env=env).returncode)
    import lance

    names = [n for n in args.variants.split(",") if n] or list(VARIANTS)
    work = work_dir("bench-lance-take-")
    try:
        for name in names:
            options = dict(VARIANTS[name])
            meta = options.pop("meta", None)
            lance.write_dataset(reader(args.rows, meta), str(work / f"{names.index(name)}.lance"), **options)
        results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
        for round_number in range(args.rounds):
            for name in names[round_number % len(names):] + names[:round_number % len(names)]:
                results[name].append(measure(str(work / f"{names.index(name)}.lance"), args.rows, round_number,
                                             args.singles, args.batches, VARIANTS[name].get("meta") == BLOB_META))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.rows:,} rows of 3 KB blobs + int label; pylance {lance.__version__}; {args.rounds} rounds "
          "in turns, "
          f"median (range); load average {os.getloadavg()[0]:.1f}; LANCE_CPU_THREADS="
          f"{os.environ.get('LANCE_CPU_THREADS', '-')} LANCE_IO_THREADS={os.environ.get('LANCE_IO_THREADS', '-')}\n")
    keys = [("take1_us", "take([i]) µs"), ("take256_ms", "take(256) ms"),
            ("fragment_sorted_ms", "sorted fragment take(256) ms"), ("descriptions_ms", "blob descriptions(256) ms"),
            ("mapped_open_ms", "mapped: open ms"), ("mapped1_us", "mapped: one row µs"),
            ("mapped256_ms", "mapped: 256 rows ms"), ("scan_s", "full scan s")]
    table = []
    for name in names:
        cells = []
        for key, _ in keys:
            values = [r[key] for r in results[name] if key in r]
            cells.append(f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})" if values else "")
        table.append((name, *cells))
    print_table(["variant", *(label for _, label in keys)], table, right=tuple(range(1, len(keys) + 1)))


if __name__ == "__main__":
    main()
