"""The order of one epoch: blocks shuffled, then rows shuffled inside windows of blocks.

A block is a run of rows stored together (an Arrow record batch, a Parquet row group, a slice
of a Lance fragment, the windows of one video). The epoch order is computed the same way on
every rank and worker, from (block bounds, seed, epoch, window_blocks) only, with its own RNG:

1. the blocks are permuted;
2. consecutive permuted blocks form windows of `window_blocks` blocks;
3. the rows of each window are permuted.

With `shards` (the row bounds of the stored shards) and `window_shards` k, step 1 is bounded: the
shards are permuted, consecutive permuted shards form shard windows of k shards, and the blocks
are permuted inside their shard window only (block windows never cross a shard window). A reader
then needs about k shards at a time, which is what lets a remote stream shuffle within a local
cache smaller than the split (litdata and MDS shuffle shard order the same way). With k at least
the number of shards, the order is the one without shards.

A reader then holds at most the blocks of one window (two, at a boundary) while it serves the
window's rows, so reads stay near-sequential, while neighbours in storage end up anywhere in
a window that mixes `window_blocks` unrelated parts of the dataset. With no block bounds the
order is a full permutation; with `shuffle=False` it is storage order.

Ranks take contiguous shares of the global order (so each rank reads mostly its own blocks);
`drop_last` drops the tail of the order, otherwise the order is padded by wrapping around to
its start so every rank gets the same number of rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from stable_datasets.env import env_number


def bounds_from_starts(starts: Any, num_rows: int) -> np.ndarray:
    """Block bounds ([0, ..., num_rows], ascending) from block start offsets."""
    starts = np.asarray(starts, dtype=np.int64)
    inner = starts[(starts > 0) & (starts < num_rows)]
    return np.unique(np.concatenate([[0], inner, [num_rows]])).astype(np.int64)


def split_large_blocks(bounds: np.ndarray, max_rows: int | None) -> np.ndarray:
    """Bounds with every block longer than `max_rows` cut into pieces of at most that many rows."""
    bounds = np.asarray(bounds, dtype=np.int64)
    if not max_rows or len(bounds) < 2 or int(np.diff(bounds).max()) <= max_rows:
        return bounds
    pieces = [np.arange(lo, hi, max_rows) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    return np.concatenate([*pieces, bounds[-1:]]).astype(np.int64)


def runs_of_blocks(block_ids: np.ndarray) -> np.ndarray:
    """Bounds of the maximal runs of equal block ids (a view's rows that lie in one stored block)."""
    block_ids = np.asarray(block_ids)
    cuts = np.flatnonzero(block_ids[1:] != block_ids[:-1]) + 1
    return np.concatenate([[0], cuts, [len(block_ids)]]).astype(np.int64)


def check_bounds(bounds: np.ndarray, num_rows: int) -> np.ndarray:
    bounds = np.asarray(bounds, dtype=np.int64)
    if len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != num_rows or np.any(np.diff(bounds) <= 0):
        if num_rows == 0 and len(bounds) >= 1 and not bounds.any():
            return np.zeros(1, np.int64)
        raise ValueError(f"block bounds must rise strictly from 0 to the {num_rows} rows, got "
                         f"{bounds[:5].tolist()}{'...' if len(bounds) > 5 else ''} ({len(bounds)} entries)")
    return bounds


@dataclass(frozen=True)
class EpochOrder:
    """One epoch: row positions in order, and for each block the window it is read in (None: a full
    permutation, rows are read one by one)."""

    positions: np.ndarray
    block_window: np.ndarray | None


@dataclass(frozen=True, eq=False)
class BlockOrder:
    """How epochs are ordered; `bounds` None means a full permutation when shuffling."""

    num_rows: int
    bounds: np.ndarray | None = None
    seed: int = 0
    shuffle: bool = True
    window_blocks: int = 8
    shards: np.ndarray | None = None
    window_shards: int | None = None

    def __post_init__(self) -> None:
        if self.window_shards is not None and (isinstance(self.window_shards, bool)
                                               or not isinstance(self.window_shards, int) or self.window_shards < 1):
            raise ValueError(f"window_shards must be a positive int or None, got {self.window_shards!r}")
        if self.bounds is not None:
            bounds = check_bounds(self.bounds, self.num_rows)
            if self.window_shards is not None and self.shards is not None:
                shards = check_bounds(self.shards, self.num_rows)
                object.__setattr__(self, "shards", shards)
                bounds = np.union1d(bounds, shards).astype(np.int64)  # no block crosses a shard
            object.__setattr__(self, "bounds", bounds)
        if self.shards is not None and (self.window_shards is None or self.bounds is None):
            object.__setattr__(self, "shards", None)  # no shard window: the shards do not decide the order
        if isinstance(self.window_blocks, bool) or not isinstance(self.window_blocks, int) or self.window_blocks < 1:
            raise ValueError(f"window_blocks must be a positive int, got {self.window_blocks!r}")

    @property
    def num_blocks(self) -> int:
        return 0 if self.bounds is None else len(self.bounds) - 1

    def identity(self) -> str:
        """A short hash of what decides the order (checked when a saved state is loaded)."""
        digest = hashlib.sha256(repr((self.num_rows, self.seed, self.shuffle, self.window_blocks)).encode())
        if self.bounds is not None:
            digest.update(self.bounds.tobytes())
        if self._shard_windows():
            digest.update(repr(self.window_shards).encode() + self.shards.tobytes())
        return digest.hexdigest()[:16]

    def epoch(self, epoch: int) -> EpochOrder:
        n = self.num_rows
        if not self.shuffle:
            windows = None if self.bounds is None else np.arange(self.num_blocks, dtype=np.int64)
            return EpochOrder(np.arange(n, dtype=np.int64), windows)
        rng = np.random.default_rng([self.seed, epoch])  # its own stream per (seed, epoch)
        if self.bounds is None:
            return EpochOrder(rng.permutation(n).astype(np.int64), None)
        starts, sizes = self.bounds[:-1], np.diff(self.bounds)
        if self._shard_windows():
            block_order, window_in_order = self._blocks_in_shard_windows(rng)
        else:
            block_order = rng.permutation(self.num_blocks)
            window_in_order = np.arange(self.num_blocks, dtype=np.int64) // self.window_blocks
        sizes_in_order = sizes[block_order]
        out_starts = np.cumsum(sizes_in_order) - sizes_in_order
        # row positions of the permuted blocks, laid end to end, without a Python loop over blocks
        positions = np.arange(n, dtype=np.int64) + np.repeat(starts[block_order] - out_starts, sizes_in_order)
        window_of_row = np.repeat(window_in_order, sizes_in_order)
        shuffled = np.lexsort((rng.random(n), window_of_row))  # rows permuted within their window
        block_window = np.empty(self.num_blocks, dtype=np.int64)
        block_window[block_order] = window_in_order
        return EpochOrder(positions[shuffled], block_window)

    def _shard_windows(self) -> bool:
        return self.shards is not None and len(self.shards) - 1 > self.window_shards

    def _blocks_in_shard_windows(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(blocks in epoch order, the block window of each): shards permuted, blocks permuted inside windows
        of `window_shards` permuted shards, block windows cut inside each shard window."""
        num_shards = len(self.shards) - 1
        shard_rank = np.empty(num_shards, dtype=np.int64)
        shard_rank[rng.permutation(num_shards)] = np.arange(num_shards)
        shard_of_block = np.searchsorted(self.shards, self.bounds[:-1], side="right") - 1
        shard_window = shard_rank[shard_of_block] // self.window_shards
        block_order = np.lexsort((rng.random(self.num_blocks), shard_window))
        window_of_ordered = shard_window[block_order]
        first = np.searchsorted(window_of_ordered, window_of_ordered, side="left")  # each shard window's first
        key = window_of_ordered * (self.num_blocks + 1) + (np.arange(self.num_blocks) - first) // self.window_blocks
        window_in_order = np.concatenate([[0], np.cumsum(key[1:] != key[:-1])]).astype(np.int64)
        return block_order.astype(np.int64), window_in_order


def rows_per_rank(num_rows: int, world_size: int, drop_last: bool) -> int:
    return num_rows // world_size if drop_last else -(-num_rows // world_size)


def rank_share(order: np.ndarray, rank: int, world_size: int, drop_last: bool) -> np.ndarray:
    """This rank's contiguous share of the global order (padded by wrapping around unless drop_last)."""
    per_rank = rows_per_rank(len(order), world_size, drop_last)
    if per_rank * world_size > len(order):
        order = np.resize(order, per_rank * world_size)  # repeats the order from its start
    return order[rank * per_rank:(rank + 1) * per_rank]


def dealt_order(count: int, unit: int, num_workers: int) -> np.ndarray:
    """A permutation of `count` offsets such that, when its units of `unit` rows are dealt to `num_workers`
    workers in turn (`worker_share`), each worker serves one contiguous run of the original order.

    Served unit k goes to worker k % num_workers; worker w's units are taken, in order, from one run of
    the original units, so each worker reads its own blocks. The runs are laid out so the last (short)
    unit of the original order is also served last: every batch but the last holds `unit` rows.
    """
    if num_workers <= 1 or count <= unit:
        return np.arange(count, dtype=np.int64)
    units = -(-count // unit)
    served = np.arange(units, dtype=np.int64)
    slot = served % num_workers
    last_slot = (units - 1) % num_workers
    layout = (np.arange(num_workers) + last_slot + 1) % num_workers  # runs in this slot order: the last unit's last
    sizes_in_layout = np.bincount(slot, minlength=num_workers)[layout]
    run_start = np.empty(num_workers, dtype=np.int64)
    run_start[layout] = np.cumsum(sizes_in_layout) - sizes_in_layout
    source_unit = run_start[slot] + served // num_workers
    starts = source_unit * unit
    sizes = np.minimum(starts + unit, count) - starts
    out_starts = np.cumsum(sizes) - sizes
    return np.arange(count, dtype=np.int64) + np.repeat(starts - out_starts, sizes)


def worker_share(count: int, unit: int, worker: int, num_workers: int) -> np.ndarray:
    """Offsets (into a sequence of `count` rows) that worker `worker` serves: units of `unit` rows dealt
    round-robin, which is the order a DataLoader hands the workers' batches back in."""
    offsets = np.arange(count, dtype=np.int64)
    if num_workers <= 1:
        return offsets
    return offsets[(offsets // unit) % num_workers == worker]


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size): as given, else from torch.distributed when it is initialized, else (0, 1)."""
    if rank is None and world_size is None:
        rank, world_size = _distributed_rank()
    elif rank is None or world_size is None:
        raise ValueError("pass both rank= and world_size=, or neither (torch.distributed is then asked)")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank!r} is not in [0, {world_size})")
    return rank, world_size


def _distributed_rank() -> tuple[int, int]:
    try:
        import torch.distributed as dist
    except ImportError:
        return 0, 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank = env_number("RANK", -1, int, lambda n: n >= 0, "is not a rank (an int >= 0)")
    world_size = env_number("WORLD_SIZE", 0, int, lambda n: n >= 1, "is not a world size (an int >= 1)")
    if rank >= 0 and world_size:  # torchrun, before init_process_group
        return rank, world_size
    return 0, 1
