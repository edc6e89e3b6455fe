"""What validating Arrow shards on first open costs, and that `ds[i]` is no slower for it (issue 14).

    python benchmarks/bench_shard_validation.py --gb 0.5 --rounds 8 --rows 50000

Builds one Arrow cache of about `--gb` GiB (rows of a 2-4 KB binary blob standing for an
encoded image, a 20-80 word UTF-8 caption, 50-300 int32 tokens and a label: the caption is the
costly part, every byte of it is checked as UTF-8). Then, in one run:

- open: a fresh `open_cache` + first map of every shard, with validation (the default) and
  without it (`arrow_shards.VALIDATE_ON_OPEN = False`, the code path before validation), in
  turns, best of `--repeats` each; the difference per GiB is the one-time cost. The sha256 of
  the same files is the other way to trust them on open, for comparison.
- `ds[i]`: one dataset opened each way, the same `--rows` random indices read one by one
  through each, in `--rounds` rounds ordered A B B A ... so a change in the machine's load hits
  both sides alike; the median and range of each side's per-row time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pyarrow as pa
from common import best_of, best_of_each, print_table, quiet, work_dir

import stable_datasets as sds
from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.layouts import arrow_shards

SHARD_BYTES = 512 << 20
BATCH_ROWS = 1000


def build_cache(root: Path, gigabytes: float) -> tuple[int, float]:
    """An Arrow cache of about `gigabytes` GiB under `root`; (rows, GiB written)."""
    features = sds.Features({"image": sds.Value("binary"), "caption": sds.Value("string"),
                             "tokens": sds.Sequence(sds.Value("int32")), "label": sds.Value("int64")})
    rng = np.random.default_rng(0)
    words = np.array(["the", "a", "photo", "of", "über", "naïve", "café", "dog", "on", "grass", "日本"])
    target = int(gigabytes * (1 << 30))
    shards, rows, written = [], 0, 0
    while written < target:
        path = root / f"shard-{len(shards):05d}.arrow"
        shard_rows = 0
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, features.arrow_schema) as writer:
            while sink.tell() < SHARD_BYTES and written + sink.tell() < target:
                n = BATCH_ROWS
                images = [rng.bytes(int(k)) for k in rng.integers(2000, 4000, n)]
                captions = [" ".join(rng.choice(words, int(k))) for k in rng.integers(20, 80, n)]
                tokens = [np.arange(int(k), dtype=np.int32) for k in rng.integers(50, 300, n)]
                first = rows + shard_rows
                writer.write_batch(pa.RecordBatch.from_arrays(
                    [pa.array(images, pa.binary()), pa.array(captions), pa.array(tokens, pa.list_(pa.int32())),
                     pa.array(np.arange(first, first + n))], schema=features.arrow_schema))
                shard_rows += n
        size = path.stat().st_size
        shards.append(ShardInfo(path=path.name, num_rows=shard_rows, num_bytes=size, sha256=file_sha256(path)))
        rows, written = rows + shard_rows, written + size
    CacheMetadata(layout="arrow_shards", features=features.to_dict(), num_rows=rows, shards=shards,
                  fingerprint="bench", split="train").write(root)
    for shard in shards:  # warm the page cache: we measure validation, not the disk
        (root / shard.path).read_bytes()
    return rows, written / (1 << 30)


def opened(root: Path, validate: bool):
    """A dataset whose shards were mapped with or without validation."""
    arrow_shards.VALIDATE_ON_OPEN = validate
    try:
        ds = sds.open_cache(root)
        ds[0]  # maps (and, if asked, validates) every shard now
    finally:
        arrow_shards.VALIDATE_ON_OPEN = True
    return ds


def measure(gigabytes: float = 0.5, rounds: int = 8, rows_read: int = 50_000, repeats: int = 3) -> dict:
    root = work_dir("validate-")
    try:
        rows, gib = build_cache(root, gigabytes)
        open_plain, open_checked = best_of_each([lambda: opened(root, False), lambda: opened(root, True)], repeats)
        hashed = best_of(lambda: [hashlib.sha256((root / p.name).read_bytes()).digest()
                                  for p in sorted(root.glob("*.arrow"))], 1)
        sides = {False: opened(root, False), True: opened(root, True)}
        picks = np.random.default_rng(1).integers(0, rows, rows_read).tolist()
        per_row: dict[bool, list[float]] = {False: [], True: []}
        for rep in range(rounds):
            for validate in ((True, False) if rep % 2 else (False, True)):
                ds = sides[validate]
                started = time.perf_counter()
                for i in picks:
                    ds[i]
                per_row[validate].append((time.perf_counter() - started) / len(picks) * 1e6)
        assert sides[False][rows - 1] == sides[True][rows - 1]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"gib": round(gib, 3), "rows": rows, "open_ms_unvalidated": round(open_plain * 1e3, 1),
            "open_ms_validated": round(open_checked * 1e3, 1),
            "validation_ms_per_gib": round((open_checked - open_plain) * 1e3 / gib, 1),
            "sha256_ms_per_gib": round(hashed * 1e3 / gib, 1),
            "row_us_unvalidated": [round(t, 2) for t in per_row[False]],
            "row_us_validated": [round(t, 2) for t in per_row[True]],
            "load_average": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=0.5, help="size of the cache in GiB")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of ds[i] per side, in turns")
    parser.add_argument("--rows", type=int, default=50_000, help="random rows read per round")
    parser.add_argument("--repeats", type=int, default=3, help="opens per side (best is kept)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    quiet()
    result = measure(args.gb, args.rounds, args.rows, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    off, on = result["row_us_unvalidated"], result["row_us_validated"]
    paired = [b / a for a, b in zip(off, on)]
    print(f"{result['gib']} GiB, {result['rows']:,} rows; load average {result['load_average']:.1f}")
    print_table(["measure", "without validation", "with validation", "ratio"], [
        ("first open (all shards mapped)", f"{result['open_ms_unvalidated']} ms", f"{result['open_ms_validated']} ms",
         f"{result['open_ms_validated'] / result['open_ms_unvalidated']:.1f}x"),
        ("one-time validation cost", "", f"{result['validation_ms_per_gib']} ms per GiB", ""),
        ("sha256 of the same files (for comparison)", "", f"{result['sha256_ms_per_gib']} ms per GiB", ""),
        (f"`ds[i]` per row, median of {len(off)} rounds (min-max)",
         f"{statistics.median(off):.2f} µs ({min(off):.2f}-{max(off):.2f})",
         f"{statistics.median(on):.2f} µs ({min(on):.2f}-{max(on):.2f})",
         f"{statistics.median(on) / statistics.median(off):.3f}"),
        ("`ds[i]`, validated / unvalidated in each round (the two sides run back to back), median (min-max)",
         "", "", f"{statistics.median(paired):.3f} ({min(paired):.3f}-{max(paired):.3f})"),
    ], right=(1, 2, 3))


if __name__ == "__main__":
    main()
