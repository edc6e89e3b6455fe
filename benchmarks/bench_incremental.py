"""Incremental rebuilds (issue 24 part 5): edit 1 of 200 input files and add 1, then load again.

    python benchmarks/bench_incremental.py --files 200 --rows 5000 --format json --repeats 3

Writes `files` JSONL (or CSV) files of `rows` rows each, loads them through a glob with
stable-datasets and with Hugging Face `datasets` (both into caches of their own), and then,
`repeats` times: edits one file (appends a row), adds one file, and loads again. An edit gives a
new fingerprint on both sides: Hugging Face builds everything again, stable-datasets reads only
the parts of the changed files and links the rest from the previous cache. Beside each
incremental load, the same data is built from scratch in an empty root (a full build), so the
ratio is measured on the very same files. Each side is checked: the incremental dataset equals the
full build row for row.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table, quiet, work_dir


def write_file(path: Path, rows: int, start: int, fmt: str, tag: str = "") -> None:
    with open(path, "w") as fh:
        if fmt == "csv":
            fh.write("id,text,score\n")
        for r in range(rows):
            row = {"id": start + r, "text": f"row {r} of {path.stem}{tag}: some words to read", "score": r * 0.5}
            fh.write(f"{row['id']},{row['text']},{row['score']}\n" if fmt == "csv" else json.dumps(row) + "\n")


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--format", choices=["json", "csv"], default="json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-hf", action="store_true", help="leave Hugging Face datasets out")
    args = parser.parse_args()
    quiet()
    import stable_datasets as sds

    work = work_dir("bench-incremental-")
    data = work / "data"
    data.mkdir()
    suffix = "jsonl" if args.format == "json" else "csv"
    for i in range(args.files):
        write_file(data / f"part-{i:05d}.{suffix}", args.rows, i * args.rows, args.format)
    pattern = str(data / f"*.{suffix}")
    total_bytes = sum(p.stat().st_size for p in data.iterdir())

    def ours(root: Path):
        return sds.load_dataset(args.format, data_files=pattern, split="train", cache_dir=str(root))

    def theirs(root: Path):
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
        return datasets.load_dataset(args.format, data_files=pattern, split="train", cache_dir=str(root))

    first, _ = timed(lambda: ours(work / "ours"))
    hf_first = None if args.no_hf else timed(lambda: theirs(work / "hf"))[0]
    rows = []
    for repeat in range(args.repeats):
        edited = data / f"part-{(repeat * 37) % args.files:05d}.{suffix}"
        write_file(edited, args.rows + 1, (repeat * 37) % args.files * args.rows, args.format, tag=f" edit {repeat}")
        write_file(data / f"part-{args.files + repeat:05d}.{suffix}", args.rows, (args.files + repeat) * args.rows,
                   args.format)
        incremental, again = timed(lambda: ours(work / "ours"))
        fresh_root = work / f"fresh-{repeat}"
        full, fresh = timed(lambda: ours(fresh_root))  # noqa: B023 (called at once)
        assert again.to_arrow().equals(fresh.to_arrow()), "the incremental build differs from a full build"
        shutil.rmtree(fresh_root)
        hf_after = None
        if not args.no_hf:
            hf_after, hf = timed(lambda: theirs(work / "hf"))
            assert len(hf) == len(again)
        rows.append((repeat, full, incremental, hf_after))

    print(f"{args.files} {args.format} files of {args.rows:,} rows ({total_bytes / 1e6:.0f} MB); each repeat edits 1 "
          f"file and adds 1; first build: stable-datasets {first:.2f} s" +
          ("" if hf_first is None else f", Hugging Face datasets {hf_first:.2f} s"))
    table = []
    for repeat, full, incremental, hf_after in rows:
        table.append((repeat + 1, f"{full:.2f}", f"{incremental:.3f}", f"{full / incremental:.1f}x",
                      "-" if hf_after is None else f"{hf_after:.2f}",
                      "-" if hf_after is None else f"{hf_after / incremental:.0f}x"))
    print_table(["repeat", "sds full build (s)", "sds after edit (s)", "full / incremental",
                 "HF after edit (s)", "HF / sds after edit"], table, right=(0, 1, 2, 3, 4, 5))
    best_full = min(r[1] for r in rows)
    best_incremental = min(r[2] for r in rows)
    print(f"best: full {best_full:.2f} s, incremental {best_incremental:.3f} s: {best_full / best_incremental:.1f}x "
          "(target >= 10x)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
