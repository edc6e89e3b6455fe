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

Nothing here grows with the rows: the blocks are permuted as an array over blocks, and a row's
place inside its window is a keyed bijection evaluated on demand (`streaming.bijection`), so the
first row of a shuffled epoch of a billion rows costs milliseconds and a few MB per process.

Ranks and workers (see "who serves which epoch index" below) stripe one global order, so the
rows consumed are always a prefix of it: a state is one number that resumes on any world size.
`Lanes` relabel that global order so each rank x worker serves one contiguous stretch of the epoch
(for sources whose blocks cost a parse or a download to open); the state then adds the topology.
`drop_last` drops the tail of the order, otherwise the order is padded by wrapping around to
its start so every rank gets the same number of rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from stable_datasets.env import env_number
from stable_datasets.errors import StateError
from stable_datasets.streaming.bijection import mix_keys, permute
from stable_datasets.streaming.seeds import check_seed

#: windows of at most this many rows are permuted whole when first read (8 bytes a row), and kept
WINDOW_CACHE_ROWS = 1 << 18
#: windows kept permuted per epoch order (a reader is in one window, two at a boundary, one per source of a mix)
WINDOWS_KEPT = 4


def distinct(values: np.ndarray) -> list[int]:
    """The distinct values of an int array that spans a short range (the windows, blocks or sources one read
    touches), ascending: a bincount, cheaper than np.unique on these sizes. [] for an empty array."""
    if not len(values):
        return []
    low, high = int(values.min()), int(values.max())
    if low == high:
        return [low]
    if high - low > 4 * len(values) + 1024:
        return np.unique(values).tolist()
    return (np.flatnonzero(np.bincount(values - low)) + low).tolist()


def bounds_from_starts(starts: Any, num_rows: int) -> np.ndarray:
    """Block bounds ([0, ..., num_rows], ascending) from block start offsets."""
    starts = np.asarray(starts, dtype=np.int64)
    inner = starts[(starts > 0) & (starts < num_rows)]
    bounds = np.concatenate([[0], inner, [num_rows]]).astype(np.int64)
    if len(bounds) > 1 and np.all(bounds[1:] > bounds[:-1]):  # the usual case: already ascending
        return bounds
    return np.unique(bounds)


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


