"""Interleaved documents: conversions, filtering and reading against their floors and peers.

    python benchmarks/bench_interleaved.py --docs 20000

Data: MINT-1T-style shards made offline (pydoc paragraphs and scikit-learn digits as PNGs,
some multi-frame TIFFs). Reported against:
- the raw read speed of the same tars with Python's `tarfile` (every member read), the
  floor a tar-based conversion cannot beat;
- filtering documents by a metadata field from tars, reading only the JSON members (the
  cheapest a tar scan can be);
- the `webdataset` library iterating the same shards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tests.fixtures: the MINT-style shard generator
from common import print_table, quiet, work_dir


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    args = parser.parse_args()
    quiet()
    import json

    import webdataset as wds

    from stable_datasets.interleaved import (
        InterleavedParquetReader,
        InterleavedParquetWriter,
        InterleavedWebdatasetReader,
        InterleavedWebdatasetWriter,
    )
    from tests.fixtures.mint_shards import write_mint_shards

    work = work_dir("bench-interleaved-")
    rows = []
    try:
        tars = write_mint_shards(work / "tars", num_samples=args.docs, samples_per_shard=1000)
        megabytes = sum(p.stat().st_size for p in tars) / 1e6

        def raw_read():
            for path in tars:
                with tarfile.open(path) as tar:
                    for member in tar:
                        if member.isfile():
                            tar.extractfile(member).read()

        t_floor, _ = timed(raw_read)
        rows.append(("raw tar read with `tarfile` (the floor)", f"{megabytes / t_floor:,.0f} MB/s", "1.00"))

        def to_parquet():
            with InterleavedParquetWriter(work / "pq") as writer:
                for batch in InterleavedWebdatasetReader(tars, materialize_on_read=True):
                    writer.write(batch)

        t_tp, _ = timed(to_parquet)
        rows.append(("tar -> Parquet (read, materialize, write zstd)", f"{megabytes / t_tp:,.0f} MB/s",
                     f"{t_floor / t_tp:.2f} of the floor"))

        def to_tar():
            with InterleavedWebdatasetWriter(work / "tars2") as writer:
                for batch in InterleavedParquetReader(work / "pq"):
                    writer.write(batch)

        t_pt, _ = timed(to_tar)
        rows.append(("Parquet -> tar", f"{megabytes / t_pt:,.0f} MB/s", f"{t_floor / t_pt:.2f} of the floor"))

        def filter_parquet():
            table = pq.read_table(work / "pq", columns=["sample_id", "modality", "score"],
                                  filters=[("modality", "=", "metadata")])
            keep = pc.greater(pc.cast(table.column("score"), "double"), 0.9)
            return set(table.filter(keep).column("sample_id").to_pylist())

        def filter_tars():
            keep = set()
            for path in tars:
                with tarfile.open(path) as tar:
                    for member in tar:
                        if member.name.endswith(".json"):
                            record = json.loads(tar.extractfile(member).read())
                            if record["score"] > 0.9:
                                keep.add(member.name[:-5])
            return keep

        t_fp, kept_p = timed(filter_parquet)
        t_ft, kept_t = timed(filter_tars)
        assert kept_p == kept_t, "both filters must select the same documents"
        rows.append(("filter documents by `score > 0.9`: Parquet (projected columns) vs tars (JSON members only)",
                     f"{t_fp * 1e3:,.0f} ms vs {t_ft * 1e3:,.0f} ms ({len(kept_p)} documents)",
                     f"{t_ft / t_fp:.1f}x faster"))

        def ours():
            return sum(b.num_items for b in InterleavedWebdatasetReader(tars, materialize_on_read=True))

        def theirs():
            return sum(1 for _ in wds.WebDataset([str(p) for p in tars], shardshuffle=False))

        t_ours, n_ours = timed(ours)
        t_theirs, n_theirs = timed(theirs)
        assert n_ours == n_theirs == args.docs
        rows.append(("read every document (image bytes included): ours vs the `webdataset` library",
                     f"{n_ours / t_ours:,.0f} vs {n_theirs / t_theirs:,.0f} docs/s",
                     f"{(n_ours / t_ours) / (n_theirs / t_theirs):.2f}x"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.docs:,} documents in {len(tars)} shards, {megabytes:,.1f} MB of tars; {os.cpu_count()} cores\n")
    print_table(["measure", "result", "ratio"], rows)


if __name__ == "__main__":
    main()
