"""`BlockShuffleSampler`: a seeded, resumable, rank-aware order of row indices for map-style datasets.

The order is `streaming.order.BlockOrder`: blocks shuffled, rows shuffled within windows of
`window_blocks` blocks, so a DataLoader reading these indices touches a few blocks at a time
(one decoded Parquet row group, Lance slice or Arrow batch is reused by the rows around it).
Pass a dataset whose row source has blocks (`streaming.source.Blocks`: a StableDataset, a
PackedSFTDataset) or `block_bounds=` directly; without bounds the order is a full permutation.

Ranks stripe one global order (rank r serves positions r, r + N, ...), so the rule for resuming
is the stream's: the state is (epoch, global position), and it loads on any world size (see
`streaming.iterable`). The sampler counts the indices it has handed out; a DataLoader with workers
pulls indices ahead of the training loop (prefetch), so either wrap the loader in
`StreamingDataLoader` (it records the rows the loop has received) or pass `consumed=` (rows this
rank's loop received in this pass) to `state_dict`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from stable_datasets.errors import StateError
from stable_datasets.streaming.order import (
    BlockOrder,
    bounds_from_starts,
    consumed_after,
    rank_indices,
    resolve_rank,
    rows_per_rank,
    split_large_blocks,
)
from stable_datasets.streaming.source import block_bounds_of
from stable_datasets.streaming.state import (
    MAX_EPOCH,
    STATE_FORMAT,
    check_epoch,
    check_int,
    check_seal,
    check_state,
    seal,
)

#: indices computed together (the order is evaluated lazily, a chunk at a time)
CHUNK = 4096


class BlockShuffleSampler:
    """Indices of one rank, epoch after epoch. `len()` is the rows per rank per epoch.

    `drop_last=False` (the default, as torch's DistributedSampler) pads the last rank by wrapping
    around to the start of the epoch order, so some rows appear twice in an epoch when the
    rows do not divide by `world_size`; `drop_last=True` drops the tail of the order instead.
    A pass that runs to the end moves on to the next epoch by itself; `set_epoch(e)` jumps to e.
    """

    def __init__(self, data: int | Sequence[Any], *, block_bounds: Any = None, seed: int = 0, shuffle: bool = True,
                 window_blocks: int = 8, max_block_rows: int | None = None, rank: int | None = None,
                 world_size: int | None = None, drop_last: bool = False):
        self.num_samples = int(data) if isinstance(data, (int, np.integer)) else len(data)
        bounds = block_bounds_of(data) if block_bounds is None and not isinstance(data, int) else block_bounds
        if bounds is not None:
            bounds = split_large_blocks(bounds_from_starts(bounds, self.num_samples), max_block_rows)
        self.order = BlockOrder(self.num_samples, bounds, seed=seed, shuffle=shuffle, window_blocks=window_blocks)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.epoch = 0
        self.consumed = 0  # global position: every rank handed out the indices before it
        self._pass_start = 0  # the position the current pass began at

    def set_epoch(self, epoch: int) -> None:
        epoch = check_epoch(int(epoch) if isinstance(epoch, np.integer) else epoch, "sampler")
        if epoch != self.epoch:
            self.epoch, self.consumed, self._pass_start = epoch, 0, 0

    def __len__(self) -> int:
        return rows_per_rank(self.num_samples, self.world_size, self.drop_last)

    def rows_left(self) -> int:
        """Indices this rank hands out from the saved position to the end of the epoch."""
        return rows_per_rank(self.num_samples, self.world_size, self.drop_last, self.consumed)

    def position_after(self, start: int, rank_rows: int) -> int:
        """The global position once every rank handed out `rank_rows` indices of a pass begun at `start`."""
        return consumed_after(self.num_samples, start, self.world_size, rank_rows)

    def rank_order(self) -> np.ndarray:
        """This rank's indices for the rest of the current epoch, in order (materialized: for tests)."""
        order = self.order.epoch(self.epoch)
        return order.positions_at(rank_indices(np.arange(self.rows_left()), self.consumed, self.rank,
                                               self.world_size, self.num_samples))

    def __iter__(self) -> Iterator[int]:
        epoch, start, count = self.epoch, self.consumed, self.rows_left()
        self._pass_start = start
        order = self.order.epoch(epoch)
        for lo in range(0, count, CHUNK):  # a chunk of the lazy order at a time
            chunk = order.positions_at(rank_indices(np.arange(lo, min(lo + CHUNK, count)), start, self.rank,
                                                    self.world_size, self.num_samples)).tolist()
            for k, index in enumerate(chunk):
                self.consumed = self.position_after(start, lo + k + 1)
                yield index
        if self.epoch == epoch:
            self.epoch, self.consumed, self._pass_start = epoch + 1, 0, 0  # a finished epoch moves on by itself

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """What `load_state_dict` needs (plain JSON); `consumed` (indices this rank's loop received in this pass)
        overrides the count of indices handed out."""
        position = self.consumed if consumed is None else self.position_after(self._pass_start, int(consumed))
        return seal({"format": STATE_FORMAT, "seed": self.seed, "epoch": self.epoch, "consumed": position,
                     "num_samples": self.num_samples, "order": self.order.identity(), "drop_last": self.drop_last})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved state, on any world size."""
        check_state(state, {"seed": self.seed, "num_samples": self.num_samples, "order": self.order.identity()},
                    "sampler")
        epoch, consumed = check_int(state, "epoch", "sampler", MAX_EPOCH), check_int(state, "consumed", "sampler")
        if consumed > self.num_samples:
            raise StateError(f"cannot resume: the saved sampler consumed {consumed} of {self.num_samples} indices")
        check_seal(state, "sampler")
        self.epoch, self.consumed, self._pass_start = epoch, consumed, consumed
