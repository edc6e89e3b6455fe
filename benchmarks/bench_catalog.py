"""The catalog against upstream stable-datasets, on its own datasets: the same full-size files in the real formats,
built by upstream's own builder code and by ours, side by side (issue 34, part 7).

    git -C <upstream clone> archive HEAD | tar -x -C /tmp/upstream-src     # galilai-group/stable-datasets
    pip install rich requests gdown rarfile matplotlib                      # upstream's imports, beside ours
    python benchmarks/bench_catalog.py --upstream /tmp/upstream-src --datasets cifar100,svhn

Files: synthetic pixels and labels (random, seeded) written in each dataset's official format and layout, at
the official row counts (`--scale` shrinks them; SVHN's "extra" split is kept at 1% on both sides, since
upstream builds every split whenever one is asked for). Where upstream reads another official file than ours
(CIFAR-100: upstream the pickled "python" archive, we the binary one), each side gets its own, holding the same
rows. The files are put where each side's downloader looks first, so no download is timed.

Each side runs in fresh subprocesses (upstream's package is importable only in its own: both are named
`stable_datasets`): a build of every split (wall time, peak RSS), then a reader that reopens the built cache (the
call again, a cache hit), reads `ds[i]` of 2,000 random rows with the image decoded to a uint8 array, and one
shuffled epoch of 10,000 rows through `torch.utils.data.DataLoader(batch_size=256, num_workers=2)`. Both sides
write Arrow (upstream's default); ours verification_mode="no_checks" (the files are not the official ones).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import pickle
import resource
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


# -- files in the real formats --------------------------------------------------------------------------------
def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _cifar100(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (rows, 3072), dtype=np.uint8), rng.integers(0, 100, rows, dtype=np.uint8),
            rng.integers(0, 20, rows, dtype=np.uint8))


def make_cifar100(scale: float, ours: Path, upstream: Path) -> None:
    """Ours: cifar-100-binary.tar.gz (coarse, fine, pixels a record); upstream: cifar-100-python.tar.gz (a pickled
    dict per split, as the official one; written here, never read by us)."""
    splits = {"train": _cifar100(int(50_000 * scale), 1), "test": _cifar100(int(10_000 * scale), 2)}
    _tar(ours, {f"cifar-100-binary/{s}.bin": np.concatenate([c[:, None], f[:, None], x], 1).tobytes()
                for s, (x, f, c) in splits.items()})
    _tar(upstream, {f"cifar-100-python/{s}": pickle.dumps({"data": x, "fine_labels": f.tolist(),
                                                           "coarse_labels": c.tolist()})
                    for s, (x, f, c) in splits.items()})


def make_svhn_file(rows: int, seed: int, path: Path) -> None:
    import scipy.io

    rng = np.random.default_rng(seed)
    scipy.io.savemat(path, {"X": rng.integers(0, 256, (32, 32, 3, rows), dtype=np.uint8),
                            "y": rng.integers(1, 11, (rows, 1), dtype=np.uint8)})


DATASETS = {
    "cifar100": {
        "class": ("images", "CIFAR100"),
        "files": {"https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz": "ours",
                  "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz": "upstream"},
        "make": lambda scale, paths: make_cifar100(scale, *paths),
    },
    "svhn": {
        "class": ("images", "SVHN"),
        "files": {f"http://ufldl.stanford.edu/housenumbers/{s}_32x32.mat": "both" for s in ("train", "test", "extra")},
        "make": lambda scale, paths: [make_svhn_file(int(n * scale), i, p) for i, (n, p) in
                                      enumerate(zip((73_257, 26_032, 5_311), paths))],
    },
}


def ours_destination(download_dir: Path, url: str) -> Path:
    """Where our DownloadManager looks for a download of `url` (download/manager.py: destination)."""
    return download_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{url.rsplit('/', 1)[-1]}"


def upstream_destination(download_dir: Path, url: str) -> Path:
    """Where upstream's downloader looks first (its utils.download: `<stem>.<sha256(url)[:10]><suffix>`)."""
    name = Path(url.rsplit("/", 1)[-1])
    return download_dir / f"{name.stem}.{hashlib.sha256(url.encode()).hexdigest()[:10]}{name.suffix}"


def prepare_files(dataset: str, scale: float, work: Path) -> None:
    spec = DATASETS[dataset]
    paths = []
    for url, side in spec["files"].items():
        first = ours_destination(work / "ours" / "downloads", url) if side in ("ours", "both") else \
            upstream_destination(work / "upstream" / "downloads", url)
        first.parent.mkdir(parents=True, exist_ok=True)
        paths.append(first)
    spec["make"](scale, paths)
    for url, side in spec["files"].items():  # a file both sides read is written once, linked for the other
        if side == "both":
            target = upstream_destination(work / "upstream" / "downloads", url)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(ours_destination(work / "ours" / "downloads", url), target)


