"""`StreamingDataset`: an iterable over a dataset for training, resumable mid-epoch.

Order: `streaming.order` (blocks in storage order, or a seeded block shuffle; no global RNG).
Split: each DDP rank takes a contiguous share of the epoch order; inside a rank, DataLoader
workers are dealt runs of `loader_batch_size` rows in turn (or whole batches after `batch()`),
which is the order a DataLoader hands batches back in. So a DataLoader over this stream yields
the rank's share in order, whatever its `num_workers`, and no row is served twice or skipped.

Resume rule: the state is (epoch, rows of this rank's share consumed). Iterating in this
process counts rows as they are yielded. With DataLoader workers the counting has to happen
where the batches arrive: `StreamingDataLoader` does it (and sets `loader_batch_size` for you);
with a plain DataLoader, pass `consumed=` (rows the training loop received) to `state_dict`.
A pass that runs to the end moves on to the next epoch; `set_epoch(e)` jumps to epoch e.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from loguru import logger

from stable_datasets.streaming.order import (
    BlockOrder,
    bounds_from_starts,
    dealt_order,
    rank_share,
    resolve_rank,
    rows_per_rank,
    split_large_blocks,
    worker_share,
)
from stable_datasets.streaming.reader import make_reader
from stable_datasets.streaming.sampler import check_resumable, dataset_block_bounds, dataset_shard_bounds

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


class StreamingDataset(_IterableBase):
    """Rows (or batches, after `batch()`) of one rank, epoch after epoch.

    `dataset`: a StableDataset (read a block at a time as Arrow) or any map-style dataset with
    `__len__`/`__getitem__` (read row by row; `block_bounds()` if it has one). `shuffle` with
    `seed` and `window_blocks` picks the block shuffle (`streaming.order`); `window_shards` k
    shuffles the shard order and blocks only within windows of k shards (bounded local cache for a
    remote stream; None: blocks from the whole split); `rank`/`world_size`
    default to torch.distributed (or torchrun's RANK/WORLD_SIZE); `drop_last=False` pads the
    last rank's share by wrapping around to the start of the order.
    """

    def __init__(self, dataset: Any, *, shuffle: bool = False, seed: int = 0, window_blocks: int = 8,
                 window_shards: int | None = None, max_block_rows: int | None = MAX_BLOCK_ROWS,
                 rank: int | None = None, world_size: int | None = None, drop_last: bool = False,
                 loader_batch_size: int | None = None):
        self.dataset = dataset
        self.num_rows = len(dataset)
        self._options = {"shuffle": shuffle, "seed": seed, "window_blocks": window_blocks,
                         "window_shards": window_shards, "max_block_rows": max_block_rows, "rank": rank,
                         "world_size": world_size, "drop_last": drop_last, "loader_batch_size": loader_batch_size}
        BlockOrder(self.num_rows, None, seed=seed, shuffle=shuffle, window_blocks=window_blocks,
                   window_shards=window_shards)  # checks options
        self._order: BlockOrder | None = None  # built on first use, so a Lance cache is opened where it is read
        self._given_rank = (rank, world_size)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.drop_last = drop_last
        self.loader_batch_size = loader_batch_size
        self.batch_size: int | None = None
        self.drop_last_batch = False
        self.collate_fn: Callable[[list[Any]], Any] | None = None
        self._maps: list[Callable[[Any], Any]] = []
        self.epoch = 0
        self.consumed = 0
        #: (workers, rows per unit) this epoch is dealt to; StreamingDataLoader sets it when an epoch starts
        self.deal: tuple[int, int] = (1, 1)

    @property
    def order(self) -> BlockOrder:
        """How epochs are ordered (reads the dataset's block bounds the first time)."""
        if self._order is None:
            bounds = dataset_block_bounds(self.dataset)
            if bounds is not None:
                bounds = split_large_blocks(bounds_from_starts(bounds, self.num_rows), self._options["max_block_rows"])
            options = self._options
            shards = dataset_shard_bounds(self.dataset) if options["window_shards"] is not None else None
            self._order = BlockOrder(self.num_rows, bounds, seed=options["seed"], shuffle=options["shuffle"],
                                     window_blocks=options["window_blocks"], shards=shards,
                                     window_shards=options["window_shards"])
        return self._order

    def order_identity(self) -> str:
        """What decides the order, hashed: the dataset's fingerprint when it has one (so the main process
        need not open the cache), else the block bounds."""
        fingerprint = getattr(self.dataset, "fingerprint", None)
        if not isinstance(fingerprint, str):
            return self.order.identity()
        keys = ("seed", "shuffle", "window_blocks", "max_block_rows")
        described = [fingerprint, self.num_rows, *(self._options[k] for k in keys)]
        if self._options["window_shards"] is not None:  # (absent from states saved before shard windows)
            described.append({"window_shards": self._options["window_shards"]})
        return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]

    # -- lazy ops: each returns a new stream (epoch 0, nothing consumed) ------------------------
    def _with(self, **changes: Any) -> StreamingDataset:
        other = StreamingDataset(self.dataset, **{**self._options, **changes})
        other.batch_size, other.drop_last_batch, other.collate_fn = self.batch_size, self.drop_last_batch, \
            self.collate_fn
        other._maps = list(self._maps)
        return other

    def shuffle(self, seed: int = 0, window_blocks: int = 8, window_shards: int | None = None) -> StreamingDataset:
        """The block shuffle (see streaming.order): blocks permuted, rows permuted within windows; with
        `window_shards` k, shards permuted and blocks only within windows of k shards."""
        return self._with(shuffle=True, seed=seed, window_blocks=window_blocks, window_shards=window_shards)

    def map(self, function: Callable[[Any], Any]) -> StreamingDataset:
        """Apply `function` to every row (or batch, after `batch()`), lazily, in the reading process."""
        other = self._with()
        other._maps.append(function)
        return other

    def batch(self, batch_size: int, *, drop_last_batch: bool = False,
              collate_fn: Callable[[list[Any]], Any] | None = None) -> StreamingDataset:
        """Yield batches of `batch_size` rows: a StableDataset's format as columns (one Arrow read and
        decode per batch), or `collate_fn(rows)`. Use `DataLoader(stream, batch_size=None)` then."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if self._maps:
            raise ValueError("call batch() before map(): a map after batch() receives whole batches")
        other = self._with()
        other.batch_size, other.drop_last_batch, other.collate_fn = batch_size, drop_last_batch, collate_fn
        return other

    # -- epochs and resume -------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.consumed = int(epoch), 0

    def deal_to(self, num_workers: int, unit: int) -> None:
        """Lay out the epoch about to start for `num_workers` DataLoader workers reading `unit` rows at a time:
        each worker then reads its own run of the order (its own blocks). Mid-epoch the saved layout stays."""
        if self.consumed == 0:
            self.deal = (max(int(num_workers), 1), max(int(unit), 1))

    def open_before_fork(self) -> None:
        """Open, in this process, what forked DataLoader workers can share (the maps and held columns of a
        v2 Lance cache on local disk), so each worker does not open it again; StreamingDataLoader calls it."""
        for backend in getattr(self.dataset, "_backends", ()):
            hook = getattr(backend, "open_before_fork", None)
            if hook is not None:
                hook()

    def rows_per_epoch(self) -> int:
        """Rows of this rank's share of one epoch."""
        return rows_per_rank(self.num_rows, self.world_size, self.drop_last)

    def __len__(self) -> int:
        rows = self.rows_per_epoch()
        if self.batch_size is None:
            return rows
        return rows // self.batch_size if self.drop_last_batch else -(-rows // self.batch_size)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Where this rank is: epoch and rows consumed (`consumed=` overrides the count kept here)."""
        return {"epoch": self.epoch, "consumed": self.consumed if consumed is None else int(consumed),
                "seed": self._options["seed"], "world_size": self.world_size, "num_rows": self.num_rows,
                "order": self.order_identity(), "drop_last": self.drop_last, "deal": list(self.deal)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_resumable(state, {"num_rows": self.num_rows, "seed": self._options["seed"],
                                "world_size": self.world_size, "drop_last": self.drop_last,
                                "order": self.order_identity()}, "stream",
                        required=("consumed", "epoch", "seed", "num_rows", "world_size"))
        for key in ("consumed", "epoch"):
            value = state.get(key) if isinstance(state, dict) else None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"cannot resume: the saved stream's {key} must be a non-negative int, got {value!r} "
                                 "(pass the state_dict() of a stream)")
        consumed = int(state["consumed"])
        if not 0 <= consumed <= self.rows_per_epoch():
            raise ValueError(f"cannot resume: the saved stream consumed {consumed} rows, but an epoch of this "
                             f"rank has {self.rows_per_epoch()}")
        deal = state.get("deal", [1, 1])  # states saved before epochs were dealt to workers: no deal
        if (not isinstance(deal, (list, tuple)) or len(deal) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in deal)
                or deal[0] > MAX_WORKERS):
            raise ValueError(f"cannot resume: the saved stream's deal must be [workers, rows per unit] with workers "
                             f"from 1 to {MAX_WORKERS}, got {deal!r:.80}")
        deal = [deal[0], min(deal[1], max(self.rows_per_epoch(), 1))]  # a unit past the epoch is the whole epoch
        self.epoch, self.consumed, self.deal = int(state["epoch"]), consumed, (deal[0], deal[1])

    # -- iteration ---------------------------------------------------------------------------
    def rank_order(self, epoch: int | None = None, deal: tuple[int, int] | None = None) -> np.ndarray:
        """This rank's positions for an epoch (default: the current one), in the order served when the epoch
        is dealt to `deal` = (workers, rows per unit) (default: the stream's, see `deal_to`)."""
        return self._served(self.order.epoch(self.epoch if epoch is None else epoch).positions, deal)

    def _served(self, positions: np.ndarray, deal: tuple[int, int] | None = None) -> np.ndarray:
        share = rank_share(positions, self.rank, self.world_size, self.drop_last)
        workers, unit = self.deal if deal is None else deal
        return share[dealt_order(len(share), unit, workers)]

    def _unit(self, num_workers: int) -> int:
        unit = self.batch_size or self.loader_batch_size
        if unit is None:
            if num_workers > 1:
                logger.warning("a StreamingDataset read by {} DataLoader workers without loader_batch_size: rows "
                               "are dealt one at a time, so batches do not come back in stream order and a resume "
                               "is not exact; use StreamingDataLoader, or pass loader_batch_size=", num_workers)
            return 1
        return unit

    def __iter__(self) -> Iterator[Any]:
        worker, num_workers, in_worker = _worker()
        if not in_worker and self._given_rank == (None, None):
            self.rank, self.world_size = resolve_rank(None, None)  # torch.distributed may be up by now
        if not in_worker and self.consumed == 0:
            self.deal = (1, 1)  # an epoch read in this process is served in its own order
        epoch, start = self.epoch, self.consumed
        order = self.order.epoch(epoch)
        rest = self._served(order.positions)[start:]
        mine = worker_share(len(rest), self._unit(num_workers), worker, num_workers)
        positions = rest[mine]
        reader = make_reader(self.dataset, self.order.bounds, order.block_window)
        counting = not in_worker  # only a stream iterated in this process sees what is consumed
        if self.batch_size is not None:
            size = self.batch_size
            for lo in range(0, len(positions), size):
                chunk = positions[lo:lo + size]
                if len(chunk) < size and self.drop_last_batch:
                    break
                batch = self.collate_fn(reader.rows(chunk)) if self.collate_fn is not None else reader.batch(chunk)
                for function in self._maps:
                    batch = function(batch)
                if counting:
                    self.consumed = start + lo + len(chunk)
                yield batch
        else:
            for lo in range(0, len(positions), READ_ROWS):
                rows = reader.rows(positions[lo:lo + READ_ROWS])
                for k, row in enumerate(rows):
                    for function in self._maps:
                        row = function(row)
                    if counting:
                        self.consumed = start + lo + k + 1
                    yield row
        if counting and self.epoch == epoch:
            self.epoch, self.consumed = epoch + 1, 0  # a finished pass moves on to the next epoch

    def __repr__(self) -> str:
        mode = "shuffled" if self._options["shuffle"] else "storage order"
        return (f"StreamingDataset(rows={self.num_rows}, rank={self.rank}/{self.world_size}, {mode}, "
                f"epoch={self.epoch}, consumed={self.consumed})")
