"""Arrow caches of many shards and large numeric columns: this code against an older checkout (issue 28.6).

    python benchmarks/bench_many_shards.py --base /tmp/scale28a-base --shards 2000 --numeric-rows 50000000

`--base` is a folder holding an older `stable_datasets` package (e.g. `git archive <commit> stable_datasets |
tar -x -C /tmp/base`); each side runs in its own fresh process with that package first on `sys.path`,
in turns (A B A B), and each figure is the best of the rounds. A third side runs this checkout with
STABLE_DATASETS_MAX_OPEN_SHARDS at half the shards: what random reads cost when files are mapped again.

1. Random reads over a cache of `--shards` shards (500 rows each, 4 record batches; an int64 id, a
   float32 score and a short string): open (open_cache and the first row), memory maps after open,
   one row of every shard (where the shards past the first 1,024 are now mapped), then random
   `ds[i]`, `__getitems__` of 256 random indices, and the same batches as an Arrow table.
2. Private memory of a worker gathering random batches from a cache of `--numeric-rows` rows of
   int64 + float32 in 4 shards: RssAnon (anonymous memory: what the process holds privately, page
   cache of the mapped files excluded) after 200 batches of 256 random rows, python rows then Arrow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pyarrow as pa
from common import print_table, work_dir

import stable_datasets as sds
from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.cache.publish import file_sha256
from tests.fixtures.many_shards import write_arrow_cache

REPO = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import stable_datasets as sds

    def status(key):
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith(key))

    def maps():
        with open("/proc/self/maps", "rb") as fh:
            return sum(1 for _ in fh)

    folder, mode = sys.argv[1], sys.argv[2]
    out = {"package": sds.__file__}
    anon0 = status("RssAnon")
    t = time.perf_counter()
    ds = sds.open_cache(folder)
    ds[0]
    out["open_ms"] = (time.perf_counter() - t) * 1e3
    out["maps_after_open"] = maps()
    t = time.perf_counter()
    bounds = ds.backends[0].shard_bounds()
    for start in bounds[:-1].tolist():  # one row of every shard: each shard mapped (and validated) once
        ds[start]
    out["touch_ms"] = (time.perf_counter() - t) * 1e3
    rng = np.random.default_rng(0)
    if mode == "reads":
        rows = rng.integers(0, len(ds), 20000).tolist()
        t = time.perf_counter()
        for i in rows:
            ds[i]
        out["row_us"] = (time.perf_counter() - t) / len(rows) * 1e6
        batches = [rng.integers(0, len(ds), 256).tolist() for _ in range(200)]
        t = time.perf_counter()
        for b in batches:
            ds.__getitems__(b)
        out["getitems_ms"] = (time.perf_counter() - t) / len(batches) * 1e3
        arrow = ds.with_format("arrow")
        t = time.perf_counter()
        for b in batches:
            arrow[b]
        out["arrow_ms"] = (time.perf_counter() - t) / len(batches) * 1e3
    else:
        for b in range(200):
            ds.__getitems__(rng.integers(0, len(ds), 256).tolist())
        out["anon_rows_mib"] = (status("RssAnon") - anon0) / 1024
        arrow = ds.with_format("arrow")
        for b in range(200):
            arrow[rng.integers(0, len(ds), 256).tolist()]
        out["anon_both_mib"] = (status("RssAnon") - anon0) / 1024
    out["maps_at_end"] = maps()
    print(json.dumps(out))
""")


def write_numeric_cache(folder: Path, rows: int, shards: int = 4) -> Path:
    """`rows` rows of int64 id and float32 score in `shards` shards of 65,536-row record batches."""
    folder.mkdir(parents=True, exist_ok=True)
    features = sds.Features({"id": sds.Value("int64"), "score": sds.Value("float32")})
    schema = features.arrow_schema
    infos = []
    per = rows // shards
    for s in range(shards):
        path = folder / f"shard-{s:05d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for lo in range(s * per, (s + 1) * per, 1 << 16):
                ids = np.arange(lo, min(lo + (1 << 16), (s + 1) * per), dtype=np.int64)
                writer.write_batch(pa.record_batch([pa.array(ids), pa.array((ids / 4).astype(np.float32))],
                                                   schema=schema))
        infos.append(ShardInfo(path=path.name, num_rows=per, num_bytes=path.stat().st_size, sha256=file_sha256(path)))
    CacheMetadata(layout="arrow_shards", features=features.to_dict(), num_rows=per * shards, shards=infos,
                  layout_options={"max_shard_size": 512 << 20, "compression": None}).write(folder, sync=False)
    return folder


def probe(package_root: Path, folder: Path, mode: str, max_open: int | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    if max_open is not None:
        env["STABLE_DATASETS_MAX_OPEN_SHARDS"] = str(max_open)
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder), mode], capture_output=True, text=True, env=env,
                          cwd="/", check=False)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:200]}
    result = json.loads(done.stdout)
    assert Path(result["package"]).resolve().is_relative_to(package_root.resolve()), result["package"]
    return result


def best(results: list[dict], key: str, largest: bool = False) -> float | str:
    values = [r[key] for r in results if key in r]
    if not values:
        return next((r["error"] for r in results if "error" in r), "-")
    return max(values) if largest else min(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="folder holding the older stable_datasets package")
    parser.add_argument("--shards", type=int, default=2000)
    parser.add_argument("--numeric-rows", type=int, default=50_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = work_dir("many-shards")
    try:
        many = write_arrow_cache(root / "many", shards=args.shards, rows_per_shard=500, batches_per_shard=4)
        numeric = write_numeric_cache(root / "numeric", args.numeric_rows)
        bounded = args.shards // 2
        sides = {"before": (args.base, None), "after": (REPO, None), "bounded": (REPO, bounded)}
        runs: dict[str, dict[str, list[dict]]] = {name: {"reads": [], "memory": []} for name in sides}
        for _ in range(args.rounds):
            for name, (package, max_open) in sides.items():
                runs[name]["reads"].append(probe(package, many, "reads", max_open))
                if max_open is None:
                    runs[name]["memory"].append(probe(package, numeric, "memory"))
        rows = []
        for label, mode, key, unit in [
            ("open + first row", "reads", "open_ms", "ms"),
            ("memory maps after open", "reads", "maps_after_open", "maps"),
            ("then one row of every shard", "reads", "touch_ms", "ms"),
            ("random ds[i]", "reads", "row_us", "µs/row"),
            ("__getitems__ of 256 random rows", "reads", "getitems_ms", "ms/batch"),
            ("the same batches as an Arrow table", "reads", "arrow_ms", "ms/batch"),
            ("memory maps at the end", "reads", "maps_at_end", "maps"),
            ("private memory after 200 python batches", "memory", "anon_rows_mib", "MiB"),
            ("private memory after 200 more as Arrow", "memory", "anon_both_mib", "MiB"),
        ]:
            before, after, bound = (best(runs[name][mode], key, largest="anon" in key) for name in sides)
            ratio = f"{before / after:.2f}x" if isinstance(before, float | int) and isinstance(after, float | int) \
                and after else ""
            rows.append([label, _fmt(before), _fmt(after), ratio, _fmt(bound), unit])
        print(f"{args.shards} shards x 500 rows; numeric cache {args.numeric_rows:,} rows (int64 + float32, "
              f"4 shards); best of {args.rounds} rounds each")
        print_table(["measure", "before", "after", "before/after",
                     f"after, STABLE_DATASETS_MAX_OPEN_SHARDS={bounded}", "unit"], rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fmt(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


if __name__ == "__main__":
    main()