class EpochOrder:
    """One epoch's order, evaluated lazily: `positions_at(k)` is the stored row at epoch index k.

    It holds arrays over blocks only (the permuted blocks, where each window starts); a row's place
    inside its window is a keyed bijection (`streaming.bijection`), so nothing here grows with rows.
    `block_window[b]` is the window stored block b is read in (None: rows are read one by one).
    """

    def __init__(self, num_rows: int, bounds: np.ndarray | None, block_order: np.ndarray | None,
                 window_in_order: np.ndarray | None, keys: tuple[int, ...] | None):
        self.num_rows = num_rows
        self._bounds, self._keys = bounds, keys
        self._windows: dict[int, np.ndarray] = {}  # window -> its rows' permutation (see _inside)
        self._touched: set[int] = set()  # windows read once (the second read permutes them whole)
        self.block_window: np.ndarray | None = None
        if bounds is None:  # storage order (keys None) or one window of every row (a full permutation)
            self._window_start = np.array([0, num_rows], dtype=np.int64)
            return
        sizes = np.diff(bounds)
        if block_order is None:  # storage order: every block its own window
            block_order = np.arange(len(sizes), dtype=np.int64)
            window_in_order = block_order
        self._block_order = block_order
        sizes_in_order = sizes[block_order]
        self._ordered_start = np.concatenate([[0], np.cumsum(sizes_in_order)]).astype(np.int64)
        windows = int(window_in_order[-1]) + 1 if len(window_in_order) else 0
        first_block = np.searchsorted(window_in_order, np.arange(windows))
        self._window_start = np.concatenate([self._ordered_start[first_block], [num_rows]]).astype(np.int64)
        self.block_window = np.empty(len(sizes), dtype=np.int64)
        self.block_window[block_order] = window_in_order

    def __len__(self) -> int:
        return self.num_rows

    def positions_at(self, index: Any) -> np.ndarray:
        """Stored row positions at epoch indices `index` (an int array in [0, num_rows))."""
        k = np.asarray(index, dtype=np.int64)
        if self._keys is None:  # storage order
            return k.copy()
        window = np.searchsorted(self._window_start, k, side="right") - 1
        start = self._window_start[window]
        inside = self._inside(k - start, window, start)  # rows permuted inside their window
        if self._bounds is None:
            return inside
        g = start + inside  # offset in the row space of the permuted blocks laid end to end
        block = np.searchsorted(self._ordered_start, g, side="right") - 1
        return self._bounds[:-1][self._block_order[block]] + (g - self._ordered_start[block])

    def _inside(self, local: np.ndarray, window: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Each row's place inside its window. A reader asks for a few hundred rows of one or two windows at a
        time, and the bijection's numpy calls cost about the same for 300 rows as for 30,000; so a window of
        at most WINDOW_CACHE_ROWS rows read a second time is permuted whole (O(window) memory, a few windows
        kept) and looked up after; larger windows (a full permutation) are evaluated for the rows asked only."""
        size = self._window_start[window + 1] - start
        if not len(local):
            return local.copy()
        windows = distinct(window)
        first_touch = [w for w in windows if w not in self._windows and w not in self._touched]
        self._touched.update(first_touch)
        if first_touch or any(int(self._window_start[w + 1] - self._window_start[w]) > WINDOW_CACHE_ROWS
                              for w in windows):
            # a window read for the first time evaluates only the rows asked (the first row of an epoch stays
            # cheap); read again, it is permuted whole
            return permute(local, size, mix_keys(*self._keys, window))
        out = np.empty_like(local)
        for w in windows:
            table = self._windows.get(w)
            if table is None:
                n = int(self._window_start[w + 1] - self._window_start[w])
                table = permute(np.arange(n, dtype=np.int64), n, mix_keys(*self._keys, w))
                if len(self._windows) >= WINDOWS_KEPT:
                    self._windows.pop(next(iter(self._windows)))  # the oldest first
                self._windows[w] = table
            if len(windows) == 1:
                return table[local]
            mine = window == w
            out[mine] = table[local[mine]]
        return out

    @property
    def positions(self) -> np.ndarray:
        """Every position of the epoch (num_rows integers: for small datasets and tests, never on a hot path)."""
        return self.positions_at(np.arange(self.num_rows, dtype=np.int64))


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
        object.__setattr__(self, "seed", check_seed(self.seed, "shuffle"))
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
        """The order of `epoch`: O(blocks) work and memory, never O(rows)."""
        if self.num_rows == 0:
            return EpochOrder(0, None, None, None, None)
        if not self.shuffle:
            return EpochOrder(self.num_rows, self.bounds, None, None, None)
        keys = (int(self.seed), int(epoch))
        if self.bounds is None:
            return EpochOrder(self.num_rows, None, None, None, keys)
        rng = np.random.default_rng([int(self.seed), int(epoch)])  # its own stream per (seed, epoch)
        if self._shard_windows():
            block_order, window_in_order = self._blocks_in_shard_windows(rng)
        else:
            block_order = rng.permutation(self.num_blocks).astype(np.int64)
            window_in_order = np.arange(self.num_blocks, dtype=np.int64) // self._window()
        return EpochOrder(self.num_rows, self.bounds, block_order, window_in_order, keys)

    def _window(self) -> int:
        """window_blocks as numpy can divide by: a window of more blocks than there are is all of them."""
        return min(self.window_blocks, max(1, self.num_blocks))

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
        key = window_of_ordered * (self.num_blocks + 1) + (np.arange(self.num_blocks) - first) // self._window()
        window_in_order = np.concatenate([[0], np.cumsum(key[1:] != key[:-1])]).astype(np.int64)
        return block_order.astype(np.int64), window_in_order


# -- who serves which epoch index ------------------------------------------------------------------
# A pass over an epoch starts at a global position `start` (0, or where a saved state stopped). Rank r of
# N serves epoch indices start + r, start + r + N, ... (its "rank sequence"), so when every rank has
# consumed i rows (they advance in lockstep) the rows consumed are exactly the prefix [0, start + N*i) of
# the epoch order: that one number is the state, whatever N, workers or batch size were.
# Inside a rank, units of `unit` rows of the rank sequence are dealt to the DataLoader workers in turn
# (unit t to worker t % V), the order a DataLoader hands their batches back in.


def rows_per_rank(num_rows: int, world_size: int, drop_last: bool, start: int = 0) -> int:
    """Rows each rank serves in a pass that starts at global position `start` (padded unless drop_last)."""
    left = max(num_rows - start, 0)
    return left // world_size if drop_last else -(-left // world_size)


def rank_indices(i: Any, start: int, rank: int, world_size: int, num_rows: int) -> np.ndarray:
    """Epoch indices of rank-sequence entries `i`; past the end they wrap to the start of the order (padding)."""
    g = start + rank + np.asarray(i, dtype=np.int64) * world_size
    return g % num_rows if num_rows else g


def consumed_after(num_rows: int, start: int, world_size: int, rank_rows: int) -> int:
    """The global position after every rank served `rank_rows` rows of a pass starting at `start`."""
    return min(num_rows, start + world_size * rank_rows)


def worker_rows(count: int, unit: int, worker: int, num_workers: int) -> int:
    """Rows worker `worker` of `num_workers` serves out of a rank sequence of `count` rows dealt by units."""
    if num_workers <= 1:
        return count
    units = -(-count // unit)
    mine = max(0, -(-(units - worker) // num_workers))
    short = count % unit
    if short and mine and (units - 1) % num_workers == worker:
        return mine * unit - (unit - short)
    return mine * unit


def worker_indices(k: Any, unit: int, worker: int, num_workers: int) -> np.ndarray:
    """Rank-sequence indices of worker `worker`'s k-th rows (k < worker_rows(...))."""
    k = np.asarray(k, dtype=np.int64)
    if num_workers <= 1:
        return k
    return (worker + (k // unit) * num_workers) * unit + k % unit


#: the most ranks a stream is split over (the lanes' limit too)
MAX_WORLD_SIZE = 1 << 24


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size): as given, else from torch.distributed when it is initialized, else (0, 1)."""
    if rank is None and world_size is None:
        rank, world_size = _distributed_rank()
    elif rank is None or world_size is None:
        raise ValueError("pass both rank= and world_size=, or neither (torch.distributed is then asked)")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= MAX_WORLD_SIZE:
        raise ValueError(f"world_size must be an int in [1, {MAX_WORLD_SIZE}], got {world_size!r}")
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


# -- lanes: each rank x worker reads one contiguous stretch of the epoch order ----------------------
# Striping rows (above) makes every rank and worker touch every block the order reaches: a stream whose
# blocks are costly to open (a data file's unit parsed, a remote shard downloaded) opens each block in every
# consumer. `Lanes` relabels the global positions so that the same striping serves each consumer one
# contiguous stretch ("lane") of the epoch order S: consumer c = (rank r, worker w) is lane r * V + w, its
# lane as long as the rows it serves in a whole pass, lanes laid end to end. Global position g is served by
# rank g % N as its rank-sequence entry i = g // N, which is worker (i // u) % V's k-th row; the lane order
# maps g to S index lane_start(c) + k. A permutation of [0, n) computed by arithmetic (nothing per row or per
# consumer is stored), so the state is still one prefix of it plus the topology (N, V, u) it was cut for.


def _lane_rows(rank_rows: np.ndarray, unit: int, workers: int, before: np.ndarray) -> np.ndarray:
    """Rows the workers `< before` of a rank serve out of `rank_rows` dealt by units (worker_rows summed)."""
    units = -(-rank_rows // unit)
    rounds, extra = units // workers, units % workers
    rows = (before * rounds + np.minimum(before, extra)) * unit
    short = rank_rows % unit
    last = np.where(units > 0, (units - 1) % workers, -1)  # the worker holding the rank's last unit
    return rows - np.where((short > 0) & (last < before), unit - short, 0)


@dataclass(frozen=True)
class Lanes:
    """The lane order of one topology: `world_size` ranks, `workers` DataLoader workers each, dealt `unit` rows
    at a time (see the comment above). `to_order(g, n, drop_last)` is the epoch-order index of global position g.
    """

    world_size: int
    workers: int
    unit: int

    def __post_init__(self) -> None:
        for name in ("world_size", "workers", "unit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"lanes: {name} must be a positive int, got {value!r}")
        if self.workers > 1 << 16 or self.world_size > 1 << 24 or self.unit > 1 << 32:
            raise ValueError(f"lanes: {self.world_size} ranks x {self.workers} workers x units of {self.unit} rows is "
                             f"past the limits ({1 << 24} ranks, {1 << 16} workers, {1 << 32} rows)")

    def to_list(self) -> list[int]:
        return [int(self.world_size), int(self.workers), int(self.unit)]

    @classmethod
    def from_state(cls, value: Any) -> Lanes | None:
        """The lanes a saved state names (None: row stripes), or a clear error."""
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != 3:
            raise StateError(f"cannot resume: the saved stream's lanes must be [world_size, workers, unit], got "
                             f"{value!r:.60}")
        try:
            return cls(*value)
        except ValueError as exc:
            raise StateError(f"cannot resume: {exc}") from None

    def to_order(self, g: Any, num_rows: int, drop_last: bool) -> np.ndarray:
        """Epoch-order indices (in [0, num_rows)) of global positions `g` (in [0, num_rows))."""
        g = np.asarray(g, dtype=np.int64)
        n, world, workers, unit = int(num_rows), int(self.world_size), int(self.workers), int(self.unit)
        served = n if not drop_last else world * (n // world)  # rows striped over the ranks (drop_last: the rest
        if world == 1 and workers == 1:  # is dropped and keeps its place)
            return g.copy()
        rank, i = g % world, g // world
        worker = (i // unit) % workers
        k = (i // (unit * workers)) * unit + i % unit
        q, m = divmod(served, world)
        rank_rows = q + (rank < m)  # rows of each rank that are real (not padding): a prefix of its sequence
        lane_start = rank * q + np.minimum(rank, m) + _lane_rows(rank_rows, unit, workers, worker)
        return np.where(g < served, lane_start + k, g)

    def lane_bounds(self, num_rows: int, drop_last: bool) -> np.ndarray:
        """Where each consumer's lane starts in the epoch order, in consumer order (rank-major), then its end:
        world_size x workers + 1 integers (for tests and docs; the order itself never builds it)."""
        world, workers = int(self.world_size), int(self.workers)
        served = num_rows if not drop_last else world * (num_rows // world)
        q, m = divmod(served, world)
        rank = np.repeat(np.arange(world, dtype=np.int64), workers)
        worker = np.tile(np.arange(workers, dtype=np.int64), world)
        starts = rank * q + np.minimum(rank, m) + _lane_rows(q + (rank < m), int(self.unit), workers, worker)
        return np.concatenate([starts, [served]]).astype(np.int64)
