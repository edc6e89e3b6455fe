"""`StreamingDataset`: an iterable over a dataset for training, resumable mid-epoch on any cluster size.

Order: `streaming.order` (blocks in storage order, or a seeded block shuffle evaluated lazily, so
an epoch costs memory per block, never per row; no global RNG).
Split: one global order per epoch; rank r of N serves its positions start + r, start + r + N, ...
(ranks advance in lockstep); inside a rank, DataLoader workers are dealt units of
`loader_batch_size` rows in turn (or whole batches after `batch()`), the order a DataLoader hands
batches back in. So the rows a training loop has received are always a prefix of the epoch order.

Resume rule: the state is (epoch, global rows consumed): small plain JSON, the same on every rank,
independent of the rows, the world size, the workers and the batch size. A state saved at
(N ranks, W workers, batch B) loads at (M, V, B') and the epoch goes on with the next row.
Counting happens where rows arrive: iterating in this process counts them; `StreamingDataLoader`
counts the batches the loop received; torchdata's `StatefulDataLoader` asks each worker's copy
(a per-worker state, which resumes exactly with the same workers). A plain DataLoader with
workers cannot know what the loop received: `state_dict()` then raises instead of guessing.
A pass that runs to the end moves on to the next epoch; `set_epoch(e)` jumps to epoch e. Each new
pass (`iter()`) begins at the position last loaded or set, or at the start of the epoch after the
last one served whole, never where an unfinished pass stopped (`begin_pass`): a peek does not eat
the epoch, as with Hugging Face's IterableDataset.

Lanes (`lanes=True`, what streams of data files and of remote caches open with): the global order is
relabeled (`streaming.order.Lanes`) so that each rank x worker serves one contiguous stretch of the
epoch's block order, so a unit is parsed, a shard downloaded, by about one consumer an epoch. The
lanes depend on the topology (ranks, workers, unit) the epoch began on, so the state adds `lanes`
(that topology); a resume on another topology serves the rest of that epoch in row stripes over the
saved lanes (every consumer reads across them: only that remainder pays), and the next epoch gets
lanes of the new topology.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from loguru import logger

from stable_datasets.errors import StateError
from stable_datasets.streaming import source as sources
from stable_datasets.streaming.mix import MixedSource
from stable_datasets.streaming.order import (
    BlockOrder,
    Lanes,
    bounds_from_starts,
    consumed_after,
    rank_indices,
    resolve_rank,
    rows_per_rank,
    split_large_blocks,
    worker_indices,
    worker_rows,
)
from stable_datasets.streaming.reader import make_reader
from stable_datasets.streaming.state import (
    LOADERS_THAT_COUNT,
    MAX_EPOCH,
    STATE_FORMAT,
    WorkerFlag,
    check_epoch,
    check_files,
    check_int,
    check_seal,
    check_state,
    fetching_batch_size,
    files_state,
    last_unit_worker,
    merge_worker_states,
    seal,
)
from stable_datasets.streaming.verbs import StreamVerbs

try:  # a torch IterableDataset when torch is installed, so DataLoader treats it as one
    from torch.utils.data import IterableDataset as _IterableBase
except ImportError:  # pragma: no cover - torch is optional
    _IterableBase = object  # type: ignore[assignment,misc]

#: rows decoded together when the stream yields rows (a read of a few blocks)
READ_ROWS = 1024
#: blocks longer than this are cut, so a window of blocks stays small whatever the layout stores
MAX_BLOCK_ROWS = 8192
#: most DataLoader workers a saved state may deal an epoch to (dealing allocates per worker)
MAX_WORKERS = 1 << 16


def _worker() -> tuple[int, int, bool]:
    """(worker id, number of workers, in a DataLoader worker process)."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # pragma: no cover
        return 0, 1, False
    info = get_worker_info()
    return (0, 1, False) if info is None else (info.id, info.num_workers, True)


