"""csv/json loaders with `features=`: the cost of casting as HF casts, at sizes ten times apart, vs HF `datasets`.

    python benchmarks/bench_feature_casts.py --rows 200000 2000000 --rounds 3

Each size writes one CSV and one JSON Lines file of `--rows` rows with three columns: `a` holds
integers written as digits (`17`), `b` the same integers written as whole floats (`17.0`), `c`
integers that the features name as a string column. The features say `a: int64`, `b: int32`,
`c: string`, so `b` and `c` are real casts (a float text into an int column, a number into a
string), `a` only a check. Each library builds into an empty cache, in turns (ours, theirs, ours,
...) for `--rounds` rounds; the table gives the best wall time of each and what one more row costs
(the time divided by the rows), so a cost that grows faster than the rows shows as a rising
per-row figure between the sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import best_of_each, print_table, quiet, work_dir


def write_inputs(folder: Path, rows: int) -> dict[str, Path]:
    """The same rows as CSV and as JSON Lines."""
    csv_path, json_path = folder / f"rows-{rows}.csv", folder / f"rows-{rows}.jsonl"
    with open(csv_path, "w") as fh:
        fh.write("a,b,c\n")
        fh.writelines(f"{i},{i}.0,{i % 1000}\n" for i in range(rows))
    with open(json_path, "w") as fh:
        fh.writelines(json.dumps({"a": i, "b": float(i), "c": i % 1000}) + "\n" for i in range(rows))
    return {"csv": csv_path, "json": json_path}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import datasets

    import stable_datasets as sds

    quiet()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    ours_features = sds.Features({"a": sds.Value("int64"), "b": sds.Value("int32"), "c": sds.Value("string")})
    hf_features = datasets.Features({"a": datasets.Value("int64"), "b": datasets.Value("int32"),
                                     "c": datasets.Value("string")})
    root = work_dir("bench-feature-casts-")
    caches = count()
    table = []
    for rows in args.rows:
        inputs = write_inputs(root, rows)
        for loader, path in inputs.items():
            def ours(loader=loader, path=path, rows=rows) -> None:
                ds = sds.load_dataset(loader, data_files=str(path), split="train", features=ours_features,
                                      cache_dir=str(root / f"ours-{next(caches)}"))
                assert ds[rows - 1] == {"a": rows - 1, "b": rows - 1, "c": str((rows - 1) % 1000)}

            def theirs(loader=loader, path=path, rows=rows) -> None:
                ds = datasets.load_dataset(loader, data_files=str(path), split="train", features=hf_features,
                                           cache_dir=str(root / f"hf-{next(caches)}"))
                assert ds[rows - 1] == {"a": rows - 1, "b": rows - 1, "c": str((rows - 1) % 1000)}

            mine, hf = best_of_each([ours, theirs], args.rounds)
            table.append((loader, f"{rows:,}", f"{mine:.2f}", f"{hf:.2f}", f"{mine / rows * 1e6:.2f}",
                          f"{hf / rows * 1e6:.2f}", f"{hf / mine:.1f}x"))
    print(f"datasets {datasets.__version__}; best of {args.rounds}, in turns")
    print_table(["loader", "rows", "ours s", "HF s", "ours µs/row", "HF µs/row", "speedup"], table,
                right=(1, 2, 3, 4, 5, 6))


if __name__ == "__main__":
    main()
