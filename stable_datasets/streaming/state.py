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
It also carries the last epoch DataLoader workers finished: the worker that serves the last unit of a
pass writes it when its share ends (one writer, no lock), with its pass's seed (torch draws a base seed
per loader iterator), so the next pass's workers, started from the main process's copy (which saw none
of it), begin the next epoch instead of the finished one again, while that pass's own later-starting
workers ignore it.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sys
from multiprocessing import sharedctypes
from typing import Any

from stable_datasets.errors import StateError
from stable_datasets.streaming.order import consumed_after, rows_per_rank, worker_rows

STATE_FORMAT = 2
#: the largest epoch a state (or `set_epoch`) may name: epochs key the order's 64-bit hashes with room to spare
MAX_EPOCH = (1 << 32) - 1
#: the key of a state's seal: a digest of everything else in it (see `seal`)
SEAL = "check"

LOADERS_THAT_COUNT = ("stable_datasets.streaming.StreamingDataLoader, or torchdata's StatefulDataLoader "
                      "(its state_dict() asks each worker)")


def check_int(state: dict[str, Any], key: str, what: str, limit: int | None = None) -> int:
    """`state[key]` as an int in [0, limit] (None: a non-negative int of at most 62 bits), or a one-line StateError
    naming the key."""
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= (limit or 1 << 62):
        wanted = "a non-negative int" if limit is None else f"an int in [0, {limit}]"
        raise StateError(f"cannot resume: the saved {what}'s {key} must be {wanted}, got {_short(value)} (pass the "
                         f"state_dict() of a {what})")
    return value