def _pass_seed() -> int | None:
    """In a DataLoader worker: the base seed torch drew for this loader iterator (the same in every worker of a
    pass, new for each pass unless workers persist); None elsewhere."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # pragma: no cover
        return None
    info = get_worker_info()
    return None if info is None else int(info.seed) - int(info.id)


class StreamingDataset(StreamVerbs, _IterableBase):
    """Rows (or batches, after `batch()`) of one rank, epoch after epoch.

    `dataset`: a StableDataset (read a block at a time as Arrow) or any map-style dataset with
    `__len__`/`__getitem__` (read row by row; `block_bounds()` if it has one): `source` is what the stream reads
    of it (`streaming.source.row_source`). `shuffle` with
    `seed` and `window_blocks` picks the block shuffle (`streaming.order`); `window_shards` k
    shuffles the shard order and blocks only within windows of k shards (bounded local cache for a
    remote stream; None: blocks from the whole split); `rank`/`world_size`
    default to torch.distributed (or torchrun's RANK/WORLD_SIZE); ranks stripe one global order;
    `drop_last=False` pads the last step by wrapping around to the start of the order. `rows=(lo, hi)`
    serves only that stretch of each epoch's order (what `take`/`skip` set). `lanes=True` gives each
    rank x worker one contiguous stretch of each epoch's order (module docstring): for sources whose
    blocks cost a parse or a download to open; mapped caches read any row in place and keep row stripes.
    """

    def __init__(self, dataset: Any, *, shuffle: bool = False, seed: int = 0, window_blocks: int = 8,
                 window_shards: int | None = None, max_block_rows: int | None = MAX_BLOCK_ROWS,
                 rank: int | None = None, world_size: int | None = None, drop_last: bool = False,
                 loader_batch_size: int | None = None, rows: tuple[int, int] | None = None, lanes: bool = False):
        self.dataset = dataset
        self.source = sources.row_source(dataset)
        self.num_rows = len(dataset)
        if max_block_rows is not None and (isinstance(max_block_rows, bool) or not isinstance(max_block_rows, int)
                                           or max_block_rows < 1):
            raise ValueError(f"max_block_rows must be None or a positive int, got {max_block_rows!r}")
        self._options = {"shuffle": shuffle, "seed": seed, "window_blocks": window_blocks,
                         "window_shards": window_shards, "max_block_rows": max_block_rows, "rank": rank,
                         "world_size": world_size, "drop_last": drop_last, "loader_batch_size": loader_batch_size,
                         "rows": rows, "lanes": bool(lanes)}
        #: the stretch [lo, hi) of each epoch's order this stream serves (take/skip), and its length
        self._range = (0, self.num_rows) if rows is None else (int(rows[0]), int(rows[1]))
        self.length = self._range[1] - self._range[0]
        if not 0 <= self._range[0] <= self._range[1] <= self.num_rows:
            raise ValueError(f"rows={rows!r} is not a stretch of the {self.num_rows} rows")
        BlockOrder(self.num_rows, None, seed=seed, shuffle=shuffle, window_blocks=window_blocks,
                   window_shards=window_shards)  # checks options
        self._order: BlockOrder | None = None  # built on first use, so a Lance cache is opened where it is read
        self._given_rank = (rank, world_size)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.drop_last = drop_last
        if loader_batch_size is not None and (isinstance(loader_batch_size, bool) or not isinstance(
                loader_batch_size, int) or not 1 <= loader_batch_size <= 1 << 32):
            raise ValueError(f"loader_batch_size must be None or an int in [1, 2**32], got {loader_batch_size!r}")
        self.loader_batch_size = loader_batch_size
        self.batch_size: int | None = None
        self.drop_last_batch = False
        self.collate_fn: Callable[[list[Any]], Any] | None = None
        self._ops: list[tuple[str, Callable[[Any], Any]]] = []  # ("map" | "filter", function), in order
        self.epoch = 0
        #: global position in the epoch order: rows before it were received by some rank (see the docstring)
        self.consumed = 0
        #: True when a loader counts the batches its loop receives (StreamingDataLoader sets it)
        self.counted_by_loader = False
        self._fetched_batch: int | None = None  # a worker's loader batch (state.fetching_batch_size)
        #: the lanes the current epoch is served in (None: row stripes); fixed when an epoch's pass begins at its
        #: start, or loaded from a state (then kept to the epoch's end, whatever the topology now)
        self._lanes: Lanes | None = None
        #: where a new pass begins: the position last loaded, set, or reached by finishing an epoch (see begin_pass)
        self._start: tuple[int, int, Lanes | None] = (0, 0, None)
        self._moves = 0  # bumped when the position is set: a pass then ends without overriding it
        self._worker_passes = 0  # in a DataLoader worker: passes this copy began (persistent workers begin several)
        self._flag = WorkerFlag()
        self._worker_pass: dict[str, Any] | None = None  # in a DataLoader worker: where it is in its pass
        self._worker_resume: dict[str, Any] | None = None  # a worker's saved state, checked when it starts

    @property
    def order(self) -> BlockOrder:
        """How epochs are ordered (reads the dataset's block bounds the first time)."""
        if self._order is None:
            bounds = sources.block_bounds_of(self.source)
            if bounds is not None:
                bounds = split_large_blocks(bounds_from_starts(bounds, self.num_rows), self._options["max_block_rows"])
            options = self._options
            shards = sources.shard_bounds_of(self.source) if options["window_shards"] is not None else None
            self._order = BlockOrder(self.num_rows, bounds, seed=options["seed"], shuffle=options["shuffle"],
                                     window_blocks=options["window_blocks"], shards=shards,
                                     window_shards=options["window_shards"])
        return self._order

    def order_identity(self) -> str:
        """What decides the order, hashed: the dataset's fingerprint when it has one (so the main process
        need not open the cache), else the block bounds."""
        fingerprint = self.source.fingerprint if isinstance(self.source, sources.Identified) else None
        if not isinstance(fingerprint, str):
            return self.order.identity()
        keys = ("seed", "shuffle", "window_blocks", "max_block_rows")
        described = [fingerprint, self.num_rows, *(self._options[k] for k in keys)]
        if self._options["window_shards"] is not None:  # (absent from states saved before shard windows)
            described.append({"window_shards": self._options["window_shards"]})
        if self._options["rows"] is not None:
            described.append({"rows": list(self._range)})
        return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]

    # -- lazy ops (streaming/verbs.py): each returns a new stream made by `_with` ---------------
    def _with(self, dataset: Any = None, **changes: Any) -> StreamingDataset:
        other = StreamingDataset(self.dataset if dataset is None else dataset, **{**self._options, **changes})
        other.batch_size, other.drop_last_batch, other.collate_fn = self.batch_size, self.drop_last_batch, \
            self.collate_fn
        other._ops = list(self._ops)
        return other

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(f"a stream cannot be indexed (stream[{index!r:.40}]): use take/skip, or drop streaming=True "
                        "for a dataset that can")

    def source_files(self) -> list[tuple[str, list[Any]]] | None:
        """(name, identity) of the data files the dataset reads in place (a stream of files opened by
        `load_dataset(<loader>, data_files=..., streaming=True)`), else None (a cache, a map-style dataset)."""
        return self.source.source_files() if isinstance(self.source, sources.ReadsFilesInPlace) else None

    @property
    def row_offset(self) -> int:
        """Where this stream's stretch of each epoch's order begins (after skip())."""
        return self._range[0]

    def placement(self) -> tuple[int | None, int | None, bool]:
        """(rank, world_size, drop_last) as given (None: from torch.distributed), for streams mixed together."""
        return (*self._given_rank, self.drop_last)

    @property
    def features(self) -> Any:
        """The dataset's features (None when it has none, e.g. a plain map-style dataset)."""
        return sources.features_of(self.dataset)

    @property
    def column_names(self) -> list[str] | None:
        features = self.features
        return None if features is None else list(features)

    # -- epochs and resume -------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Go to the start of `epoch` (nothing happens when the stream is in it already: a loaded position stays)."""
        epoch = check_epoch(int(epoch) if isinstance(epoch, np.integer) else epoch)
        if not _worker()[2]:
            self._catch_up()
        if epoch != self.epoch:
            self._set_position(epoch, 0, None)
            self._worker_resume = None
            self._flag.forget_finished()
            if not _worker()[2]:  # persistent DataLoader workers' copies take it at their next pass
                self._flag.announce_epoch(epoch)

    def _set_position(self, epoch: int, consumed: int, lanes: Lanes | None) -> None:
        """Where the stream is, and where the next pass begins."""
        self.epoch, self.consumed, self._lanes = epoch, consumed, lanes
        self._start = (epoch, consumed, lanes)
        self._moves += 1

    def _catch_up(self) -> None:
        """Move on past an epoch that DataLoader workers served whole (their copies' news, see WorkerFlag)."""
        done = self._flag.finished_epoch()
        if done is not None and done >= self._start[0]:
            self._set_position(done + 1, 0, None)

    def _pass_start(self, pass_number: int | None = None) -> tuple[int, int, Lanes | None]:
        """(epoch, position, lanes) a pass begun now starts at: `begin_pass`'s rule; a DataLoader worker that loaded
        its own state resumes that state's pass (`pass_number`: a worker's pass, default its current one)."""
        announced = self._flag.announced_epoch() if _worker()[2] else None
        if announced is not None:  # the main process set an epoch since this copy was made (persistent workers)
            self._start, self._worker_resume = (announced, 0, None), None
        if self._worker_resume is None and not self.counted_by_loader:  # (StreamingDataLoader sets the start itself)
            number = self._worker_passes if pass_number is None else pass_number
            done = self._flag.finished_epoch(_pass_seed(), number)
            if done is not None and done >= self._start[0]:
                self._start = (done + 1, 0, None)  # (kept: a persistent worker's next passes go on from it)
        return self._start

    def begin_pass(self, counted_here: bool = False) -> tuple[int, int]:
        """Start a pass: go to where it begins and return (epoch, position).

        As Hugging Face's IterableDataset does, each new `iter()` begins at the position last loaded by
        `load_state_dict` (or set by `set_epoch`, or the start of the epoch after the last one served whole),
        never where an earlier pass that was left unfinished stopped: a peek does not eat the epoch. A pass
        that runs to its end (here, or in DataLoader workers: the worker serving the last rows says so) moves
        the stream to the next epoch. `counted_here`: the caller (StreamingDataLoader) counts what the loop
        receives and moves the epoch itself, so the workers' news of an earlier pass are dropped."""
        if counted_here:
            self._flag.forget_finished()
        else:
            self._catch_up()
        self.epoch, self.consumed, self._lanes = self._start
        return self.epoch, self.consumed

    def end_pass(self, epoch: int) -> None:
        """A pass over `epoch` reached its end (StreamingDataLoader's loop received every batch): the next epoch."""
        self._set_position(epoch + 1, 0, None)

    @property
    def uses_lanes(self) -> bool:
        """Whether epochs begun by this stream are served in lanes (see the module docstring)."""
        return self._options["lanes"]

    def _fresh_lanes(self, num_workers: int) -> Lanes | None:
        """The lanes of an epoch begun now on this topology (None: row stripes)."""
        if not self._options["lanes"]:
            return None
        return Lanes(self.world_size, max(1, num_workers), self._unit(num_workers, warn=False))

    def pass_lanes(self, num_workers: int) -> Lanes | None:
        """The lanes a pass begun now reads with `num_workers` DataLoader workers: the current topology's at the
        start of an epoch, else the ones the epoch began with. StreamingDataLoader fixes them before its workers
        start, so the main process's state names them."""
        if self.consumed == 0:
            self._lanes = self._fresh_lanes(num_workers)
        return self._lanes

    def open_before_fork(self) -> None:
        """Open, in this process, what forked DataLoader workers can share (the maps and held columns of a
        v2 Lance cache on local disk), so each worker does not open it again; StreamingDataLoader calls it."""
        if isinstance(self.source, sources.OpensBeforeFork):  # a StableDataset's asks its backends
            self.source.open_before_fork()

    def rows_per_epoch(self) -> int:
        """Rows of this rank's share of a whole epoch."""
        return rows_per_rank(self.length, self.world_size, self.drop_last)

    def rows_left(self) -> int:
        """Rows this rank serves from the saved position to the end of the epoch."""
        return rows_per_rank(self.length, self.world_size, self.drop_last, self.consumed)

    def position_after(self, start: int, rank_rows: int) -> int:
        """The global position once every rank served `rank_rows` rows of a pass that began at `start`."""
        return consumed_after(self.length, start, self.world_size, rank_rows)

    def __len__(self) -> int:
        rows = self.rows_per_epoch()
        if self.batch_size is None:
            return rows
        return rows // self.batch_size if self.drop_last_batch else -(-rows // self.batch_size)

    def _identity_fields(self) -> dict[str, Any]:
        fields = {"num_rows": self.length, "seed": self._options["seed"], "order": self.order_identity()}
        if isinstance(self.dataset, MixedSource):  # the seed the mix drew with (its own when none was given)
            fields["mix_seed"] = self.dataset.plan.seed
        return fields

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Where the epoch is: the global position every rank has reached (plain JSON, see streaming.state).

        `consumed=`: rows this rank's training loop received in this pass (for a plain DataLoader whose
        `batch_size` equals `loader_batch_size`). In a DataLoader worker: that worker's own state."""
        state = {"format": STATE_FORMAT, "epoch": self.epoch, **self._identity_fields(),
                 "drop_last": self.drop_last, "consumed": self.consumed}
        lanes = self._lanes
        worker, num_workers, in_worker = _worker()
        if self.consumed == 0 and consumed:  # a pass begun by DataLoader workers of which this process saw none
            lanes = self._fresh_lanes(self._flag.workers() or 1)
        files = self.source_files()
        if files is not None:  # a stream of data files: the state names them, so a changed file is refused
            state["files"] = files_state(files)
        if self.filtered:  # ranks read different numbers of rows per step: the position is this rank's
            state["rank"], state["world_size"] = self.rank, self.world_size
        if consumed is not None:
            state["consumed"] = self.position_after(self.consumed, int(consumed))
        elif in_worker:  # this worker's own state (torchdata's StatefulDataLoader collects one per worker)
            where = self._worker_pass if self._worker_pass is not None else self._worker_resume
            if where is None:  # its pass has not begun (it delivered no batch yet): that pass, nothing served
                epoch, start, lanes = self._pass_start(self._worker_passes + 1)
                where = {**self._where(worker, num_workers, epoch, start), "rows": 0}
                lanes = self._fresh_lanes(num_workers) if start == 0 else lanes
            state["epoch"], state["consumed"], state["worker"] = where["epoch"], where["start"], dict(where)
        elif self._flag.is_set() and not self.counted_by_loader:
            raise RuntimeError(
                "cannot save this stream's state: DataLoader workers read it, so this process does not know "
                "which rows the training loop received (a plain torch DataLoader with num_workers > 0). Read it "
                f"with {LOADERS_THAT_COUNT}, or pass state_dict(consumed=rows received by this rank)")
        if lanes is not None and (state["consumed"] or state.get("worker")):  # (at an epoch's start any lanes do)
            state["lanes"] = lanes.to_list()
        return seal(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved state: any world size, workers or batch size (see the module docstring).

        A torchdata StatefulDataLoader's whole state is accepted too: its workers' states are merged into
        one global position (`streaming.state.merge_worker_states`), so it also resumes elsewhere; without
        workers it holds this stream's own state."""
        if isinstance(state, dict) and "_snapshot" in state:
            state = merge_worker_states(state)
        elif isinstance(state, dict) and isinstance(state.get("dataset_state"), dict) and "consumed" not in state:
            state = state["dataset_state"]  # a StatefulDataLoader's state without workers: the stream's own inside
        files = self.source_files()
        if files is not None and isinstance(state, dict) and "consumed" in state:
            check_files(state.get("files"), files)
        check_state(state, self._identity_fields(), "stream")
        epoch, consumed = check_int(state, "epoch", "stream", MAX_EPOCH), check_int(state, "consumed", "stream")
        if consumed > self.length:
            raise StateError(f"cannot resume: the saved stream consumed {consumed} rows, but an epoch has "
                             f"{self.length}")
        if not isinstance(state.get("drop_last"), bool):
            raise StateError(f"cannot resume: the saved stream's drop_last must be a bool, got "
                             f"{state.get('drop_last')!r:.40}")
        lanes = Lanes.from_state(state.get("lanes"))
        worker = state.get("worker")
        if worker is not None and not isinstance(worker, dict):
            raise StateError(f"cannot resume: the saved stream's worker must be a dict, got {type(worker).__name__}")
        check_seal(state, "stream")  # the rest was written by a stream as it is: its keys and types can be trusted
        if "rank" in state and (state.get("rank"), state.get("world_size")) != (self.rank, self.world_size):
            raise StateError(f"cannot resume: the saved stream filters rows, so its position is rank "
                             f"{state.get('rank')} of {state.get('world_size')}'s own (ranks keep different numbers "
                             f"of rows); it resumes only that rank of that world size, this is rank {self.rank} of "
                             f"{self.world_size}")
        _, _, in_worker = _worker()
        if worker is not None and not in_worker:
            raise StateError(f"cannot resume: this is DataLoader worker {worker.get('id')} of "
                             f"{worker.get('workers')}'s own state; restore it through the StatefulDataLoader that "
                             "saved it (the same num_workers), or save the loader's state_dict() instead")
        left = self.length - consumed
        if self.drop_last and 0 < left < self.world_size:
            raise StateError(f"cannot resume exactly: {left} rows of epoch {epoch} are left and drop_last=True on "
                             f"{self.world_size} ranks would drop them all; resume on at most {left} ranks, or "
                             "with drop_last=False")
        self._set_position(epoch, consumed, lanes)
        self._worker_resume = dict(worker) if worker is not None and worker.get("rows") else None  # (0: none to skip)
        if worker is None:
            self._flag.forget_finished()
        elif self._served_whole(worker, consumed):  # (restored workers may never iterate: say the epoch ended here)
            self._flag.finish_epoch(epoch, _pass_seed() or 0)

    def _served_whole(self, worker: dict[str, Any], start: int) -> bool:
        """Whether a worker's saved state says it served its whole share of its pass, and it holds the pass's last
        unit (so the pass reached its end)."""
        keys = ("id", "workers", "unit", "world_size", "rows")
        if any(isinstance(worker.get(k), bool) or not isinstance(worker.get(k), int) for k in keys) \
                or worker["unit"] < 1:
            return False
        count = rows_per_rank(self.length, worker["world_size"], self.drop_last, start)
        return worker["id"] == last_unit_worker(count, worker["unit"], worker["workers"]) and \
            worker["rows"] == worker_rows(count, worker["unit"], worker["id"], worker["workers"])

    # -- iteration ---------------------------------------------------------------------------
    def rank_order(self, epoch: int | None = None, start: int = 0, lanes: Lanes | None = None) -> np.ndarray:
        """This rank's positions for a pass over `epoch` (default: the current one) from global position `start`
        in `lanes` (default: this process's lanes of an epoch begun now; materialized: for small datasets and
        tests)."""
        order = self.order.epoch(self.epoch if epoch is None else epoch)
        count = rows_per_rank(self.length, self.world_size, self.drop_last, start)
        indices = rank_indices(np.arange(count), start, self.rank, self.world_size, self.length)
        lanes = self._fresh_lanes(1) if lanes is None else lanes
        if lanes is not None:
            indices = lanes.to_order(indices, self.length, self.drop_last)
        return order.positions_at(self._range[0] + indices)

    def _unit(self, num_workers: int, warn: bool = True) -> int:
        unit = self.batch_size or self.loader_batch_size or (None if self._options["lanes"] else self._fetched_batch)
        if unit is None and warn and num_workers > 1 and not self.counted_by_loader:
            logger.warning("a StreamingDataset read by {} DataLoader workers without loader_batch_size or a loader "
                           "batch_size: rows are dealt one at a time, so batches do not come back in stream order; "
                           "use StreamingDataLoader, or pass loader_batch_size=", num_workers)
        return unit or 1

    def _enter_pass(self, num_workers: int, in_worker: bool) -> None:
        """Where a pass begun now starts: in a DataLoader worker, its copy's pass (`_pass_start`); here, the
        position `begin_pass` gives (and the ranks, torch.distributed may be up by now)."""
        if not in_worker and self._given_rank == (None, None):
            self.rank, self.world_size = resolve_rank(None, None)
        if in_worker:
            self._flag.set(num_workers)  # the main process cannot count what this worker serves
            self._fetched_batch = fetching_batch_size()  # deal whole loader batches, whatever the loader
            self._worker_passes += 1
            self.epoch, self.consumed, self._lanes = self._pass_start()
        else:
            self.begin_pass(counted_here=self.counted_by_loader)

    def _resumed_rows(self, where: dict[str, Any]) -> int:
        """In a DataLoader worker: rows of its pass its loaded state already served (0 without one), once; the
        state must be this worker's (`where`: the same loader layout)."""
        saved, self._worker_resume = self._worker_resume, None
        if saved is None:
            return 0
        if any(saved.get(k) != v for k, v in where.items()):
            raise ValueError(f"cannot resume: worker state {saved} was saved by another loader layout than "
                             f"this worker's {where}; restore with the same num_workers, batch size and ranks")
        return check_int(saved, "rows", "stream worker")

    def __iter__(self) -> Iterator[Any]:
        worker, num_workers, in_worker = _worker()
        self._enter_pass(num_workers, in_worker)
        moves, rank, world = self._moves, self.rank, self.world_size
        epoch, start, n, lo_row, drop_last = self.epoch, self.consumed, self.length, self._range[0], self.drop_last
        count = rows_per_rank(n, world, self.drop_last, start)
        unit = self._unit(num_workers)
        mine = worker_rows(count, unit, worker, num_workers)
        where = self._where(worker, num_workers, epoch, start)
        skip = self._resumed_rows(where) if in_worker else 0
        self._worker_pass = {**where, "rows": skip} if in_worker else None
        lanes = self.pass_lanes(num_workers)  # (checked against the worker's saved state above: same topology)
        if isinstance(self.dataset, MixedSource):
            self.dataset.set_epoch(epoch)  # the sources' own orders follow the mix's epoch
        order = self.order.epoch(epoch)
        reader = make_reader(self.source, self.order.bounds, order.block_window)

        def positions(lo: int, hi: int) -> np.ndarray:
            sequence = worker_indices(np.arange(lo, hi, dtype=np.int64), unit, worker, num_workers)
            g = rank_indices(sequence, start, rank, world, n)
            return order.positions_at(lo_row + (g if lanes is None else lanes.to_order(g, n, drop_last)))

        def counted(rows: int) -> None:  # rows of this worker's (or this process's) sequence served
            if in_worker:
                self._worker_pass["rows"] = rows
            else:
                self.consumed = consumed_after(n, start, world, rows)

        if self.batch_size is not None:
            size = self.batch_size
            for lo in range(skip, mine, size):
                chunk = positions(lo, min(lo + size, mine))
                if len(chunk) < size and self.drop_last_batch:
                    break
                batch = self.collate_fn(reader.rows(chunk)) if self.collate_fn is not None else reader.batch(chunk)
                for _, function, _ in self._ops:
                    batch = function(batch)
                counted(lo + len(chunk))
                yield batch
        elif not self._ops:  # the common case, per row only the count (one store, read by state_dict)
            worker_pass = self._worker_pass
            for lo in range(skip, mine, READ_ROWS):
                rows = reader.rows(positions(lo, min(lo + READ_ROWS, mine)))
                if in_worker:
                    for k, row in enumerate(rows, lo + 1):
                        worker_pass["rows"] = k
                        yield row
                else:
                    for k, row in enumerate(rows, lo + 1):
                        self.consumed = min(n, start + world * k)  # consumed_after, inlined
                        yield row
        else:
            tables = any(fmt for _, _, fmt in self._ops)  # some op receives one-row tables (see _table_format)
            for lo in range(skip, mine, READ_ROWS):
                if tables:
                    table = reader.table(positions(lo, min(lo + READ_ROWS, mine)))
                    rows = [table.slice(i, 1) for i in range(table.num_rows)]
                else:
                    rows = reader.rows(positions(lo, min(lo + READ_ROWS, mine)))
                for k, row in enumerate(rows):
                    if tables:
                        kept, row = self._apply_ops(row)
                    else:
                        kept = True
                        for kind, function, _ in self._ops:
                            if kind == "map":
                                row = function(row)
                            elif not function(row):
                                kept = False
                                break
                    if kept:  # (a row dropped is counted with the next row kept: a resume reads it again)
                        counted(lo + k + 1)
                        yield row
        if in_worker:  # the worker serving the pass's last unit says the epoch ended (the main process's copy and
            if worker == last_unit_worker(count, unit, num_workers):  # the next pass's workers read it)
                self._flag.finish_epoch(epoch, _pass_seed() or 0, self._worker_passes)
        elif self._moves == moves:  # (unless the position was set during the pass)
            self._set_position(epoch + 1, 0, None)  # a finished pass moves on to the next epoch

    def _where(self, worker: int, num_workers: int, epoch: int, start: int) -> dict[str, Any]:
        """A DataLoader worker's pass: which worker of how many, the unit, the rank and the pass's start."""
        return {"id": worker, "workers": num_workers, "unit": self._unit(num_workers, warn=False), "rank": self.rank,
                "world_size": self.world_size, "epoch": epoch, "start": start}

    def __repr__(self) -> str:
        mode = "shuffled" if self._options["shuffle"] else "storage order"
        return (f"StreamingDataset(rows={self.length}, rank={self.rank}/{self.world_size}, {mode}, "
                f"epoch={self.epoch}, consumed={self.consumed})")
