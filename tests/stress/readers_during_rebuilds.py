"""Readers during rebuilds: one process republishes a split while others load it in a loop.

    python tests/stress/readers_during_rebuilds.py --seconds 60 --readers 5

For each layout (Arrow, Parquet, Lance, Lance video frames) one process runs
`load_dataset(..., download_mode="force_rebuild")` over and over, each build tagging its rows
with a new value (`BUILD_TAG`, deliberately not fingerprinted), while the readers call
`load_dataset` and read every row. A load must return one whole build (every row there, one
tag) or fail; the failures must be 0. tests/behaviour/test_readers_during_rebuilds.py runs a short one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROWS = 40
LAYOUTS = ("arrow", "parquet", "lance", "video_frames")

TAGGED_BUILDER = textwrap.dedent('''
    import os
    from dataclasses import dataclass
    import stable_datasets as sds

    @dataclass
    class TaggedConfig(sds.BuilderConfig):
        rows: int = 40
        video: str = ""  # a clip's path: adds a Video(storage="frames") column (the video frames layout)

    class Tagged(sds.GeneratorBasedBuilder):
        BUILDER_CONFIG_CLASS = TaggedConfig

        def _info(self):
            features = {"id": sds.Value("int64"), "tag": sds.Value("string")}
            if self.config.video:
                features["clip"] = sds.Video(storage="frames")
            return sds.DatasetInfo(features=sds.Features(features))

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {})]

        def _generate_examples(self):
            tag = os.environ.get("BUILD_TAG", "first")  # not part of the fingerprint: tells builds apart
            for i in range(self.config.rows):
                example = {"id": i, "tag": tag}
                if self.config.video:
                    example["clip"] = self.config.video
                yield i, example
''')

# argv: builder script, layout, clip path, rows, seconds ("rebuild" mode: number of builds)
WORKER = textwrap.dedent('''
    import json, os, sys, time, traceback
    import stable_datasets as sds

    script, layout, clip, rows, mode, amount = sys.argv[1:7]
    rows, amount = int(rows), float(amount)
    kwargs = dict(split="train", rows=rows, video=clip if layout == "video_frames" else "",
                  storage_format="arrow" if layout == "video_frames" else layout)

    def check(ds):
        """One whole build: every row, in order, all with one tag."""
        table = ds.with_format("arrow").select_columns(["id", "tag"])[:]
        ids, tags = table.column("id").to_pylist(), set(table.column("tag").to_pylist())
        expected = list(range(rows))
        if layout != "video_frames" and ids != expected or len(ds) != rows or len(tags) != 1:
            raise AssertionError(f"mixed or partial rows: {len(ds)} rows, ids {ids[:5]}..., tags {sorted(tags)}")
        return tags.pop()

    if mode.startswith("rebuild"):  # "rebuild": `amount` builds; "rebuild-for": builds for `amount` seconds
        deadline, n = time.monotonic() + amount, 0
        while (n < amount) if mode == "rebuild" else (time.monotonic() < deadline):
            os.environ["BUILD_TAG"] = f"build-{n}"
            assert check(sds.load_dataset(script, download_mode="force_rebuild", **kwargs)) == f"build-{n}"
            n += 1
        print(json.dumps({"builds": n}))
    else:
        tried = failed = 0
        seen, errors = set(), []
        deadline = time.monotonic() + amount
        stop_file = mode  # readers stop when the rebuilder is done (the file appears) or at the deadline
        while time.monotonic() < deadline and not os.path.exists(stop_file):
            tried += 1
            try:
                seen.add(check(sds.load_dataset(script, **kwargs)))
            except Exception:
                failed += 1
                errors.append(traceback.format_exc(limit=3))
        print(json.dumps({"tried": tried, "failed": failed, "tags": sorted(seen), "errors": errors[:3]}))
''')


def make_clip(path: Path) -> Path:
    """A 12-frame 32x48 MP4 (with window_length 8, one window per video)."""
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (48, 32), True)
    for t in range(12):
        frame = np.zeros((32, 48, 3), np.uint8)
        frame[2 * t:2 * t + 6, 2 * t:2 * t + 6] = 255
        writer.write(frame)
    writer.release()
    return path


def prepare(folder: Path) -> tuple[Path, Path]:
    """The tagged builder script and a clip, written under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "tagged.py"
    script.write_text(TAGGED_BUILDER)
    return script, make_clip(folder / "clip.mp4")


def run_layout(layout: str, folder: Path, cache: Path, *, readers: int, builds: int = 0, seconds: float = 0,
               rows: int = ROWS) -> dict:
    """One rebuilder doing `builds` force_rebuilds (or rebuilding for `seconds`) while `readers` processes
    load in a loop; what they counted."""
    script, clip = prepare(folder)
    env = {**os.environ, "STABLE_DATASETS_CACHE_DIR": str(cache), "STABLE_DATASETS_DISABLE_PROGRESS": "1"}
    base = [sys.executable, "-c", WORKER, str(script), layout, str(clip), str(rows)]
    first = subprocess.run([*base, "rebuild", "1"], env=env, capture_output=True, text=True)
    if first.returncode:
        raise RuntimeError(f"first build failed: {first.stderr[-2000:]}")
    done = folder / f"rebuilder-done-{layout}"
    done.unlink(missing_ok=True)
    reader_procs = [subprocess.Popen([*base, str(done), "3600"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for _ in range(readers)]
    started = time.monotonic()
    plan = ["rebuild", str(builds)] if builds else ["rebuild-for", str(seconds)]
    rebuilder = subprocess.run([*base, *plan], env=env, capture_output=True, text=True)
    rebuild_seconds = time.monotonic() - started
    done.touch()
    results = []
    for proc in reader_procs:
        out, err = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"a reader died: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    if rebuilder.returncode:
        raise RuntimeError(f"the rebuilder failed: {rebuilder.stderr[-2000:]}")
    return {"layout": layout, "builds": json.loads(rebuilder.stdout.strip().splitlines()[-1])["builds"],
            "seconds": round(rebuild_seconds, 1), "readers": readers,
            "tried": sum(r["tried"] for r in results), "failed": sum(r["failed"] for r in results),
            "tags_seen": len(set().union(*(r["tags"] for r in results))),
            "errors": [e for r in results for e in r["errors"]][:3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the rebuilder keeps rebuilding")
    parser.add_argument("--readers", type=int, default=5)
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    args = parser.parse_args()
    for layout in args.layouts:
        with tempfile.TemporaryDirectory() as tmp:
            result = run_layout(layout, Path(tmp) / "work", Path(tmp) / "cache", readers=args.readers,
                                seconds=args.seconds)
            print(json.dumps(result), flush=True)

if __name__ == "__main__":
    main()
