"""Lance layouts: our overhead over Lance's own `take`, Lance vs Arrow random access, and
video windows from the frame layout vs decoding the same windows from the source files.

    python benchmarks/bench_lance_video.py --rows 100000 --videos 300
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_arrow_vs_hf import BUILDER_SOURCE
from common import best_of_each, print_table, quiet, work_dir


def rows_section(workdir: Path, rows: int) -> list[tuple[str, float, float, str]]:
    import lance

    import stable_datasets as sds

    script = workdir / "rows.py"
    script.write_text(BUILDER_SOURCE.format(here=str(Path(__file__).resolve().parent), rows=rows))
    lance_ds = sds.load_dataset(str(script), split="train", storage_format="lance", cache_dir=workdir / "c")
    arrow_ds = sds.load_dataset(str(script), split="train", cache_dir=workdir / "c")
    lance_raw, arrow_raw = (d.with_format("python", decode=False) for d in (lance_ds, arrow_ds))
    native = lance.dataset(str(lance_ds.cache_dirs[0] / "data.lance"))
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, rows, 256) for _ in range(100)]
    singles = rng.integers(0, rows, 2000).tolist()
    lists = [b.tolist() for b in batches]

    def each(read, keys):
        def run():  # a training loop drops each batch before it asks for the next one
            for key in keys:
                read(key)
        return run

    t_ours, t_native = best_of_each([each(lance_raw.__getitems__, lists), each(native.take, batches)], repeats=11)
    out = [("Lance `__getitems__` (256 random rows, to Python rows) vs `lance.dataset().take` (to a Table)",
            t_ours / len(batches) * 1e3, t_native / len(batches) * 1e3, "ms/batch")]
    t_lance, t_arrow = best_of_each([each(lance_raw.__getitem__, singles), each(arrow_raw.__getitem__, singles)])
    out.append(("random `ds[i]`: Lance layout vs Arrow layout", t_lance / len(singles) * 1e6,
                t_arrow / len(singles) * 1e6, "µs/row"))
    t_lance, t_arrow = best_of_each([each(lance_raw.__getitems__, lists), each(arrow_raw.__getitems__, lists)])
    out.append(("random `__getitems__` of 256: Lance layout vs Arrow layout", t_lance / len(lists) * 1e3,
                t_arrow / len(lists) * 1e3, "ms/batch"))
    return out


def window_times(frames, files: list[str], rng: np.random.Generator, count: int) -> tuple[float, ...]:
    """Seconds for `count` random 8-frame windows: ours (batches of 16), OpenCV opening the source
    file, seeking and decoding each window, and ours with frame decoding on one thread; then the
    CPU seconds of ours and of OpenCV."""
    from stable_datasets.features.video import read_frames

    frames = frames.with_frame_windows(window_length=8, hop=1)
    picks = rng.integers(0, len(frames), count).tolist()
    coords = [(frames.backends[0]._win[i, 0], frames.backends[0]._win[i, 1]) for i in picks]
    batches = [picks[i:i + 16] for i in range(0, len(picks), 16)]

    def ours():
        for batch in batches:
            frames.__getitems__(batch)

    def opencv():
        for video, start in coords:
            read_frames(files[video], np.arange(start, start + 8))

    def ours_one_thread():
        os.environ["STABLE_DATASETS_DECODE_THREADS"] = "1"
        try:
            ours()
        finally:
            del os.environ["STABLE_DATASETS_DECODE_THREADS"]

    direct = read_frames(files[coords[0][0]], np.arange(coords[0][1], coords[0][1] + 8))
    assert frames[picks[0]]["video"].shape == direct.shape
    cpu = [(cpu_seconds(ours), cpu_seconds(opencv)) for _ in range(3)]  # in turns, the least of each
    return (*best_of_each([ours, opencv, ours_one_thread]), *(min(side) for side in zip(*cpu)))


def cpu_seconds(fn) -> float:
    """CPU seconds this process spends running `fn`, all its threads together."""
    import resource

    def spent() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    before = spent()
    fn()
    return spent() - before


class OpenCVWindows:
    """The reference as a torch Dataset: each window decoded from its source file with OpenCV."""

    def __init__(self, files: list[str], windows: np.ndarray):
        self.files, self.windows = files, windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> np.ndarray:
        from stable_datasets.features.video import read_frames

        video, start = self.windows[index]
        return read_frames(self.files[video], np.arange(start, start + 8))


def loader_times(frames, files: list[str], rng: np.random.Generator, count: int) -> tuple[float, float] | None:
    """Seconds for `count` random windows through torch DataLoaders (batches of 16, 2 workers each,
    kept alive between passes): ours, and OpenCV decoding the source files in the same workers."""
    try:
        import torch
    except ImportError:
        return None
    frames = frames.with_frame_windows(window_length=8, hop=1)
    picks = rng.integers(0, len(frames), count).tolist()
    ours = frames.with_format("torch", columns=["video"])
    theirs = OpenCVWindows(files, frames.backends[0]._win)
    loaders = [torch.utils.data.DataLoader(ds, batch_size=16, sampler=picks, num_workers=2, persistent_workers=True,
                                           prefetch_factor=4) for ds in (ours, theirs)]

    def run(loader):
        def one_pass():
            for _ in loader:
                pass
        return one_pass

    for loader in loaders:
        run(loader)()  # start the workers
    return tuple(best_of_each([run(loader) for loader in loaders], repeats=3))


def video_section(workdir: Path, videos: int) -> list[tuple[str, float, float, str]]:
    import stable_datasets as sds

    rng = np.random.default_rng(0)
    out = []
    # the builder's default clips (64x64, 20 frames) at two qualities, then longer and larger clips
    shapes = [(64, 20, videos, (90, "lossless")), (128, 100, max(videos // 5, 1), (90,)),
              (256, 150, max(videos // 10, 1), (90,))]
    for canvas, length, count, qualities in shapes:
        common = {"train_videos": count, "test_videos": 1, "cache_dir": workdir / "v", "canvas": canvas,
                  "num_frames": length}
        paths = sds.load_dataset("moving_digits", name="path", split="train", **common)
        files = [ref.path for ref in paths.select_columns(["video"])["video"]]
        clips = f"{count} clips of {length} frames, {canvas}x{canvas}"
        disk = {}
        for quality in qualities:
            frames = sds.load_dataset("moving_digits", name="frames", split="train",
                                      layout_options={"webp_quality": quality}, **common)
            disk[quality] = sum(f.stat().st_size for f in frames.cache_dirs[0].rglob("*") if f.is_file()) / 2**20
            picks = 2048 if canvas == 64 else 512
            t_ours, t_cv, t_single, cpu_ours, cpu_cv = window_times(frames, files, rng, picks)
            label = "WebP quality 90" if quality == 90 else "lossless WebP"
            out += [(f"random 8-frame windows ({clips}): frame layout, {label}, batches of 16 vs OpenCV from "
                     "the MP4 files", picks / t_ours, picks / t_cv, "windows/s"),
                    (f"the same, {label}, frame decoding on one thread", picks / t_single, picks / t_cv,
                     "windows/s")]
            if canvas == 64 and quality == 90:
                out.append((f"the same, {label}, CPU time of all threads", cpu_ours / picks * 1e6,
                            cpu_cv / picks * 1e6, "CPU µs/window"))
            timed = loader_times(frames, files, rng, picks) if canvas == 64 and quality == 90 else None
            if timed:
                out.append((f"the same, {label}, through torch DataLoaders (2 workers each)", picks / timed[0],
                            picks / timed[1], "windows/s"))
        if len(disk) == 2:
            out.append((f"frame cache on disk ({clips}): WebP quality 90 vs lossless", disk[90], disk["lossless"],
                        "MiB"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--videos", type=int, default=300)
    args = parser.parse_args()
    quiet()
    workdir = work_dir("bench-lance-")
    try:
        results = rows_section(workdir, args.rows) + video_section(workdir, args.videos)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    import lance

    print(f"\n{args.rows:,} rows of ~3 KB PNG + label; moving_digits videos (MP4, mp4v) as listed; "
          f"pylance {lance.__version__}, {os.cpu_count()} cores\n")
    print_table(["measure", "ours", "reference", "unit", "ratio (ours / reference)"],
                [(name, f"{ours:,.3g}", f"{ref:,.3g}", unit, f"{ours / ref:.2f}") for name, ours, ref, unit in results],
                right=(1, 2, 4))


if __name__ == "__main__":
    main()
