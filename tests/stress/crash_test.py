"""Crash harness: SIGKILL a building process at random points, then load and verify.

    python tests/stress/crash_test.py --kills 30

For each layout (Arrow, Lance, Parquet, and Lance video frames built from `moving_digits`):
time one uninterrupted build, then for each trial start a build in a fresh cache root, kill
it with SIGKILL at a random moment spread over that time, and load the split in a new
process (which resumes from the journal where the layout supports it). Every load must
succeed with the right rows, and every published cache must pass verify. The suite runs a
small version of this (tests/behaviour/test_crash_safety.py).
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
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
from tests.conftest import TOY_BUILDER  # noqa: E402

ROWS = 3000
LAYOUTS = {
    "arrow": {"max_shard_size": 32 << 10, "batch_rows": 50},
    "lance": {"batch_rows": 50, "max_rows_per_file": 400},
    "parquet": {"max_shard_size": 32 << 10, "batch_rows": 50, "row_group_bytes": 8 << 10},
    "video_frames": {},
}

VIDEOS = 40  # moving_digits videos for the video-frames layout

LOAD = textwrap.dedent("""
    import json, sys
    import stable_datasets as sds
    from stable_datasets.layouts.open import verify_cache
    from stable_datasets.cache.journal import JOURNAL_FILE
    from pathlib import Path
    script, fmt, options, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    root = Path(sys.argv[5])
    resumable = any((p / JOURNAL_FILE).exists() for p in root.rglob(".staging-train/.part-*"))
    if fmt == "video_frames":
        ds = sds.load_dataset("moving_digits", name="frames", split="train", train_videos=rows, test_videos=1)
        ok_rows = ds.cache_metadata[0].extra["num_videos"] == rows and len(ds) == 2 * rows
    else:
        ds = sds.load_dataset(script, split="train", rows=rows, storage_format=fmt, layout_options=options)
        ok_rows = ds["id"] == list(range(rows))
    problems = verify_cache(ds.cache_dirs[0])
    print(json.dumps({"rows_ok": ok_rows, "problems": problems, "had_journal": resumable}))
""")


def run_build(script: Path, root: Path, fmt: str, options: dict, kill_after: float | None) -> int:
    if fmt == "video_frames":
        code = ("import stable_datasets as sds\n"
                f"sds.load_dataset('moving_digits', name='frames', split='train', train_videos={VIDEOS}, "
                "test_videos=1)\n")
    else:
        code = (f"import stable_datasets as sds\n"
                f"sds.load_dataset({str(script)!r}, split='train', rows={ROWS}, storage_format={fmt!r}, "
                f"layout_options={options!r})\n")
    env = {**os.environ, "STABLE_DATASETS_CACHE_DIR": str(root), "TOY_SLEEP": "0.0003"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    if kill_after is None:
        return proc.wait()
    try:
        return proc.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        return proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="crash-"))
    script = work / "toy.py"
    script.write_text(TOY_BUILDER)
    summary = {}
    for fmt, options in LAYOUTS.items():
        started = time.monotonic()
        run_build(script, work / f"timing-{fmt}", fmt, options, None)
        duration = time.monotonic() - started
        survived = resumed = killed = 0
        failures = []
        for trial in range(args.kills):
            root = work / f"{fmt}-{trial}"
            kill_after = rng.uniform(0.05, 1.0) * duration
            code = run_build(script, root, fmt, options, kill_after)
            killed += code == -signal.SIGKILL
            rows = VIDEOS if fmt == "video_frames" else ROWS
            load = subprocess.run([sys.executable, "-c", LOAD, str(script), fmt, json.dumps(options), str(rows),
                                   str(root)], env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(root)},
                                  capture_output=True, text=True)
            try:
                result = json.loads(load.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                failures.append(f"trial {trial}: load failed: {load.stderr[-500:]}")
                continue
            if result["rows_ok"] and not result["problems"]:
                survived += 1
                resumed += result["had_journal"]
            else:
                failures.append(f"trial {trial}: {result}")
        summary[fmt] = {"trials": args.kills, "killed_mid_build": killed, "loads_ok_and_verified": survived,
                        "resumed_from_journal": resumed, "build_seconds": round(duration, 2), "failures": failures}
    print(json.dumps(summary, indent=2))
    print("\n| layout | builds killed mid-build / trials | loads that succeeded and verified | "
          "resumed from a journal |")
    print("| --- | ---: | ---: | ---: |")
    for fmt, s in summary.items():
        print(f"| {fmt} | {s['killed_mid_build']} / {s['trials']} | {s['loads_ok_and_verified']} / {s['trials']} | "
              f"{s['resumed_from_journal']} |")
    if any(s["failures"] for s in summary.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
