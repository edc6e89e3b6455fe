"""What grows with rows, files and shards, measured on one machine (issue 28, parts 6 and 7).

    python benchmarks/bench_scale.py                       # all three sections (a few minutes)
    python benchmarks/bench_scale.py --only files          # many small files: batches and open cost
    python benchmarks/bench_scale.py --only keys --rows 1000000 10000000
    python benchmarks/bench_scale.py --only keys --check-only --key-ranges 2 --rows 10000000 100000000
    python benchmarks/bench_scale.py --only metadata --shards 1000 10000 100000 1000000 --open 1000 10000
    python benchmarks/bench_scale.py --only manifest --shards 10000 100000 1000000 --open 10000 100000
    python benchmarks/bench_scale.py --only lance --fragments 1000 4000

Every measurement runs in a fresh child process (imports untimed); memory is the child's peak RSS
above what it held after its imports (VmHWM, reset after the imports, minus VmRSS then).

files: N one-row CSV files loaded with the "csv" loader, written as before (one record batch per file:
`batch_rows=1` makes the join pass every one-row batch through, exactly the old write path) and as now
(batches joined up to `batch_rows`, 1,000). Record batches in the cache, build seconds, and the cost of
opening the cache in a new process (`open_cache` + the first and last row).

keys: the duplicate-key check over R synthetic keys ("file-<i>.jpg:0"): the worker side (a part's keys:
the dict the check held before, 65 B a row, vs `KeyLog`, which spills sorted runs past 512K keys and merges
them), and the driver side over 8 parts' key files (before: every digest concatenated and `np.unique`d;
now: `merge_sorted`, a record batch of each file at a time); and the check split by digest range (the same
keys cut into P range files per part, as parts write them): one driver merge vs the P range jobs run one after
the other in the driver vs in P forked processes (`find_duplicate_key` with `JobRunner(num_proc=P)`); the
driver's peak RSS is its own (the jobs' processes hold one merge's memory each).

lance: a Lance cache with a blob column of F fragments (one data file each, built with max_rows_per_file=1),
opened in a new process and read (first and last row, then 2,000 random rows): seconds, peak memory, and the
data files mapped at the end (from /proc/self/maps), before (every data file mapped at open: the pool's bound
and the files mapped at open raised past F) and now (mapped on first read, at most
STABLE_DATASETS_MAX_OPEN_SHARDS, here 512 so the bound shows below 8,192 fragments).

manifest: the shard list as JSON entries in `_metadata.json` (below STABLE_DATASETS_SHARD_LIST_FILE_ABOVE shards,
and every version before this one) against `_shards.arrow` (cache.shard_list): metadata bytes, read + check + row
starts, memory held; and for `--open` sizes a real Arrow cache (hard links to one 1,000-row shard) opened, its
first and last row, the pickle of the opened dataset, what 8 forked readers copy of the parent's memory (each runs
a collection and reads 100 rows), and a spawned reader's unpickle + 100 rows.

metadata: `_metadata.json` of S shards (real entries: path, rows, bytes, sha256): its size, and the
seconds and memory `CacheMetadata.read` takes to parse and check it; and, for `--open` sizes, a real Arrow
cache of that many shards (hard links to one 1,000-row shard) opened with `open_cache` in a new process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

PRELUDE = r"""
import json, os, resource, sys, time
os.environ["STABLE_DATASETS_DISABLE_PROGRESS"] = "1"
import numpy as np, pyarrow as pa, pyarrow.compute as pc
import stable_datasets as sds
from loguru import logger
logger.disable("stable_datasets")
def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as fh:  # the peak (VmHWM) starts again from here
    fh.write("5")
base, base_anon = status("VmRSS"), status("RssAnon")
def done(**out):
    out["rss_mb"] = round((status("VmHWM") - base) / 1024, 1)
    out["anon_mb"] = round((status("RssAnon") - base_anon) / 1024, 1)  # private memory still held at the end
    print(json.dumps(out))
"""

FILES_BUILD = PRELUDE + r"""
data, batch_rows = sys.argv[1], int(sys.argv[2])
start = time.perf_counter()
ds = sds.load_dataset("csv", data_dir=data, split="train", layout_options={"batch_rows": batch_rows})
seconds = time.perf_counter() - start
batches = 0
for entry in ds.cache_files:
    with pa.memory_map(str(entry["filename"])) as source:
        batches += pa.ipc.open_file(source).num_record_batches
