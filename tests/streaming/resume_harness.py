"""Resume checked at every step, as Grain checks it: run a stream to its end once recording every row,
then for every step k restore the state saved after k rows into a fresh stream object (and, for a
sample of k, into a fresh Python process) and compare the whole remaining suffix, row ids in order.

A configuration is a named factory in `CONFIGS`: `make(data_dir)` builds a fresh stream (the same
options each call), so a subprocess can build it by name from the state file alone. Rows carry an
`id` column; `row_id` turns a row (or a pack, or a loader batch) into what is compared.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

import stable_datasets as sds

ROWS = 24  # rows per standard source: small, so every step of every configuration runs in milliseconds


def row_id(row: Any) -> Any:
    """What a row is compared by: its `id`; a pack: the ids of the rows it packs (their first token)."""
    if isinstance(row, dict) and "seq_start_id" in row:
        return tuple(int(row["input_ids"][s]) for s in row["seq_start_id"])
    value = row["id"]
    if hasattr(value, "tolist"):
        value = value.tolist()
    return tuple(int(v) for v in value) if isinstance(value, list) else int(value)


def json_round_trip(state: dict[str, Any]) -> dict[str, Any]:
    """A state as a checkpoint file holds it (plain JSON: what a fresh process reads back)."""
    return json.loads(json.dumps(state))


def ids_source(n: int = ROWS, start: int = 0) -> sds.StableDataset:
    """Rows with ids start..start+n-1 (built once per cache root: the streams over it are the fresh objects)."""
    return _ids_source(n, start, os.environ.get("STABLE_DATASETS_CACHE_DIR"))


@functools.lru_cache(maxsize=32)
def _ids_source(n: int, start: int, cache_root: str | None) -> sds.StableDataset:
    return sds.StableDataset.from_dict({"id": list(range(start, start + n)), "text": [f"r{i}" for i in range(n)]})


def token_source(n: int = 30) -> sds.StableDataset:
    """Tokenized rows whose first token is the row id (so a pack names its rows), 2 to 4 tokens long."""
    return _token_source(n, os.environ.get("STABLE_DATASETS_CACHE_DIR"))


@functools.lru_cache(maxsize=4)
def _token_source(n: int, cache_root: str | None) -> sds.StableDataset:
    lengths = [2 + i % 3 for i in range(n)]
    return sds.StableDataset.from_dict({"input_ids": [[i] + [1] * (k - 1) for i, k in zip(range(n), lengths)],
                                        "loss_mask": [[1] * k for k in lengths]})


def write_files(data_dir: Path) -> dict[str, list[str]]:
    """3 JSON Lines and 3 CSV files of 8 rows each (ids 0..23), written once per folder."""
    data_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {"json": [], "csv": []}
    for part in range(3):
        ids = range(part * 8, part * 8 + 8)
        path = data_dir / f"part-{part}.jsonl"
        if not path.exists():
            path.write_text("".join(json.dumps({"id": i, "text": f"r{i}"}) + "\n" for i in ids))
        files["json"].append(str(path))
        path = data_dir / f"part-{part}.csv"
        if not path.exists():
            path.write_text("id,text\n" + "".join(f"{i},r{i}\n" for i in ids))
        files["csv"].append(str(path))
    return files


def _file_stream(kind: str, data_dir: Path) -> Any:
    return sds.load_dataset(kind, data_files=write_files(data_dir)[kind], split="train", streaming=True)


def _packed(data_dir: Path, **placement: Any) -> Any:
    from stable_datasets.sft import pack_stream  # (datasets floor: the harness is a test helper, not a module)

    return pack_stream(token_source().to_iterable(**placement).shuffle(seed=0), pack_size=8, algorithm="first_fit",
                       lookahead=10)


def _keep(row: dict[str, Any]) -> bool:  # module level: picklable for DataLoader workers
    return row["id"] % 3 != 0


#: name -> factory of a fresh stream (data_dir holds the data files of file streams)
CONFIGS: dict[str, Callable[[Path], Any]] = {
    "plain": lambda d: ids_source().to_iterable(),
    "shuffle": lambda d: ids_source().to_iterable().shuffle(seed=0),
    "shuffle_buffer": lambda d: ids_source().to_iterable().shuffle(seed=3, buffer_size=5),
    "shuffle_skip_take": lambda d: ids_source().to_iterable().shuffle(seed=1, buffer_size=4).skip(3).take(15),
    "mix_round_robin": lambda d: sds.interleave_datasets(
        [ids_source(10).to_iterable(), ids_source(16, 100).to_iterable()]),
    "mix_probabilities": lambda d: sds.interleave_datasets(
        [ids_source(10).to_iterable().shuffle(seed=1), ids_source(16, 100).to_iterable().shuffle(seed=2)],
        probabilities=[0.3, 0.7], seed=0),
    "mix_all_exhausted": lambda d: sds.interleave_datasets(
        [ids_source(10).to_iterable().shuffle(seed=1), ids_source(16, 100).to_iterable().shuffle(seed=2)],
        probabilities=[0.5, 0.5], seed=4, stopping_strategy="all_exhausted"),
    "mix_sized": lambda d: sds.interleave_datasets(
        [ids_source(10).to_iterable().shuffle(seed=1), ids_source(16, 100).to_iterable().shuffle(seed=2)],
        repeat=[2, None], choose=[None, 6], seed=0),
    "mix_sized_unshuffled_partial": lambda d: sds.interleave_datasets(  # partial passes: fresh subsets per epoch
        [ids_source(10).to_iterable(), ids_source(16, 100).to_iterable()], repeat=[1.5, None], choose=[None, 7],
        seed=3),
    "filter": lambda d: ids_source().to_iterable().shuffle(seed=0).filter(_keep),
    "pack_stream": _packed,
    "pack_stream_shuffled": lambda d: _packed(d).shuffle(seed=1),
    "mix_rank1_of_2": lambda d: sds.interleave_datasets(
        [ids_source(10).to_iterable(rank=1, world_size=2).shuffle(seed=1),
         ids_source(16, 100).to_iterable(rank=1, world_size=2).shuffle(seed=2)], probabilities=[0.4, 0.6], seed=7),
    "mix_lanes_rank0_of_2": lambda d: sds.interleave_datasets(
        [ids_source(10).to_iterable(rank=0, world_size=2, lanes=True).shuffle(seed=1),
         ids_source(16, 100).to_iterable(rank=0, world_size=2)], seed=7, stopping_strategy="all_exhausted"),
    "batched": lambda d: ids_source().to_iterable().shuffle(seed=4).batch(5),
    "map_skip_rank1_of_3": lambda d: ids_source().to_iterable(rank=1, world_size=3).shuffle(seed=2, buffer_size=3)
        .skip(2).map(lambda r: {**r, "id": r["id"] + 1000}),
    "pack_stream_rank1_of_2": lambda d: _packed(d, rank=1, world_size=2).shuffle(seed=1),
    "json_files": lambda d: _file_stream("json", d),
    "json_files_shuffled": lambda d: _file_stream("json", d).shuffle(seed=0, buffer_size=4),
    "csv_files": lambda d: _file_stream("csv", d),
    "csv_files_shuffled": lambda d: _file_stream("csv", d).shuffle(seed=2),
}


def run(stream: Any, steps: int | None = None) -> tuple[list[Any], list[dict[str, Any]]]:
    """Row ids of one pass (or of its first `steps` rows), and the state saved after each row (index k: after k
    rows, so index 0 is the state before the first row)."""
    rows, states = [], [json_round_trip(stream.state_dict())]
    for row in stream:
        rows.append(row_id(row))
        states.append(json_round_trip(stream.state_dict()))
        if steps is not None and len(rows) == steps:
            break
    return rows, states


def resumed(make: Callable[[], Any], state: dict[str, Any]) -> list[Any]:
    """The rest of the pass of a fresh stream that loaded `state`."""
    stream = make()
    stream.load_state_dict(state)
    return [row_id(row) for row in stream]


def failures_at_every_step(make: Callable[[], Any], twice: bool = True) -> list[str]:
    """Every step k where a fresh stream restored from the state after k rows does not serve exactly the rest
    of the recorded pass (and, with `twice`, where a second resume, j rows after the first, does not either):
    one line each, `k=..: expected [...], got [...]`. Empty when resume is exact everywhere. (The second
    resume is checked from every even k and the last.)"""
    full, states = run(make())
    problems = []
    for k, state in enumerate(states):
        got = resumed(make, state)
        if got != full[k:]:
            problems.append(f"k={k}: expected {full[k:]}, got {got}")
            continue
        if twice and k < len(full) and (k % 2 == 0 or k == len(full) - 1):  # (every other k: half the cost)
            again = make()
            again.load_state_dict(state)
            j = (len(full) - k + 1) // 2  # half way through the rest, then a second resume
            head, second = run(again, steps=j)
            got = head + resumed(make, second[-1])
            if got != full[k:]:
                problems.append(f"k={k} then j={j}: expected {full[k:]}, got {got}")
    return problems


def restore_in_subprocess(states: dict[str, list[dict[str, Any]]], data_dir: Path, tmp: Path) -> dict[str, list]:
    """config -> the suffix a fresh Python process serves after loading each of its `states` into a fresh
    `CONFIGS[config]` stream (one process for all, so the sample costs one interpreter start)."""
    state_file = tmp / "states.json"
    state_file.write_text(json.dumps(states))
    code = ("import json, sys; from pathlib import Path; from tests.streaming.resume_harness import CONFIGS, resumed;"
            "states = json.loads(Path(sys.argv[2]).read_text());"
            "print(json.dumps({name: [resumed(lambda: CONFIGS[name](Path(sys.argv[1])), s) for s in saved] "
            "for name, saved in states.items()}))")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code, str(data_dir), str(state_file)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: [[tuple(v) if isinstance(v, list) else v for v in suffix] for suffix in suffixes]
            for name, suffixes in answer.items()}


# -- through DataLoaders: one step is one batch ------------------------------------------------------------
def batch_ids(batch: Any) -> list[Any]:
    """A loader batch's row ids: a collated batch's `id` column, a list of rows (collate_fn=list), or a pack."""
    if isinstance(batch, list):
        return [row_id(row) for row in batch]
    if "seq_start_id" in batch:
        return [row_id(batch)]
    return [int(v) for v in np.asarray(batch["id"]).ravel().tolist()]


def loader_failures(make_loader: Callable[[], Any], steps: Iterable[int] | None = None) -> list[str]:
    """As `failures_at_every_step`, through a loader: the batches after the loader state saved after k batches,
    from a fresh loader (fresh stream) that loaded it, against the recorded pass. `steps`: which k (None: all)."""
    loader = make_loader()
    full, states = [], [json_round_trip(loader.state_dict())]
    for batch in loader:
        full.append(batch_ids(batch))
        states.append(json_round_trip(loader.state_dict()))
    problems = []
    for k in range(len(states)) if steps is None else steps:
        fresh = make_loader()
        fresh.load_state_dict(states[k])
        got = [batch_ids(batch) for batch in fresh]
        if got != full[k:]:
            problems.append(f"k={k} batches: expected {full[k:]}, got {got}")
    return problems
