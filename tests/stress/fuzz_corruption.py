"""Random byte corruptions of every layout's files and of interleaved tars: a corrupt file must
raise, never crash the interpreter or hang.

    python tests/stress/fuzz_corruption.py --cases 2000 [--seed 0] [--results benchmarks/RESULTS.md]

Caches of each layout (Arrow shards, Parquet shards, Lance rows, Lance video frames) hold rows
with strings, lists, nested lists of strings, fixed-shape arrays and images, over several shards
and record batches; the tars hold JSON, PNG and long (PAX) member names. Each case overwrites
one to four random bytes of one file (every file of the cache except `_metadata.json`, half of
the positions drawn within 4 KiB of either end where headers and footers live), then a forked
child opens the cache and reads every row several ways (one at a time, a batch of rows, an
Arrow `take`, a streamed pass). The parent restores the file and classifies the child:
ok (the damage was in bytes nobody checks, e.g. inside a PNG's pixels), an error we raise, another
Python exception, a crash (killed by a signal) or a hang (no exit within the timeout).
The suite runs a few hundred cases (tests/behaviour/test_fuzz_corruption.py); this script does thousands.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import numpy as np

import stable_datasets as sds

OUTCOMES = ("ok", "our error", "other exception", "crash", "hang")
EXIT_CODES = {0: "ok", 10: "our error", 11: "other exception"}
LAYOUTS = {"arrow": "arrow_shards", "parquet": "parquet_shards", "lance": "lance_rows"}


# -- the data --------------------------------------------------------------------------------
class FuzzRows(sds.GeneratorBasedBuilder):
    """Every kind of column the readers dereference: offsets (strings, lists, lists of strings),
    fixed-size arrays, structs and encoded images."""

    VERSION = sds.Version("1.0.0")

    def _info(self) -> sds.DatasetInfo:
        return sds.DatasetInfo(features=sds.Features({
            "text": sds.Value("string"), "tokens": sds.Sequence(sds.Value("int32")),
            "tags": sds.Sequence(sds.Value("string")), "matrix": sds.Array2D((2, 3), "float32"),
            "image": sds.Image(), "label": sds.ClassLabel(names=["a", "b", "c"]),
            "meta": {"score": sds.Value("float64"), "name": sds.Value("string")},
        }))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        rng = np.random.default_rng(0)
        for i in range(240):
            yield i, {"text": f"row {i} " + "é" * (i % 7), "tokens": list(range(i % 11)),
                      "tags": [f"t{j}" for j in range(i % 4)], "matrix": np.full((2, 3), i, np.float32),
                      "image": rng.integers(0, 255, (4 + i % 5, 5, 3), dtype=np.uint8),
                      "label": i % 3, "meta": {"score": i / 7, "name": f"n{i}"}}


def _tars(root: Path) -> list[Path]:
    import gzip
    import io
    import tarfile

    import cv2
    import numpy as np

    from stable_datasets.interleaved.tar_format import TarWriter

    png = cv2.imencode(".png", np.arange(48, dtype=np.uint8).reshape(4, 4, 3))[1].tobytes()
    plain = root / "plain.tar"
    writer = TarWriter(open(plain, "wb"))  # noqa: SIM115 - closed by TarWriter.close
    for i in range(6):
        key = f"doc{i}" if i % 2 else "deep/" * 25 + f"doc{i}"  # names over 100 bytes get PAX records
        writer.add(f"{key}.json", json.dumps({"texts": [f"hello {i}", None], "images": [None, f"{key}.0.png"],
                                              "url": f"u{i}"}).encode())
        writer.add(f"{key}.0.png", png)
    writer.close()
    pax = root / "pax.tar"  # written by Python's tarfile: PAX headers with mtime/uid records
    with tarfile.open(pax, "w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(4):
            for name, data in ((f"s{i}.json", json.dumps({"texts": ["x"] * 2, "images": [None, None]}).encode()),
                               (f"s{i}.png", png)):
                info = tarfile.TarInfo(name)
                info.size, info.pax_headers = len(data), {"comment": "é" * (i + 1)}
                tar.addfile(info, io.BytesIO(data))
    gz = root / "plain.tar.gz"  # the same tar gzipped: the reader decompresses it first
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    return [plain, pax, gz]


def build_targets(root: Path) -> dict[str, Path]:
    """{kind: a cache directory, or a tar file} to corrupt."""
    os.environ.setdefault("STABLE_DATASETS_DISABLE_PROGRESS", "1")
    from loguru import logger

    import stable_datasets as sds

    logger.disable("stable_datasets")
    builder = FuzzRows
    shard_options = {"arrow": {"max_shard_size": 8 << 10}, "parquet": {"max_shard_size": 8 << 10},
                     "lance": {"max_rows_per_file": 80}}
    targets = {kind: sds.load_dataset(builder, split="train", storage_format=kind, cache_dir=root,
                                      layout_options=options).cache_dirs[0]
               for kind, options in shard_options.items()}
    targets["video frames"] = sds.load_dataset("moving_digits", name="frames", split="train", cache_dir=root,
                                               train_videos=3, test_videos=1, num_frames=6).cache_dirs[0]
    tars = _tars(root)
    targets["tar"], targets["tar (PAX)"], targets["tar.gz"] = tars
    return {k: Path(v) for k, v in targets.items()}


# -- one case, in a forked child ---------------------------------------------------------------
def read_everything(kind: str, target: Path) -> None:
    import numpy as np

    from stable_datasets.interleaved import InterleavedWebdatasetReader

    if kind.startswith("tar"):
        InterleavedWebdatasetReader(target, materialize_on_read=True).read()
        return
    from stable_datasets import open_cache

    ds = open_cache(target)
    n = len(ds)
    for i in range(0, n, 1 if kind in ("arrow", "parquet") else 9):  # a Lance row is a Rust call: every 9th
        ds[i]
    everything = list(range(n))
    ds.__getitems__(everything[::-1])
    ds[np.arange(n)[::3]]
    ds.with_format("arrow")[everything[::-2]]
    for _ in ds.iter(batch_size=64):
        pass


def _child(kind: str, target: Path) -> int:
    from stable_datasets.errors import StableDatasetsError

    try:
        read_everything(kind, target)
    except StableDatasetsError:
        return 10
    except Exception as exc:
        sys.stderr.write(f"{type(exc).__name__}: {str(exc)[:300]}\n")
        return 11
    return 0


def run_case(kind: str, target: Path, timeout: float) -> tuple[str, str]:
    """Fork, read, classify. Returns (outcome, detail)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: silence, read, report through the exit code
        os.close(read_fd)
        os.dup2(write_fd, 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        code = 12
        try:
            code = _child(kind, target)
        finally:
            os._exit(code)
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_fd)
            return "hang", f"no exit after {timeout:.0f}s"
        time.sleep(0.002)
    detail = os.read(read_fd, 4096).decode("utf-8", "replace").strip()
    os.close(read_fd)
    if os.WIFSIGNALED(status):
        return "crash", f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return EXIT_CODES.get(os.WEXITSTATUS(status), "other exception"), detail