done(seconds=seconds, batches=batches, rows=len(ds), cache=str(ds.cache_dirs[0]))
"""

OPEN = PRELUDE + r"""
start = time.perf_counter()
ds = sds.open_cache(sys.argv[1])
first, last = ds[0], ds[-1]
done(seconds=time.perf_counter() - start, rows=len(ds))
"""

KEYS_WORKER = PRELUDE + r"""
from pathlib import Path
from stable_datasets.write.keys import KeyLog, key_digest, key_marker, key_text
rows, before, folder = int(sys.argv[1]), sys.argv[2] == "1", Path(sys.argv[3])
start = time.perf_counter()
if before:  # the part's dict of every key, then its keys file's digests and texts (write/parts.py until now)
    seen = {}
    for i in range(rows):
        key = f"file-{i}.jpg:0"
        marker = key_marker(key)
        assert marker not in seen
        seen[marker] = key
    markers = list(seen)
    digests = np.fromiter((key_digest(m) for m in markers), np.uint64, count=len(markers))
    texts = pa.array([key_text(seen[m]) for m in markers], pa.string())
else:
    log = KeyLog(folder / "runs")
    for i in range(rows):
        assert log.add(f"file-{i}.jpg:0")
    assert log.finish(folder / "keys.arrow") is None
done(seconds=time.perf_counter() - start)
"""

KEYS_DRIVER = PRELUDE + r"""
from pathlib import Path
from stable_datasets.write.keys import MergeStats, merge_sorted
folder, parts, before = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
files = [(folder / f"part-{p}.arrow", int(o)) for p, o in zip(range(parts), sys.argv[4:])]
if (folder / "warm.arrow").is_file():  # first reads and merges untimed (lazy imports, first allocations)
    merge_sorted([(folder / "warm.arrow", 0), (folder / "warm.arrow", 10**6)], None, folder / "scratch")
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
start, cpu_start = time.perf_counter(), cpu()
if before:  # find_duplicate_key until now: every part's keys read, all digests concatenated and np.unique'd
    tables = []
    for path, _ in files:
        with pa.memory_map(str(path)) as source:
            tables.append(pa.ipc.open_file(source).read_all())
    digests = np.concatenate([t.column("digest").to_numpy() for t in tables])
    values, counts = np.unique(digests, return_counts=True)
    assert not (counts > 1).any()
    peak = None
else:
    stats = MergeStats()
    assert merge_sorted(files, None, folder / "scratch", stats) is None
    peak = stats.peak_bytes
done(seconds=time.perf_counter() - start, cpu_seconds=round(cpu() - cpu_start, 2),
     counted_mb=None if peak is None else round(peak / 2**20, 1))