# -- one side in its own process --------------------------------------------------------------------------------
def peak_rss_mib() -> float:
    """This process's own peak RSS (VmHWM): getrusage's ru_maxrss would start from the parent's peak at fork."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args: argparse.Namespace) -> None:
    package, class_name = DATASETS[args.dataset]["class"]
    module = __import__(f"stable_datasets.{package}", fromlist=[class_name])
    cls = getattr(module, class_name)
    side_dir = Path(args.workdir) / args.side
    kwargs = {"processed_cache_dir": str(side_dir / "processed"), "download_dir": str(side_dir / "downloads")}
    if args.side == "ours":
        from loguru import logger

        os.environ["STABLE_DATASETS_DISABLE_PROGRESS"] = "1"
        logger.disable("stable_datasets")
        kwargs["verification_mode"] = "no_checks"
    started = time.perf_counter()
    splits = cls(**kwargs)
    seconds = time.perf_counter() - started
    out: dict[str, float] = {}
    if args.phase == "build":
        out = {"build_s": seconds, "build_rss_mib": peak_rss_mib()}
    else:
        ds = splits["train"]
        out["reopen_ms"] = seconds * 1000
        rng = np.random.default_rng(0)
        picks = rng.integers(0, len(ds), 2000).tolist()
        started = time.perf_counter()
        for i in picks:
            np.asarray(ds[i]["image"])
        out["getitem_us"] = (time.perf_counter() - started) / len(picks) * 1e6
        out["loader_s"] = loader_epoch(ds, min(10_000, len(ds)))
        out["read_rss_mib"] = peak_rss_mib()
    print(json.dumps(out))


def _collate(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([np.asarray(r["image"]) for r in rows]), np.asarray([r["label"] for r in rows])


def loader_epoch(ds, rows: int) -> float:
    import torch
    from torch.utils.data import DataLoader, Subset

    loader = DataLoader(Subset(ds, range(rows)), batch_size=256, shuffle=True, num_workers=2, collate_fn=_collate,
                        generator=torch.Generator().manual_seed(0))
    started = time.perf_counter()
    seen = sum(len(labels) for _, labels in loader)
    assert seen == rows
    return time.perf_counter() - started


def run_side(side: str, dataset: str, phase: str, work: Path, upstream: Path) -> dict[str, float]:
    env = {**os.environ}
    if side == "upstream":
        env["PYTHONPATH"] = str(upstream)  # its stable_datasets before ours
    else:
        env["PYTHONPATH"] = str(HERE.parent)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--side", side, "--dataset", dataset,
           "--phase", phase, "--workdir", str(work)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
    if done.returncode != 0:
        raise RuntimeError(f"{side} {dataset} {phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", type=Path, help="a checkout of upstream stable-datasets (its source tree)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the official row counts")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("BENCH_DIR", "/tmp")) / "bench-catalog")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--side")
    parser.add_argument("--dataset")
    parser.add_argument("--phase")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.upstream is None or not (args.upstream / "stable_datasets" / "utils.py").is_file():
        parser.error("--upstream must name a source tree of upstream stable-datasets")
    results = {}
    for dataset in args.datasets.split(","):
        work = args.workdir / f"{dataset}-{args.scale}"
        if not work.exists():
            prepare_files(dataset, args.scale, work)
        row = {}
        for side in ("ours", "upstream"):  # each builds once, then reads in a fresh process
            row[side] = {**run_side(side, dataset, "build", work, args.upstream),
                         **run_side(side, dataset, "read", work, args.upstream)}
            print(dataset, side, row[side], file=sys.stderr, flush=True)
        results[dataset] = row
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    measures = [("build every split", "build_s", "s"), ("build peak RSS", "build_rss_mib", "MiB"),
                ("reopen (a cache hit)", "reopen_ms", "ms"), ("random ds[i], image decoded", "getitem_us", "µs"),
                ("DataLoader epoch, 10,000 rows", "loader_s", "s")]
    print("| dataset | measure | stable-datasets | upstream | unit | ours faster by |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    for dataset, row in results.items():
        for label, key, unit in measures:
            ours, theirs = row["ours"][key], row["upstream"][key]
            print(f"| {dataset} | {label} | {ours:.3g} | {theirs:.3g} | {unit} | {theirs / ours:.1f}x |")


if __name__ == "__main__":
    main()
