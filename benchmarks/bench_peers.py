"""Training reads: our Arrow, Lance and Parquet layouts against HF `datasets`, mosaicml-streaming
(MDS) and litdata, side by side on the same rows, with the physical floor in the same run.

    python benchmarks/bench_peers.py                 # 100,000 rows, 3 rounds (a few minutes)
    python benchmarks/bench_peers.py --quick         # tiny smoke run
    python benchmarks/bench_peers.py --install-peers # first: the pinned peers, without touching numpy/torch

Data: N rows of {"blob": ~3 KB of distinct random bytes, "label": int}, generated the same way by
every side. Each side is built once in its own subprocess (build time, peak RSS, disk size). Then,
in every round, each side is read in a fresh subprocess, the sides in turns (round 1: a, b, c, ...;
round 2 again), which gives its open time, its reads and its peak and anonymous RSS; the table
shows the median over rounds and the range. Reads, per side:

- random `ds[i]` of 2,000 random rows (µs/row),
- batches of 256 random indices (`__getitems__` where the library has it, else 256 `ds[i]`),
- full iteration in stored order,
- one shuffled epoch through `torch.utils.data.DataLoader(batch_size=256, num_workers=2)`, with
  the identity collate so only reads are timed. Map-style sides (ours, HF, the floor) shuffle
  with a full permutation (`shuffle=True`); the streaming peers are iterable and shuffle their
  own way (MDS: py1e; litdata: chunk shuffle), each with its defaults.

The floor is a memoryview slice of one memory-mapped file holding every blob, looked up through
a numpy offsets array.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import print_table, work_dir  # noqa: E402

BLOB_BYTES = 3072
BLOCK_ROWS = 1024  # blobs are drawn a block at a time: distinct, random and cheap to regenerate
SIDES = ("floor", "arrow", "lance", "parquet", "hf", "mds", "litdata")
OURS = {"arrow": "arrow", "lance": "lance", "parquet": "parquet"}
PEER_PINS = ["mosaicml-streaming==0.13.0", "litdata==0.2.76"]
# What the peers import at run time, minus what would replace our numpy or torch (both peers pin
# versions that pip would satisfy by downgrading numpy and pulling a CUDA torch).
PEER_RUNTIME_DEPS = ["zstd", "python-snappy", "cramjam", "brotli", "catalogue", "xxhash", "lightning-utilities",
                     "obstore", "boto3", "filelock", "requests", "urllib3>=1.26"]
PEER_RUNTIME_NO_DEPS = ["tifffile"]  # needs numpy only, which we have

_block: tuple[int, bytes] = (-1, b"")


def blob(i: int) -> bytes:
    global _block
    b = i // BLOCK_ROWS
    if _block[0] != b:
        _block = (b, np.random.default_rng(b).bytes(BLOCK_ROWS * BLOB_BYTES))
    k = (i % BLOCK_ROWS) * BLOB_BYTES
    return _block[1][k:k + BLOB_BYTES]


def example(i: int) -> dict[str, Any]:
    return {"blob": blob(i), "label": i % 1000}


def identity(batch: Any) -> Any:
    return batch


# -- installing the peers -------------------------------------------------------------------------
def install_peers() -> None:
    """The pinned peers with --no-deps plus the run-time deps they import, so numpy and torch stay ours."""
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    print("installing", PEER_PINS, "with --no-deps (their pins would replace numpy and torch), then",
          PEER_RUNTIME_DEPS + PEER_RUNTIME_NO_DEPS, flush=True)
    subprocess.run([*pip, "--no-deps", *PEER_PINS, *PEER_RUNTIME_NO_DEPS], check=True)
    subprocess.run([*pip, *PEER_RUNTIME_DEPS], check=True)


def import_streaming() -> Any:
    """mosaicml-streaming imports `transformers` and `torchvision` at import time, for isinstance
    checks in its own StreamingDataLoader and for its C4/Pile/ImageNet examples; we use none of
    them. Where they are not importable (their pins clash with our torch and tokenizers), modules
    of stand-in classes take their place."""
    import importlib.abc
    import importlib.machinery
    import types

    missing = []
    for name in ("transformers", "torchvision"):
        try:
            __import__(name)
        except Exception:
            sys.modules.pop(name, None)
            missing.append(name)

    class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in missing:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            module = types.ModuleType(spec.name)
            module.__path__ = []
            module.__getattr__ = lambda attr: type(attr, (dict,), {})
            return module

        def exec_module(self, module):
            pass

    if missing:
        sys.meta_path.insert(0, StandIns())
    import streaming

    return streaming


# -- builds (each in a child process) -------------------------------------------------------------
BUILDER_SOURCE = '''
import sys
sys.path.insert(0, {here!r})
import stable_datasets as sds
from bench_peers import example

class PeersBench(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features={{"blob": sds.Value("binary"), "label": sds.Value("int64")}})

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {{"n": {rows}}})]

    def _generate_examples(self, n):
        for i in range(n):
            yield i, example(i)
'''


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def build(side: str, workdir: Path, rows: int) -> dict[str, Any]:
    out = workdir / side
    started = time.perf_counter()
    if side == "floor":
        out.mkdir()
        offsets = np.arange(rows + 1, dtype=np.int64) * BLOB_BYTES
        with open(out / "blobs.bin", "wb") as f:
            for i in range(rows):
                f.write(blob(i))
        np.save(out / "offsets.npy", offsets)
        np.save(out / "labels.npy", np.arange(rows, dtype=np.int64) % 1000)
        data = out
    elif side in OURS:
        import stable_datasets as sds

        script = workdir / "peers_bench.py"
        if not script.exists():
            script.write_text(BUILDER_SOURCE.format(here=str(HERE), rows=rows))
        ds = sds.load_dataset(str(script), split="train", storage_format=OURS[side], cache_dir=out)
        data = Path(ds.cache_dirs[0])
    elif side == "hf":
        import datasets

        features = datasets.Features({"blob": datasets.Value("binary"), "label": datasets.Value("int64")})

        def gen(n):
            for i in range(n):
                yield example(i)

        ds = datasets.Dataset.from_generator(gen, gen_kwargs={"n": rows}, features=features, cache_dir=str(out))
        files = [f["filename"] for f in ds.cache_files]
        return {"seconds": time.perf_counter() - started, "files": files,
                "disk_bytes": sum(os.path.getsize(f) for f in files)}
    elif side == "mds":
        streaming = import_streaming()
        with streaming.MDSWriter(out=str(out), columns={"blob": "bytes", "label": "int"}) as writer:
            for i in range(rows):
                writer.write(example(i))
        data = out
    elif side == "litdata":
        import litdata

        litdata.optimize(fn=example, inputs=list(range(rows)), output_dir=str(out), chunk_bytes="64MB",
                         num_workers=1, mode="overwrite")
        data = out
    else:
        raise ValueError(side)
    return {"seconds": time.perf_counter() - started, "dir": str(data), "disk_bytes": dir_bytes(data)}


# -- reads (each side in a fresh child process per round) ------------------------------------------
class Floor:
    """A memoryview slice of the mapped file per row: what any reader of these bytes must pay."""

    def __init__(self, folder: str):
        import mmap

        with open(Path(folder) / "blobs.bin", "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._view = memoryview(self._map)
        self._offsets = np.load(Path(folder) / "offsets.npy")
        self._labels = np.load(Path(folder) / "labels.npy")

    def __len__(self) -> int:
        return len(self._labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"blob": self._view[self._offsets[i]:self._offsets[i + 1]].tobytes(), "label": int(self._labels[i])}

    def __getitems__(self, keys: Any) -> list[dict[str, Any]]:
        keys = np.asarray(keys)
        lo, hi, labels = self._offsets[keys].tolist(), self._offsets[keys + 1].tolist(), self._labels[keys].tolist()
        view = self._view
        return [{"blob": view[a:b].tobytes(), "label": c} for a, b, c in zip(lo, hi, labels)]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def open_side(side: str, built: dict[str, Any], shuffle: bool = False, seed: int = 0) -> Any:
    if side == "floor":
        return Floor(built["dir"])
    if side in OURS:
        import stable_datasets as sds

        return sds.open_cache(built["dir"])
    if side == "hf":
        import datasets

        parts = [datasets.Dataset.from_file(f) for f in built["files"]]
        return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    if side == "mds":
        streaming = import_streaming()
        return streaming.StreamingDataset(local=built["dir"], shuffle=shuffle, shuffle_seed=seed, batch_size=256)
    if side == "litdata":
        import litdata

        return litdata.StreamingDataset(built["dir"], shuffle=shuffle, seed=seed)
    raise ValueError(side)


def import_side(side: str) -> None:
    if side in OURS:
        import stable_datasets  # noqa: F401
    elif side == "hf":
        import datasets  # noqa: F401
    elif side == "mds":
        import_streaming()
    elif side == "litdata":
        import litdata  # noqa: F401


def rss_anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def read(side: str, built: dict[str, Any], rows: int, singles: int, batches: int, seed: int) -> dict[str, Any]:
    import gc

    import torch  # imported before the clock starts, as a training script has it

    rng = np.random.default_rng(seed)
    single_idx = rng.integers(0, rows, singles).tolist()
    batch_idx = [rng.integers(0, rows, 256).tolist() for _ in range(batches)]
    result: dict[str, Any] = {}
    import_side(side)  # library imports stay out of the open time
    gc.disable()

    started = time.perf_counter()
    ds = open_side(side, built)
    first = ds[0]
    result["open_ms"] = (time.perf_counter() - started) * 1e3
    assert first["blob"] == blob(0), f"{side}: row 0 differs from the generator"
    assert len(ds) == rows, f"{side}: {len(ds)} rows, not {rows}"

    started = time.perf_counter()
    for i in single_idx:
        ds[i]
    result["row_us"] = (time.perf_counter() - started) / singles * 1e6

    many = getattr(ds, "__getitems__", None)
    started = time.perf_counter()
    for keys in batch_idx:
        if many is not None:
            many(keys)
        else:
            [ds[i] for i in keys]
    result["batch_ms"] = (time.perf_counter() - started) / batches * 1e3
    check = ds.__getitems__(batch_idx[0][:3]) if many is not None else [ds[i] for i in batch_idx[0][:3]]
    assert [r["blob"] for r in check] == [blob(i) for i in batch_idx[0][:3]], f"{side}: batch rows differ"

    started = time.perf_counter()
    count = sum(1 for _ in ds)
    result["iter_s"] = time.perf_counter() - started
    assert count == rows, f"{side}: iteration gave {count} rows"
    gc.enable()

    if side in ("mds", "litdata"):
        del ds  # a streaming dataset is built for its shuffle (and MDS allows one per local folder)
        gc.collect()
        loader_ds = open_side(side, built, shuffle=True, seed=seed)
        loader = torch.utils.data.DataLoader(loader_ds, batch_size=256, num_workers=2, collate_fn=identity)
    else:
        loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2, shuffle=True,
                                             generator=torch.Generator().manual_seed(seed), collate_fn=identity)
    started = time.perf_counter()
    seen = sum(len(batch) for batch in loader)
    result["epoch_s"] = time.perf_counter() - started
    assert seen == rows, f"{side}: the DataLoader epoch gave {seen} rows"
    if side == "floor" or side in OURS:  # map-style sides with stored blocks: the block-shuffled epoch
        from stable_datasets.streaming.sampler import BlockShuffleSampler

        bounds = None if side in OURS else np.append(np.arange(0, rows, BLOCK_ROWS), rows)  # the floor's blocks
        sampler = BlockShuffleSampler(ds, block_bounds=bounds, seed=seed)
        loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2, sampler=sampler,
                                             collate_fn=identity)
        started = time.perf_counter()
        seen = sum(len(batch) for batch in loader)
        result["epoch_block_s"] = time.perf_counter() - started
        assert seen == rows, f"{side}: the block-shuffled DataLoader epoch gave {seen} rows"
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["anon_rss_mb"] = rss_anon_mb()
    return result


# -- driver -----------------------------------------------------------------------------------------
def child_main(args: argparse.Namespace) -> None:
    os.environ["STABLE_DATASETS_DISABLE_PROGRESS"] = "1"
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    from loguru import logger

    logger.disable("stable_datasets")
    if args.child == "build":
        out = build(args.side, args.workdir, args.rows)
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    else:
        built = json.loads(args.built)
        out = read(args.side, built, args.rows, args.singles, args.batches, args.seed)
    print("RESULT " + json.dumps(out), flush=True)


def run_child(kind: str, side: str, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", kind, "--side", side, "--workdir", str(args.workdir),
           "--rows", str(args.rows), "--singles", str(args.singles), "--batches", str(args.batches)]
    for key, value in extra.items():
        cmd += [f"--{key}", str(value)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        raise RuntimeError(f"{kind} {side} failed (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def peers_available() -> list[str]:
    missing = []
    for module in ("datasets", "streaming", "litdata"):
        probe = "import bench_peers; bench_peers.import_streaming()" if module == "streaming" else f"import {module}"
        ok = subprocess.run([sys.executable, "-c", probe], cwd=HERE, capture_output=True).returncode == 0
        if not ok:
            missing.append(module)
    return missing


def fmt(values: list[float], scale: float = 1.0) -> str:
    values = [v * scale for v in values]
    med = statistics.median(values)
    text = f"{med:,.3g}"
    if len(values) > 1:
        text += f" ({min(values):,.3g}-{max(values):,.3g})"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 1 round: a smoke test")
    parser.add_argument("--install-peers", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--child")
    parser.add_argument("--side")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--built")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    if args.install_peers:
        install_peers()
    if args.quick:
        args.rows, args.rounds, args.singles, args.batches = 2000, 1, 200, 4
    sides = [s for s in args.sides.split(",") if s]
    missing = peers_available()
    skipped = [s for s in sides if (s == "hf" and "datasets" in missing) or (s == "mds" and "streaming" in missing)
               or (s == "litdata" and "litdata" in missing)]
    if skipped:
        print(f"skipping {skipped}: not installed (run with --install-peers)", flush=True)
    sides = [s for s in sides if s not in skipped]

    args.workdir = work_dir("bench-peers-")
    load = os.getloadavg()
    try:
        builds = {}
        for side in sides:
            builds[side] = run_child("build", side, args)
            print(f"built {side}: {builds[side]['seconds']:.2f} s", flush=True)
        reads: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
        for round_number in range(args.rounds):
            order = sides[round_number % len(sides):] + sides[:round_number % len(sides)]
            for side in order:
                reads[side].append(run_child("read", side, args, built=json.dumps(builds[side]),
                                             seed=round_number))
            print(f"round {round_number + 1}/{args.rounds} done", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
    load_after = os.getloadavg()

    if args.json:
        args.json.write_text(json.dumps({"builds": builds, "reads": reads}, indent=1))
    import torch

    versions = {"numpy": np.__version__, "torch": torch.__version__}
    for name, module in (("datasets", "datasets"), ("pylance", "lance"), ("litdata", "litdata")):
        with contextlib.suppress(Exception):
            versions[name] = __import__(module).__version__
    if "mds" in sides:
        versions["mosaicml-streaming"] = import_streaming().__version__
    print(f"\n{args.rows:,} rows of {BLOB_BYTES} random bytes + int label; {args.rounds} rounds, median (range); "
          f"{os.cpu_count()} cores; load average {load[0]:.1f} before, {load_after[0]:.1f} after; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()) + "\n")
    measures = [("build", None, "s", lambda s: [builds[s]["seconds"]]),
                ("build peak RSS", None, "MiB", lambda s: [builds[s]["peak_rss_mb"]]),
                ("disk size", None, "MiB", lambda s: [builds[s]["disk_bytes"] / 2**20]),
                ("open + first row, fresh process", "open_ms", "ms", None),
                ("random `ds[i]`", "row_us", "µs/row", None),
                ("256 random indices", "batch_ms", "ms/batch", None),
                ("full iteration", "iter_s", "s", None),
                ("DataLoader epoch, batch 256, 2 workers, shuffled", "epoch_s", "s", None),
                ("DataLoader epoch, the same, BlockShuffleSampler", "epoch_block_s", "s", None),
                ("reader peak RSS", "peak_rss_mb", "MiB", None),
                ("reader anonymous RSS", "anon_rss_mb", "MiB", None)]
    names = {"floor": "floor (mmap slice)", "arrow": "our Arrow", "lance": "our Lance", "parquet": "our Parquet",
             "hf": "HF datasets", "mds": "MDS", "litdata": "litdata"}
    table = []
    for label, key, unit, get in measures:
        cells = []
        for side in sides:
            values = get(side) if get else [r[key] for r in reads[side] if key in r]
            cells.append(fmt(values) if values and (side != "floor" or key) else "")
        table.append((label, *cells, unit))
    print_table(["measure", *(names[s] for s in sides), "unit"], table, right=tuple(range(1, len(sides) + 1)))


if __name__ == "__main__":
    main()