"""

KEYS_RANGES = PRELUDE + r"""
from pathlib import Path
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.key_check import check_range, find_duplicate_key, plan_range_checks
from stable_datasets.write.parts import PartResult, part_dir
staging, parts, num_proc = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
results = [PartResult.load(part_dir(staging, p)) for p in range(parts)]
from stable_datasets.write.keys import merge_sorted
warm = staging.parent / "warm.arrow"  # first reads and merges untimed (lazy imports, first allocations)
merge_sorted([(warm, 0), (warm, 10**6)], None, staging / "scratch")
cpu = lambda: sum(resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime
                  for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
start, cpu_start = time.perf_counter(), cpu()
if num_proc > 1:  # the build's way: the range jobs through a JobRunner of num_proc forked processes
    assert find_duplicate_key(staging, results, JobRunner(num_proc=num_proc)) is None
    jobs = []
else:  # the same jobs one after the other in this process, each timed: the longest is the parallel floor
    jobs = []
    for check in plan_range_checks(staging, results):
        began = time.perf_counter()
        assert check_range(check, staging / ".keys") is None
        jobs.append(round(time.perf_counter() - began, 2))
done(seconds=time.perf_counter() - start, cpu_seconds=round(cpu() - cpu_start, 2), jobs=jobs)
"""

LIST_READ = PRELUDE + r"""
from stable_datasets.cache.metadata import CacheMetadata
start = time.perf_counter()
meta = CacheMetadata.read(sys.argv[1])
starts = np.cumsum(meta.shard_rows())  # what a reader needs of every shard: where its rows start
total = meta.num_bytes
done(seconds=time.perf_counter() - start, shards=len(meta.shards))
"""

LIST_OPEN = PRELUDE + r"""
import gc, pickle
path = sys.argv[1]
start = time.perf_counter()
ds = sds.open_cache(path)
first, last = ds[0], ds[-1]
seconds = time.perf_counter() - start
blob = pickle.dumps(ds)
rng = np.random.default_rng(0)

def private_kb():
    with open("/proc/self/smaps_rollup") as fh:
        return sum(int(line.split()[1]) for line in fh if line.startswith(("Private_Dirty", "Private_Clean")))

# 8 forked readers: what each copies of the parent's memory (a collection touches every object it tracks)
children = []
for _ in range(8):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        before = private_kb()
        gc.collect()
        ds.__getitems__(rng.integers(0, len(ds), 100).tolist())
        os.write(write, str(private_kb() - before).encode())
        os._exit(0)
    os.close(write)
    children.append((pid, read))
forked = []
for pid, read in children:
    forked.append(int(os.read(read, 64) or b"0"))
    os.waitpid(pid, 0)
done(seconds=seconds, pickle_bytes=len(blob), forked_private_mb=round(sum(forked) / 1024, 1))
"""

LIST_SPAWNED = PRELUDE + r"""
import pickle
blob = open(sys.argv[1], "rb").read()
start = time.perf_counter()
ds = pickle.loads(blob)
rows = ds.__getitems__(np.random.default_rng(0).integers(0, len(ds), 100).tolist())
done(seconds=time.perf_counter() - start)
"""

PICKLE = PRELUDE + r"""
import pickle
ds = sds.open_cache(sys.argv[1])
open(sys.argv[2], "wb").write(pickle.dumps(ds))
done()
"""

METADATA = PRELUDE + r"""
from stable_datasets.cache.metadata import CacheMetadata
start = time.perf_counter()
meta = CacheMetadata.read(sys.argv[1])
done(seconds=time.perf_counter() - start, shards=len(meta.shards))
"""


LANCE_OPEN = PRELUDE + r"""
from stable_datasets.layouts.lance import blobs as lance_blobs
folder, before = sys.argv[1], sys.argv[2] == "1"
if before:  # every data file mapped at open, as until now
    os.environ["STABLE_DATASETS_MAX_OPEN_SHARDS"] = "1000000"
    lance_blobs.MAP_AT_OPEN = 10**9
start = time.perf_counter()
ds = sds.open_cache(folder)
first, last = ds[0], ds[-1]
opened = time.perf_counter() - start
rows = np.random.default_rng(0).integers(0, len(ds), 2000).tolist()
start = time.perf_counter()
got = ds.__getitems__(rows)
random_s = time.perf_counter() - start
with open("/proc/self/maps") as fh:
    mapped = len({line.split()[-1] for line in fh if folder in line and line.rstrip().endswith(".lance")})
done(seconds=opened, random_s=random_s, mapped=mapped, rows=len(ds))
"""

LANCE_BUILDER = """
import stable_datasets as sds

class ManyFragments(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"i": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"rows": ROWS})]

    def _generate_examples(self, rows):
        for i in range(rows):
            yield i, {"i": i, "blob": bytes([i % 256]) * (i % 7 * 10)}