def _files(kind: str, target: Path) -> list[Path]:
    if target.is_file():
        return [target]
    return sorted(p for p in target.rglob("*") if p.is_file() and p.name != "_metadata.json")


def corrupt(rng: random.Random, data: bytes) -> bytes:
    """One to four bytes overwritten; half the time near either end (headers, footers)."""
    damaged = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 4))):
        if rng.random() < 0.5:
            edge = min(4096, len(data))
            position = rng.randrange(edge) if rng.random() < 0.5 else len(data) - 1 - rng.randrange(edge)
        else:
            position = rng.randrange(len(data))
        new = rng.randrange(256)
        damaged[position] = new if new != data[position] else new ^ 0xFF
    return bytes(damaged)


def fuzz(targets: dict[str, Path], cases: int, seed: int, timeout: float = 30.0) -> dict[str, dict]:
    """`cases` corruptions per kind; {kind: {"tried", outcome counts, "examples": first details}}."""
    import lance  # noqa: F401 - its import (pandas, pyarrow.dataset) cost each Lance child ~0.45 s; it starts no threads

    import stable_datasets.load  # noqa: F401 - imported once here so every forked child starts warm
    from stable_datasets.interleaved import InterleavedWebdatasetReader  # noqa: F401

    rng = random.Random(seed)
    results = {}
    for kind, target in targets.items():
        assert run_case(kind, target, timeout)[0] == "ok", f"{kind}: the clean copy must read"
        files = _files(kind, target)
        counts: Counter = Counter()
        examples: dict[str, list[str]] = {}
        started = time.monotonic()
        for _ in range(cases):
            path = rng.choice(files)
            original = path.read_bytes()
            if not original:
                continue
            path.write_bytes(corrupt(rng, original))
            try:
                outcome, detail = run_case(kind, target, timeout)
            finally:
                path.write_bytes(original)
            counts[outcome] += 1
            if outcome not in ("ok", "our error") and len(examples.setdefault(outcome, [])) < 5:
                examples[outcome].append(f"{path.relative_to(target.parent)}: {detail}")
        results[kind] = {"tried": sum(counts.values()), **{o: counts[o] for o in OUTCOMES}, "examples": examples,
                         "seconds": round(time.monotonic() - started, 1)}
    return results


def validation_cost(gigabytes: float = 1.0) -> dict:
    """The one-time cost of validating shards on first open, and `ds[i]` with and without it:
    measured by benchmarks/bench_shard_validation.py (see there)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))
    from bench_shard_validation import measure

    return measure(gigabytes)


def table(results: dict[str, dict]) -> str:
    lines = ["| layout | corruptions tried | read fine (damage unread) | our error | other exception | crashes "
             "| hangs |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, r in results.items():
        lines.append(f"| {kind} | {r['tried']} | {r['ok']} | {r['our error']} | {r['other exception']} | "
                     f"{r['crash']} | {r['hang']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=2000, help="corruptions per layout")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a case counts as a hang")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--kinds", nargs="*", help="only these kinds (arrow, parquet, lance, 'video frames', tar)")
    parser.add_argument("--cost-gb", type=float, default=0.0, help="also measure validation cost on this many GB")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fuzz-"))
    # build in a fresh process: the parent must not start thread pools before it forks children
    listing = subprocess.run([sys.executable, __file__, "--build-only", str(root)], capture_output=True, text=True)
    if listing.returncode:
        sys.exit(f"building the caches failed:\n{listing.stderr}")
    targets = {k: Path(v) for k, v in json.loads(listing.stdout.strip().splitlines()[-1]).items()
               if not args.kinds or k in args.kinds}
    started = time.monotonic()
    results = fuzz(targets, args.cases, args.seed, args.timeout)
    elapsed = time.monotonic() - started
    cost = validation_cost(args.cost_gb) if args.cost_gb else None
    if args.json:
        print(json.dumps({"results": results, "seconds": elapsed, "validation": cost}))
    else:
        print(table(results))
        print(f"\n{sum(r['tried'] for r in results.values())} cases in {elapsed:.0f}s")
        for kind, r in results.items():
            for outcome, examples in r["examples"].items():
                print(f"{kind} {outcome}:", *examples, sep="\n    ")
        if cost:
            print(json.dumps(cost, indent=1))
    if any(r["crash"] or r["hang"] for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--build-only":
        print(json.dumps({k: str(v) for k, v in build_targets(Path(sys.argv[2])).items()}))
    else:
        main()