def check_epoch(epoch: Any, what: str = "stream") -> int:
    """An epoch number as `set_epoch` and a state take it: an int in [0, MAX_EPOCH]."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int,)) or not 0 <= epoch <= MAX_EPOCH:
        raise StateError(f"a {what}'s epoch must be an int in [0, {MAX_EPOCH}], got {_short(epoch)}")
    return int(epoch)


def _short(value: Any) -> str:
    """A value for a one-line message (a forged state may hold anything, of any size)."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _seal_of(state: dict[str, Any]) -> str:
    body = {k: v for k, v in state.items() if k != SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def seal(state: dict[str, Any]) -> dict[str, Any]:
    """The state with its seal: a digest of its other keys, so a resume knows the state is whole and as saved
    (a key dropped, a position or the lanes edited by hand, two states spliced) rather than trusting each
    value that merely looks plausible. The state stays plain JSON."""
    state[SEAL] = _seal_of(state)
    return state


def check_seal(state: dict[str, Any], what: str) -> None:
    """Refuse a state whose contents are not the ones it was saved with (see `seal`)."""
    if SEAL not in state:
        raise StateError(f"cannot resume: the saved {what} state has no {SEAL!r} (keys: {sorted(state)[:12]}); it "
                         f"was written by hand or by an older version: pass the state_dict() of a {what} as saved")
    if state[SEAL] != _seal_of(state):
        raise StateError(f"cannot resume: the saved {what} state was changed after it was saved (its {SEAL!r} does "
                         f"not match its keys {sorted(k for k in state if k != SEAL)[:12]}); pass the state_dict() "
                         "as saved")


def check_state(state: Any, current: dict[str, Any], what: str) -> None:
    """Refuse a state of another format, dataset, mix, seed or order, naming what differs, or one that lacks any
    key of `current`. The caller then checks its numbers, and its seal (`check_seal`) before trusting the rest."""
    if not isinstance(state, dict):
        raise StateError(f"cannot resume: a {what} state is a dict, got {type(state).__name__}")
    if "format" not in state and "consumed" not in state:
        raise StateError(f"cannot resume: this is no {what} state (it has no format and no consumed); pass the "
                         f"state_dict() of a {what}")
    if state.get("format") != STATE_FORMAT:
        raise StateError(f"cannot resume: this {what} state has format {_short(state.get('format'))}, this version "
                         f"reads format {STATE_FORMAT} (states saved before resume by global position, which "
                         "counted rows per rank, cannot say which rows other ranks received)")
    if "seed" in current and "seed" not in state:  # every state saves its seed: one without it is no state of ours
        raise StateError(f"cannot resume: the saved {what} state has no 'seed' (keys: {sorted(state)[:10]}); pass the "
                         f"state_dict() of a {what}")
    first = {"seed": 0, "mix_seed": 1, "order": 2}  # the seeds, then the identity (a mix's length follows), the rest
    for key, value in sorted(current.items(), key=lambda item: first.get(item[0], 3)):
        if key not in state:
            raise StateError(f"cannot resume: the saved {what} state has no {key!r} (keys: {sorted(state)[:12]}); "
                             f"pass the state_dict() of a {what} as saved")
        if state[key] != value:
            if key == "order":
                raise StateError(f"cannot resume: the saved {what} read another dataset, mix or order (its "
                                 f"identity {_short(state[key])} differs from this one's {value!r}: dataset, sources, "
                                 "probabilities, seed, shuffle window or block layout changed)")
            if key == "mix_seed":
                raise StateError(f"cannot resume: the saved mix drew its sources with seed {_short(state[key])}, this "
                                 f"one with {value!r}; pass interleave_datasets(..., seed={_short(state[key])}) "
                                 "to resume it")
            raise StateError(f"cannot resume: the saved {what} had {key}={_short(state[key])}, this one has {value!r}")


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
        raise StateError("cannot resume: the state was not saved by a stream of data files (it has no 'files')")
    if saved.get("names") != _digest([name for name, _ in files]):
        raise StateError(f"cannot resume: the saved stream read other data files ({_short(saved.get('count'))} files; "
                         f"this stream reads {len(files)}: a file was added, removed or renamed since)")
    if "identities_digest" in saved:
        if saved["identities_digest"] != _digest([list(identity) for _, identity in files]):
            raise StateError(f"cannot resume: one of the {len(files)} data files changed since the state was saved "
                             "(size or modification time); its rows may differ, so the position cannot be trusted")
        return
    listed = saved.get("identities")
    if not isinstance(listed, list) or len(listed) != len(files) or not all(isinstance(t, list) for t in listed):
        raise StateError(f"cannot resume: the saved stream's files have no identity of each of the {len(files)} "
                         "files (the state was edited); pass the state_dict() as saved")
    for (name, identity), then in zip(files, listed):
        if then != list(identity):
            was, now = _short(then[0] if then else None), identity[0] if identity else None
            raise StateError(f"cannot resume: {name} changed since the state was saved (size {was} -> {now} bytes, "
                             "modified again); its rows may differ, so the position cannot be trusted")


#: the shared ints of a WorkerFlag
SLOTS = 6


class WorkerFlag:
    """Shared ints: the number of workers (set in a DataLoader worker, read in the main process) and the last
    epoch workers finished (see the module docstring)."""

    def __init__(self) -> None:
        #: [workers, last finished epoch + 1 (0: none), the seed of the pass that finished it, the epoch the main
        #: process last set, how many times it set one, the number of the pass that finished it in its worker]
        self._value: Any = sharedctypes.RawArray("q", SLOTS)
        self._seen = 0  # (not shared) the main process's last set_epoch this copy took

    def set(self, workers: int = 1) -> None:
        if self._value is not None:
            self._value[0] = max(1, int(workers))

    def workers(self) -> int:
        """The number of DataLoader workers that read the stream (0: none did)."""
        return 0 if self._value is None else int(self._value[0])

    def clear(self) -> None:
        if self._value is not None:
            self._value[0] = 0

    def is_set(self) -> bool:
        return self._value is not None and bool(self._value[0])

    def finish_epoch(self, epoch: int, pass_seed: int, pass_number: int = 0) -> None:
        """Record that DataLoader workers of the loader iterator `pass_seed` served the whole of `epoch`, in the
        `pass_number`-th pass of the worker serving the last unit (which writes it)."""
        if self._value is not None:
            self._value[2], self._value[5] = int(pass_seed) % (1 << 62), int(pass_number)
            self._value[1] = int(epoch) + 1

    def finished_epoch(self, pass_seed: int | None = None, pass_number: int = 0) -> int | None:
        """The last epoch DataLoader workers served whole since the main process last set the position (None: none,
        or only the pass `pass_number` of the iterator `pass_seed` or a later one did: a worker takes no news of its
        own pass, which its siblings may have finished before it began; persistent workers keep their iterator's
        seed, so their passes are told apart by number)."""
        if self._value is None or not self._value[1]:
            return None
        if pass_seed is not None and int(pass_seed) % (1 << 62) == self._value[2] and self._value[5] >= pass_number:
            return None
        return int(self._value[1]) - 1

    def forget_finished(self) -> None:
        """The main process set the position itself (load_state_dict, set_epoch): workers' old news no longer apply."""
        if self._value is not None:
            self._value[1] = 0

    def announce_epoch(self, epoch: int) -> None:
        """The main process set the stream to `epoch` (set_epoch): persistent DataLoader workers, whose copies were
        made before, take it at their next pass (`announced_epoch`)."""
        if self._value is not None:
            self._value[3] = int(epoch)
            self._value[4] += 1
            self._seen = int(self._value[4])

    def announced_epoch(self) -> int | None:
        """The epoch the main process set since this copy last looked (None: none); each is taken once."""
        if self._value is None or self._value[4] == self._seen:
            return None
        self._seen = int(self._value[4])
        return int(self._value[3])

    def __getstate__(self) -> dict[str, Any]:
        # shared memory travels only to a process being started (a spawned DataLoader worker); a pickle
        # made for anything else (a copy, a file) carries none: its copy gets a flag of its own
        spawning = multiprocessing.context.get_spawning_popen() is not None
        return {"value": self._value if spawning else None, "seen": self._seen if spawning else 0}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._value = state["value"] if state["value"] is not None else sharedctypes.RawArray("q", SLOTS)
        self._seen = state.get("seen", 0)


def last_unit_worker(count: int, unit: int, num_workers: int) -> int:
    """The worker that serves the last unit of a rank sequence of `count` rows dealt in units (0 when empty)."""
    return 0 if count <= 0 or num_workers <= 1 else ((count - 1) // unit) % num_workers


def merge_worker_states(loader_state: dict[str, Any]) -> dict[str, Any]:
    """One elastic stream state from a torchdata StatefulDataLoader's state (one state per worker inside).

    Each worker's state counts the rows it served. When the stream dealt units of the loader's batch size
    (`loader_batch_size=` equal to its `batch_size`), the batches the loop received are a prefix of the
    rank's rows, so their sum is the rank's position, and the global position follows (lockstep ranks).
    Otherwise the rows received are no prefix and the merge is refused, saying why. A state saved after the loop
    ended (torchdata's `_iterator_finished`: the loader reached StopIteration) is the next epoch at its start, as
    torchdata resumes it (a fresh loader serves that epoch whole); one saved after the last batch but before the
    StopIteration is the finished epoch's end, an empty pass, as torchdata's is."""

    snapshot = loader_state.get("_snapshot") if isinstance(loader_state, dict) else None
    snapshots = snapshot.get("_worker_snapshots") if isinstance(snapshot, dict) else None
    states = [snap.get("dataset_state") if isinstance(snap, dict) else None
              for snap in (snapshots.values() if isinstance(snapshots, dict) else [])]
    if not states or any(not isinstance(s, dict) or "worker" not in s for s in states):
        raise StateError("cannot merge: this is no StatefulDataLoader state of a stream read by DataLoader workers "
                         "(it has no per-worker stream states)")
    for state in states:  # each as its worker saved it: then its keys are the ones a worker writes
        check_seal(state, "stream worker")
    workers = [s["worker"] for s in states]
    shared = {k: workers[0][k] for k in ("epoch", "start", "workers", "world_size")}
    # a worker that served nothing yet saved its state before its first fetch, when it could not know the loader's
    # batch size (its unit): only the units of workers that served rows must agree
    units = {w["unit"] for w in workers if int(w["rows"])} or {workers[0]["unit"]}
    if any({k: w[k] for k in shared} != shared for w in workers) or len(workers) != shared["workers"] \
            or sorted(w["id"] for w in workers) != list(range(len(workers))) or len(units) > 1:
        raise StateError("cannot merge: the worker states disagree on epoch, position, unit or worker count")
    mine = [{k: v for k, v in s.items() if k not in ("worker", "epoch", "consumed", SEAL)} for s in states]
    if any(other != mine[0] for other in mine[1:]):
        raise StateError("cannot merge: the worker states were saved by different streams (their datasets, orders "
                         "or lanes differ)")
    merged = {k: v for k, v in states[0].items() if k != "worker"}
    if loader_state.get("_iterator_finished") is True:  # saved after the loop's StopIteration: the next epoch whole
        merged.pop("lanes", None)  # (an epoch's start names no lanes: any lanes do)
        merged["epoch"], merged["consumed"] = shared["epoch"] + 1, 0
        return seal(merged)
    length, start, unit = states[0]["num_rows"], shared["start"], units.pop()
    total = sum(int(w["rows"]) for w in workers)
    count = rows_per_rank(length, shared["world_size"], bool(states[0].get("drop_last")), start)
    expected = [worker_rows(min(total, count), unit, w["id"], shared["workers"]) for w in workers]
    if expected != [int(w["rows"]) for w in workers]:
        raise StateError(f"cannot merge exactly: the workers served {[w['rows'] for w in workers]} rows, which is not "
                         f"a prefix of the rank's rows dealt in units of {unit}; pass loader_batch_size= equal to the "
                         "loader's batch_size to the stream")
    merged["epoch"], merged["consumed"] = shared["epoch"], consumed_after(length, start, shared["world_size"], total)
    return seal(merged)


# -- the loader batch size a DataLoader worker's fetch asks for -------------------------------------------------
# A stream read by DataLoader workers must deal its rows to the workers a whole loader batch at a time, or the
# batches come back out of the epoch's order and a torchdata StatefulDataLoader checkpoint cannot move to another
# num_workers (the rows received are then no prefix of the epoch). StreamingDataLoader tells the stream its batch
# size (loader_batch_size); torchdata's loader and torch's cannot. But a worker's first row is pulled by torch's
# _IterableDatasetFetcher.fetch(possibly_batched_index), whose index list is one loader batch long (the
# BatchSampler over _InfiniteConstantSampler both loaders use): the stream reads the batch size from that call,
# found a few frames up from where its iterator starts. None outside a fetch, for batch_size=None loaders (no
# auto-collation) and without torch: the stream then deals one row at a time, as before.

#: frames walked up from the caller (the stream's iterator body, then the fetch that asked for its first row)
DEPTH = 6


def fetching_batch_size() -> int | None:
    """The loader batch size of the torch fetch this call runs inside (see the comment above), or None."""
    fetchers = sys.modules.get("torch.utils.data._utils.fetch")  # loaded by any DataLoader worker
    fetcher_type = getattr(fetchers, "_IterableDatasetFetcher", None)
    if fetcher_type is None:
        return None
    frame = sys._getframe(1)
    for _ in range(DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_name == "fetch":
            fetcher = frame.f_locals.get("self")
            index = frame.f_locals.get("possibly_batched_index")
            if isinstance(fetcher, fetcher_type) and fetcher.auto_collation and isinstance(index, (list, tuple)) \
                    and index:
                return len(index)
            return None
        frame = frame.f_back
    return None