"""


def child(code: str, *args: object, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         cwd=HERE.parent, env={**os.environ, **(env or {})})
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_files(work: Path, files: int) -> None:
    data = work / "csv"
    data.mkdir()
    for i in range(files):
        (data / f"f{i:06d}.csv").write_text(f"a,b\n{i},x{i}\n")
    print(f"\n### {files:,} one-row CSV files\n")
    print("| write path | record batches | build s | open + first/last row s | open peak RSS MB | private MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, batch_rows in (("before: one batch per file", 1), ("now: joined up to batch_rows", 1000)):
        built = child(FILES_BUILD, data, batch_rows)
        opens = [child(OPEN, built["cache"]) for _ in range(3)]
        best = min(opens, key=lambda o: o["seconds"])
        print(f"| {label} | {built['batches']:,} | {built['seconds']:.2f} | {best['seconds']:.3f} | "
              f"{best['rss_mb']} | {best['anon_mb']} |")


def bench_keys(work: Path, sizes: list[int], check_only: bool = False, ranges: int = 2) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from stable_datasets.write.keys import RangedKeyWriter, write_sorted_keys
    from stable_datasets.write.parts import KEY_RANGES_DIR, PartResult, part_dir

    rows_out: list[str] = []
    ranged_out: list[str] = []
    rng = np.random.default_rng(0)
    for rows in sizes:
        folder = work / f"keys-{rows}"
        folder.mkdir()
        if not check_only:
            worker_before = child(KEYS_WORKER, rows, 1, folder)
            worker_now = child(KEYS_WORKER, rows, 0, folder)
        parts, per = 8, rows // 8
        offsets = []
        staging = folder / "staging"
        warm = np.sort(rng.integers(0, 2**64 - 1, 10_000, dtype=np.uint64))
        write_sorted_keys(folder / "warm.arrow", warm, np.arange(10_000, dtype=np.int64),
                          pc.cast(pa.array(np.arange(10_000)), pa.string()))
        for p in range(parts):
            digests = np.sort(rng.integers(0, 2**64 - 1, per, dtype=np.uint64))
            texts = pc.cast(pa.array(np.arange(p * per, (p + 1) * per)), pa.string())
            write_sorted_keys(folder / f"part-{p}.arrow", digests, np.arange(per, dtype=np.int64), texts)
            writer = RangedKeyWriter(part_dir(staging, p) / KEY_RANGES_DIR, ranges)  # the same keys, as parts cut them
            write_sorted_keys(writer, digests, np.arange(per, dtype=np.int64), texts)
            PartResult(index=p, num_rows=per, shards=[], has_keys=True, key_counts=writer.counts).save(
                part_dir(staging, p))
            offsets.append(p * per)
        del digests, texts

        def cell(r: dict) -> str:
            return r.get("error") or f"{r['seconds']:.2f} / {r['rss_mb']}"

        driver_now = child(KEYS_DRIVER, folder, parts, 0, *offsets)
        one_process = child(KEYS_RANGES, staging, parts, 1)
        jobs = child(KEYS_RANGES, staging, parts, ranges)

        def check_cell(r: dict) -> str:
            return r.get("error") or f"{r['seconds']:.2f} / {r['cpu_seconds']:.2f} / {r['rss_mb']}"

        longest = max(one_process.get("jobs") or [float("nan")])
        ranged_out.append(f"| {rows:,} | {check_cell(driver_now)} | {check_cell(one_process)} | "
                          f"{' + '.join(map(str, one_process.get('jobs', [])))} | {check_cell(jobs)} | "
                          f"{driver_now.get('seconds', float('nan')) / longest:.2f}x |")
        if not check_only:
            driver_before = child(KEYS_DRIVER, folder, parts, 1, *offsets)
            rows_out.append(f"| {rows:,} | {cell(worker_before)} | {cell(worker_now)} | {cell(driver_before)} | "
                            f"{cell(driver_now)} / {driver_now.get('counted_mb')} |")
        shutil.rmtree(folder)
    if rows_out:
        print("\n### Duplicate-key check\n")
        print("| rows | worker before: s / peak RSS MB | worker now (KeyLog): s / peak RSS MB | driver before: s / "
              "peak RSS MB | driver now (merge): s / peak RSS MB / counted MB |")
        print("|---:|---|---|---|---|")
        print("\n".join(rows_out))
    print(f"\n### Duplicate-key check across 8 parts: one merge vs {ranges} digest-range jobs\n")
    print(f"| rows | one driver merge: s / CPU s / driver peak RSS MB | {ranges} range jobs one after the other: s / "
          f"CPU s / peak RSS MB | each job: s | {ranges} range jobs in {ranges} processes: s / CPU s (all) / driver "
          "peak RSS MB | one merge / longest job |")
    print("|---:|---|---|---|---|---:|")
    print("\n".join(ranged_out))


def _metadata_cache(folder: Path, shards: int, shard_file: Path | None, rows_per_shard: int,
                    template: dict) -> None:
    """A cache folder listing `shards` shards (hard links to `shard_file` when given)."""
    folder.mkdir(parents=True)
    entries = []
    size = shard_file.stat().st_size if shard_file else 1 << 30
    sha = template["shards"][0]["sha256"] if shard_file else "ab" * 32
    for i in range(shards):
        name = f"shard-{i:07d}.arrow" if shards > 99_999 else f"shard-{i:05d}.arrow"
        if shard_file:
            if i % 50_000 == 0:  # a filesystem allows about 65,000 links to one file (ext4)
                source = folder / f".copy-{i}"
                shutil.copyfile(shard_file, source)
            os.link(source, folder / name)
        entries.append({"path": name, "num_rows": rows_per_shard, "num_bytes": size, "sha256": sha})
    meta = dict(template, shards=entries, num_rows=rows_per_shard * shards, num_bytes=size * shards)
    (folder / "_metadata.json").write_text(json.dumps(meta, indent=2))


def bench_metadata(work: Path, shard_counts: list[int], open_counts: list[int]) -> None:
    import stable_datasets as sds

    one = sds.StableDataset.from_dict({"i": list(range(1000)), "s": [f"row {i}" for i in range(1000)]})
    source = Path(one.cache_dirs[0])
    template = json.loads((source / "_metadata.json").read_text())
    shard_file = source / template["shards"][0]["path"]
    print("\n### `_metadata.json` vs shards (parse and check only)\n")
    print("| shards | `_metadata.json` bytes | bytes / shard | read s | read peak RSS MB | held (anon) MB |")
    print("|---:|---:|---:|---:|---:|---:|")
    for shards in shard_counts:
        folder = work / f"meta-{shards}"
        _metadata_cache(folder, shards, None, 10_000, template)
        size = (folder / "_metadata.json").stat().st_size
        runs = [child(METADATA, folder) for _ in range(2)]
        best = min(runs, key=lambda r: r.get("seconds", 1e9))
        print(f"| {shards:,} | {size:,} | {size / shards:.0f} | {best.get('seconds', float('nan')):.3f} | "
              f"{best.get('rss_mb', best.get('error'))} | {best.get('anon_mb')} |")
    print("\n### A real Arrow cache opened vs shards (1,000 rows each)\n")
    print("| shards | rows | open + first/last row s | open RSS MB | of it private (anon) MB | private KB / shard |")
    print("|---:|---:|---:|---:|---:|---:|")
    for shards in open_counts:
        folder = work / f"open-{shards}"
        _metadata_cache(folder, shards, shard_file, 1000, template)
        runs = [child(OPEN, folder) for _ in range(2)]
        ok = [r for r in runs if "seconds" in r]
        if not ok:
            print(f"| {shards:,} | {shards * 1000:,} | fails: {runs[0]['error']} | | | |")
            continue
        best = min(ok, key=lambda r: r["seconds"])
        print(f"| {shards:,} | {best['rows']:,} | {best['seconds']:.3f} | {best['rss_mb']} | {best['anon_mb']} | "
              f"{best['anon_mb'] * 1024 / shards:.1f} |")


def _as_shard_list(folder: Path) -> None:
    """Rewrite the JSON-listed cache in `folder` as a build of this version writes it past the threshold."""
    from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata

    data = json.loads((folder / METADATA_FILE).read_text())
    os.environ["STABLE_DATASETS_SHARD_LIST_FILE_ABOVE"] = "0"  # read by the write below only
    CacheMetadata.from_dict(data).write(folder, sync=False)


def bench_manifest(work: Path, shard_counts: list[int], open_counts: list[int]) -> None:
    """The shard list in `_metadata.json` (JSON, every version before this one) against `_shards.arrow`."""
    import stable_datasets as sds

    one = sds.StableDataset.from_dict({"i": list(range(1000)), "s": [f"row {i}" for i in range(1000)]})
    source = Path(one.cache_dirs[0])
    template = json.loads((source / "_metadata.json").read_text())
    shard_file = source / template["shards"][0]["path"]
    print("\n### Shard list: JSON entries vs `_shards.arrow` (read, check and row starts, in a new process)\n")
    print("| shards | list in | metadata bytes | bytes / shard | read + row starts s | peak RSS MB | held (anon) MB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for shards in shard_counts:
        folder = work / f"list-{shards}"
        _metadata_cache(folder, shards, None, 10_000, template)
        for label in ("JSON", "_shards.arrow"):
            if label != "JSON":
                _as_shard_list(folder)
            size = sum(f.stat().st_size for f in folder.iterdir() if f.name in ("_metadata.json", "_shards.arrow"))
            runs = [child(LIST_READ, folder) for _ in range(2)]
            best = min(runs, key=lambda r: r.get("seconds", 1e9))
            print(f"| {shards:,} | {label} | {size:,} | {size / shards:.0f} | {best.get('seconds', float('nan')):.4f} "
                  f"| {best.get('rss_mb', best.get('error'))} | {best.get('anon_mb')} |", flush=True)
        shutil.rmtree(folder)
    print("\n### A real Arrow cache opened, pickled, read by 8 forked and one spawned reader\n")
    print("| shards | list in | open + first/last row s | private (anon) MB | pickle bytes | 8 forked readers: "
          "private MB copied | spawned reader: unpickle + 100 rows s / private MB |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for shards in open_counts:
        folder = work / f"open-list-{shards}"
        _metadata_cache(folder, shards, shard_file, 1000, template)
        for label in ("JSON", "_shards.arrow"):
            if label != "JSON":
                _as_shard_list(folder)
            runs = [child(LIST_OPEN, folder) for _ in range(2)]
            ok = [r for r in runs if "seconds" in r]
            if not ok:
                print(f"| {shards:,} | {label} | fails: {runs[0]['error']} | | | | |")
                continue
            best = min(ok, key=lambda r: r["seconds"])
            blob = work / "dataset.pickle"
            child(PICKLE, folder, blob)
            spawned = child(LIST_SPAWNED, blob)
            print(f"| {shards:,} | {label} | {best['seconds']:.3f} | {best['anon_mb']} | {best['pickle_bytes']:,} | "
                  f"{best['forked_private_mb']} | {spawned.get('seconds', float('nan')):.3f} / "
                  f"{spawned.get('anon_mb', spawned.get('error'))} |", flush=True)
        shutil.rmtree(folder)


def bench_lance(work: Path, fragment_counts: list[int]) -> None:
    import stable_datasets as sds

    print("\n### Lance caches with a blob column: data files mapped lazily (STABLE_DATASETS_MAX_OPEN_SHARDS=512)\n")
    print("| fragments | side | open + first/last row s | 2,000 random rows s | peak RSS MB | data files mapped |")
    print("|---:|---|---:|---:|---:|---:|")
    for fragments in fragment_counts:
        script = work / f"many_{fragments}.py"
        script.write_text(LANCE_BUILDER.replace("ROWS", str(fragments)))
        ds = sds.load_dataset(str(script), split="train", storage_format="lance",
                              layout_options={"max_rows_per_file": 1})
        folder = str(ds.cache_dirs[0])
        for label, before in (("before: all mapped at open", "1"), ("now: lazy, bounded", "0")):
            runs = [child(LANCE_OPEN, folder, before, env={"STABLE_DATASETS_MAX_OPEN_SHARDS": "512"})
                    for _ in range(2)]
            if "error" in runs[0]:
                print(f"| {fragments:,} | {label} | {runs[0]['error']} | | | |")
                continue
            best = min(runs, key=lambda o: o["seconds"])
            print(f"| {fragments:,} | {label} | {best['seconds']:.2f} | {best['random_s']:.3f} | {best['rss_mb']} | "
                  f"{best['mapped']:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["files", "keys", "metadata", "manifest", "lance"])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--shards", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--open", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--check-only", action="store_true",
                        help="keys: only the check across parts (one merge vs range jobs), not the worker side")
    parser.add_argument("--key-ranges", type=int, default=2, help="keys: digest ranges (jobs, processes) of the check")
    parser.add_argument("--fragments", type=int, nargs="+", default=[1_000, 4_000])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=os.environ.get("BENCH_DIR")))
    os.environ["STABLE_DATASETS_CACHE_DIR"] = str(work / "cache")
    os.environ["STABLE_DATASETS_DISABLE_PROGRESS"] = "1"
    from loguru import logger

    logger.disable("stable_datasets")
    print(f"work folder: {work}")
    if args.only in (None, "files"):
        bench_files(work, args.files)
    if args.only in (None, "keys"):
        bench_keys(work, args.rows, args.check_only, args.key_ranges)
    if args.only in (None, "metadata"):
        bench_metadata(work, args.shards, args.open)
    if args.only in (None, "manifest"):
        bench_manifest(work, args.shards, args.open)
    if args.only in (None, "lance"):
        bench_lance(work, args.fragments)


if __name__ == "__main__":
    main()
