"""What a stream's saved state holds, how a loaded one is checked, and who may save one.

A state is plain JSON: format, epoch, `consumed` (the global position in the epoch order: every
row before it was received by some rank's training loop), num_rows, seed, drop_last and `order`
(a hash of the dataset identity and the order options, or of the mix). It never holds the world
size as a constraint, a row list or a pickle. A DataLoader worker's own state (what torchdata's
StatefulDataLoader collects) adds `worker`: which worker of how many, and rows it served.

`WorkerFlag` is how the main process learns that DataLoader workers read its stream: an int in
shared memory that survives fork and spawn; a worker sets it to the number of workers when it starts
reading, so a `state_dict()` in the main process that cannot know what the loop received raises
instead of answering "nothing consumed" (and, given `consumed=`, knows the lanes the workers read).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from multiprocessing import sharedctypes
from typing import Any

from stable_datasets.streaming.order import consumed_after, rows_per_rank, worker_rows

STATE_FORMAT = 2

LOADERS_THAT_COUNT = ("stable_datasets.streaming.StreamingDataLoader, or torchdata's StatefulDataLoader "
                      "(its state_dict() asks each worker)")


def check_int(state: dict[str, Any], key: str, what: str) -> int:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"cannot resume: the saved {what}'s {key} must be a non-negative int, got {value!r} "
                         f"(pass the state_dict() of a {what})")
    return value


def check_state(state: Any, current: dict[str, Any], what: str) -> None:
    """Refuse a state of another format, dataset, mix, seed or order, naming what differs."""
    if not isinstance(state, dict):
        raise ValueError(f"cannot resume: a {what} state is a dict, got {type(state).__name__}")
    if "format" not in state and "consumed" not in state:
        raise ValueError(f"cannot resume: this is no {what} state (it has no format and no consumed); pass the "
                         f"state_dict() of a {what}")
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"cannot resume: this {what} state has format {state.get('format')!r}, this version "
                         f"reads format {STATE_FORMAT} (states saved before resume by global position, which "
                         "counted rows per rank, cannot say which rows other ranks received)")
    if "seed" in current and "seed" not in state:  # every state saves its seed: one without it is no state of ours
        raise ValueError(f"cannot resume: the saved {what} state has no 'seed' (keys: {sorted(state)[:10]}); pass the "
                         f"state_dict() of a {what}")
    first = {"seed": 0, "order": 1}  # the seed, then the identity (a mix's length follows from it), then the rest
    for key, value in sorted(current.items(), key=lambda item: first.get(item[0], 2)):
        if key in state and state[key] != value:
            if key == "order":
                raise ValueError(f"cannot resume: the saved {what} read another dataset, mix or order (its "
                                 f"identity {state[key]!r} differs from this one's {value!r}: dataset, sources, "
                                 "probabilities, seed, shuffle window or block layout changed)")
            raise ValueError(f"cannot resume: the saved {what} had {key}={state[key]!r}, this one has {value!r}")


#: a saved state lists each source file's identity up to this many files (to name one that changed), else a digest
LISTED_FILES = 256


def _digest(values: Any) -> str:
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:16]


def files_state(files: list[tuple[str, list[Any]]]) -> dict[str, Any]:
    """What a state records of the data files a stream reads in place ((name, identity) each, in order): a digest
    of the names, and each identity (a digest past LISTED_FILES files), so a resume can name a changed file."""
    identities = [list(identity) for _, identity in files]
    saved: dict[str, Any] = {"names": _digest([name for name, _ in files]), "count": len(files)}
    if len(files) <= LISTED_FILES:
        saved["identities"] = identities
    else:
        saved["identities_digest"] = _digest(identities)
    return saved


def check_files(saved: Any, files: list[tuple[str, list[Any]]]) -> None:
    """Refuse a state saved over other data files, or over these files before one changed, naming it."""
    if not isinstance(saved, dict):
        raise ValueError("cannot resume: the state was not saved by a stream of data files (it has no 'files')")
    if saved.get("names") != _digest([name for name, _ in files]):
        raise ValueError(f"cannot resume: the saved stream read other data files ({saved.get('count')} files; this "
                         f"stream reads {len(files)}: a file was added, removed or renamed since)")
    if "identities_digest" in saved:
        if saved["identities_digest"] != _digest([list(identity) for _, identity in files]):
            raise ValueError(f"cannot resume: one of the {len(files)} data files changed since the state was saved "
                             "(size or modification time); its rows may differ, so the position cannot be trusted")
        return
    for (name, identity), then in zip(files, saved.get("identities") or []):
        if list(then) != list(identity):
            raise ValueError(f"cannot resume: {name} changed since the state was saved (size {then[0]} -> "
                             f"{identity[0]} bytes, modified again); its rows may differ, so the position cannot be "
                             "trusted")


class WorkerFlag:
    """A shared int: set in a DataLoader worker to the number of workers, read in the main process (see the module
    docstring)."""

    def __init__(self) -> None:
        self._value: Any = sharedctypes.RawValue("i", 0)

    def set(self, workers: int = 1) -> None:
        if self._value is not None:
            self._value.value = max(1, int(workers))

    def workers(self) -> int:
        """The number of DataLoader workers that read the stream (0: none did)."""
        return 0 if self._value is None else int(self._value.value)

    def clear(self) -> None:
        if self._value is not None:
            self._value.value = 0

    def is_set(self) -> bool:
        return self._value is not None and bool(self._value.value)

    def __getstate__(self) -> dict[str, Any]:
        # shared memory travels only to a process being started (a spawned DataLoader worker); a pickle
        # made for anything else (a copy, a file) carries no flag
        spawning = multiprocessing.context.get_spawning_popen() is not None
        return {"value": self._value if spawning else None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._value = state["value"]


def merge_worker_states(loader_state: dict[str, Any]) -> dict[str, Any]:
    """One elastic stream state from a torchdata StatefulDataLoader's state (one state per worker inside).

    Each worker's state counts the rows it served. When the stream dealt units of the loader's batch size
    (`loader_batch_size=` equal to its `batch_size`), the batches the loop received are a prefix of the
    rank's rows, so their sum is the rank's position, and the global position follows (lockstep ranks).
    Otherwise the rows received are no prefix and the merge is refused, saying why."""

    snapshots = ((loader_state or {}).get("_snapshot") or {}).get("_worker_snapshots") or {}
    states = [snap.get("dataset_state") for snap in snapshots.values()]
    if not states or any(not isinstance(s, dict) or "worker" not in s for s in states):
        raise ValueError("cannot merge: this is no StatefulDataLoader state of a stream read by DataLoader workers "
                         "(it has no per-worker stream states)")
    workers = [s["worker"] for s in states]
    shared = {k: workers[0][k] for k in ("epoch", "start", "unit", "workers", "world_size")}
    if any({k: w[k] for k in shared} != shared for w in workers) or len(workers) != shared["workers"]:
        raise ValueError("cannot merge: the worker states disagree on epoch, position, unit or worker count")
    length, start, unit = states[0]["num_rows"], shared["start"], shared["unit"]
    total = sum(int(w["rows"]) for w in workers)
    count = rows_per_rank(length, shared["world_size"], bool(states[0].get("drop_last")), start)
    expected = [worker_rows(min(total, count), unit, w["id"], shared["workers"]) for w in workers]
    if expected != [int(w["rows"]) for w in workers]:
        raise ValueError(f"cannot merge exactly: the workers served {[w['rows'] for w in workers]} rows, which is not "
                         f"a prefix of the rank's rows dealt in units of {unit}; pass loader_batch_size= equal to the "
                         "loader's batch_size to the stream")
    merged = {k: v for k, v in states[0].items() if k != "worker"}
    merged["epoch"], merged["consumed"] = shared["epoch"], consumed_after(length, start, shared["world_size"], total)
    return merged
