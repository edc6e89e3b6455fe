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


def make_stl10(scale: float, path: Path) -> None:
    """stl10_binary.tar.gz: <split>_X.bin (N x 3 x 96 x 96, column-major planes) and <split>_y.bin (labels 1-10);
    train and test at `scale`, the 100,000 unlabeled images at a tenth of it (upstream builds every split)."""
    rng = np.random.default_rng(3)
    members = {}
    for split, rows in (("train", 5_000), ("test", 8_000), ("unlabeled", 10_000)):
        n = int(rows * scale)
        members[f"stl10_binary/{split}_X.bin"] = rng.integers(0, 256, (n, 3 * 96 * 96), dtype=np.uint8).tobytes()
        if split != "unlabeled":
            members[f"stl10_binary/{split}_y.bin"] = rng.integers(1, 11, n, dtype=np.uint8).tobytes()
    _tar(path, members)


def make_dsprites(scale: float, path: Path) -> None:
    """The dSprites .npz: imgs (N, 64, 64) 0/1, latents_classes and latents_values (N, 6), and the pickled
    `metadata` member the official file has (written here; our reader never unpickles it)."""
    n = int(737_280 * scale)
    rng = np.random.default_rng(4)
    shapes = (rng.random((n, 64, 64)) < 0.1).astype(np.uint8)
    classes = rng.integers(0, 3, (n, 6), dtype=np.int64)
    np.savez_compressed(path, imgs=shapes, latents_classes=classes, latents_values=classes.astype(np.float64),
                        metadata=np.array({"description": "synthetic"}, dtype=object))
    written = path.with_name(path.name + ".npz")  # numpy adds the suffix to a name that lacks it
    if written.exists():
        written.rename(path)


def make_speech_commands(scale: float, path: Path) -> None:
    """speech_commands_v0.01.tar.gz: <word>/<speaker>_nohash_<n>.wav, one second of 16 kHz 16-bit mono each."""
    import wave

    words = ["bed", "bird", "cat", "dog", "down", "eight", "five", "four", "go", "happy"]
    rng = np.random.default_rng(5)
    t = np.arange(16_000) / 16_000
    members = {}
    for i in range(int(64_727 * scale)):
        tone = 3000 * np.sin(2 * np.pi * (200 + 7 * (i % 97)) * t) + rng.normal(0, 300, t.size)
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16_000)
            w.writeframes(tone.astype("<i2").tobytes())
        members[f"./{words[i % len(words)]}/{i:08x}_nohash_{i % 5}.wav"] = buf.getvalue()
    _tar(path, members)


def make_food101(scale: float, ours: Path, upstream_train: Path, upstream_test: Path) -> None:
    """The same JPEGs twice: ours the official food-101.tar.gz (images/<class>/<id>.jpg and meta/{train,test}.txt),
    upstream its repackaging (food101_{train,test}.tar of <class>/<id>.jpg, uncompressed)."""
    import cv2

    from stable_datasets.images.food101 import LABELS

    rng = np.random.default_rng(6)
    per_class = {"train": max(1, int(750 * scale)), "test": max(1, int(250 * scale))}
    jpegs: dict[str, dict[str, bytes]] = {"train": {}, "test": {}}
    y, x = np.mgrid[0:128, 0:128]
    for split, count in per_class.items():
        for label in LABELS:
            for i in range(count):
                base = (x * rng.integers(1, 3) + y * rng.integers(1, 3)) % 256
                image = np.dstack([base, 255 - base, (base + rng.integers(0, 256)) % 256]).astype(np.uint8)
                image = cv2.add(image, rng.integers(0, 40, image.shape, dtype=np.uint8))
                jpegs[split][f"{label}/{split}{i:05d}"] = cv2.imencode(".jpg", image)[1].tobytes()
    members = {f"food-101/meta/{split}.txt": "\n".join(jpegs[split]).encode() + b"\n" for split in jpegs}
    for split in jpegs:
        members.update({f"food-101/images/{name}.jpg": data for name, data in jpegs[split].items()})
    _tar(ours, members)
    for split, path in (("train", upstream_train), ("test", upstream_test)):
        with tarfile.open(path, "w") as archive:
            for name, data in jpegs[split].items():
                info = tarfile.TarInfo(f"{name}.jpg")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))


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
    "food101": {
        "class": ("images", "Food101"),
        "files": {"http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz": "ours",
                  "https://huggingface.co/datasets/haodoz0118/food101-img/resolve/main/food101_train.tar": "upstream",
                  "https://huggingface.co/datasets/haodoz0118/food101-img/resolve/main/food101_test.tar": "upstream"},
        "make": lambda scale, paths: make_food101(scale, *paths),
    },
    "stl10": {
        "class": ("images", "STL10"),
        "files": {"https://cs.stanford.edu/~acoates/stl10/stl10_binary.tar.gz": "both"},
        "make": lambda scale, paths: make_stl10(scale, paths[0]),
    },
    "dsprites": {
        "class": ("images", "DSprites"),
        "files": {"https://github.com/google-deepmind/dsprites-dataset/raw/refs/heads/master/"
                  "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz": "both"},
        "make": lambda scale, paths: make_dsprites(scale, paths[0]),
    },
    "speech_commands": {
        "class": ("timeseries", "SpeechCommands"),
        "column": "series",
        "files": {"http://download.tensorflow.org/data/speech_commands_v0.01.tar.gz": "both"},
        "make": lambda scale, paths: make_speech_commands(scale, paths[0]),
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
        ds = splits["train"] if "train" in splits else next(iter(splits.values()))
        out["reopen_ms"] = seconds * 1000
        rng = np.random.default_rng(0)
        column = DATASETS[args.dataset].get("column", "image")
        picks = rng.integers(0, len(ds), 2000).tolist()
        started = time.perf_counter()
        for i in picks:
            np.asarray(ds[i][column])
        out["getitem_us"] = (time.perf_counter() - started) / len(picks) * 1e6
        out["loader_s"] = loader_epoch(ds, min(10_000, len(ds)), column)
        out["read_rss_mib"] = peak_rss_mib()
    print(json.dumps(out))


class _Collate:
    """A batch of one column's cells as arrays (a picklable callable, for the workers)."""

    def __init__(self, column: str):
        self.column = column

    def __call__(self, rows: list[dict]) -> list[np.ndarray]:
        return [np.asarray(r[self.column]) for r in rows]


def loader_epoch(ds, rows: int, column: str) -> float:
    import torch
    from torch.utils.data import DataLoader, Subset

    loader = DataLoader(Subset(ds, range(rows)), batch_size=256, shuffle=True, num_workers=2,
                        collate_fn=_Collate(column), generator=torch.Generator().manual_seed(0))
    started = time.perf_counter()
    seen = sum(len(batch) for batch in loader)
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
