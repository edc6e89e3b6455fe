"""`BlockShuffleSampler`: a seeded, resumable, rank-aware order of row indices for map-style datasets.

The order is `streaming.order.BlockOrder`: blocks shuffled, rows shuffled within windows of
`window_blocks` blocks, so a DataLoader reading these indices touches a few blocks at a time
(one decoded Parquet row group, Lance slice or Arrow batch is reused by the rows around it).
Pass a dataset that has `block_bounds()` (StableDataset, PackedSFTDataset) or `block_bounds=`
directly; without bounds the order is a full permutation.

Rule for resuming: the state is (epoch, rows of this rank's share consumed). The sampler counts
the indices it has handed out; a DataLoader with workers pulls indices ahead of the training
loop (prefetch), so either wrap the loader in `StreamingDataLoader` (it records the rows the loop
has received) or pass `consumed=` to `state_dict`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from stable_datasets.streaming.order import (
    BlockOrder,
    bounds_from_starts,
    rank_share,
    resolve_rank,
    rows_per_rank,
    split_large_blocks,
)


def dataset_block_bounds(data: Any) -> np.ndarray | None:
    """`data.block_bounds()` when the dataset has it, else None."""
    method = getattr(data, "block_bounds", None)
    return None if method is None else np.asarray(method(), dtype=np.int64)


def dataset_shard_bounds(data: Any) -> np.ndarray | None:
    """Where the stored shards begin, then `len(data)`: `data.shard_bounds()` when it has one (a remote
    stream), else, for a whole StableDataset, each backend's shards (`shard_bounds()`, or its Arrow/Parquet
    shard files in order); None for views and other datasets (their shards do not bound a window)."""
    method = getattr(data, "shard_bounds", None)
    if method is not None:
        return np.asarray(method(), dtype=np.int64)
    backends = getattr(data, "_backends", None)
    if not backends or getattr(data, "_indices", None) is not None:
        return None
    counts: list[int] = []
    for backend in backends:
        own = getattr(backend, "shard_bounds", None)
        if own is not None:
            counts.extend(np.diff(own()).tolist())
        elif backend.metadata.layout in ("arrow_shards", "parquet_shards"):
            counts.extend(s.num_rows for s in backend.metadata.shards if s.num_rows > 0)
        else:
            return None
    if sum(counts) != len(data):
        return None
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)


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
        bounds = dataset_block_bounds(data) if block_bounds is None and not isinstance(data, int) else block_bounds
        if bounds is not None:
            bounds = split_large_blocks(bounds_from_starts(bounds, self.num_samples), max_block_rows)
        self.order = BlockOrder(self.num_samples, bounds, seed=seed, shuffle=shuffle, window_blocks=window_blocks)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.epoch = 0
        self.consumed = 0  # indices of this rank's share handed out in the current epoch

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.consumed = epoch, 0

    def __len__(self) -> int:
        return rows_per_rank(self.num_samples, self.world_size, self.drop_last)

    def rank_order(self) -> np.ndarray:
        """This rank's indices for the current epoch, in order."""
        return rank_share(self.order.epoch(self.epoch).positions, self.rank, self.world_size, self.drop_last)

    def __iter__(self) -> Iterator[int]:
        order, epoch = self.rank_order(), self.epoch
        position = self.consumed
        while position < len(order):
            index = int(order[position])
            position += 1
            self.consumed = position
            yield index
        if self.epoch == epoch:
            self.epoch, self.consumed = epoch + 1, 0  # a finished epoch moves on by itself

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """What `load_state_dict` needs; `consumed` overrides the count (rows the training loop received)."""
        return {"seed": self.seed, "epoch": self.epoch, "consumed": self.consumed if consumed is None else consumed,
                "rank": self.rank, "world_size": self.world_size, "num_samples": self.num_samples,
                "order": self.order.identity()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_resumable(state, {"seed": self.seed, "world_size": self.world_size, "num_samples": self.num_samples,
                                "order": self.order.identity()}, "sampler")
        self.epoch, self.consumed = int(state["epoch"]), int(state["consumed"])


def check_resumable(state: dict[str, Any], current: dict[str, Any], what: str,
                    required: tuple[str, ...] = ("consumed", "epoch", "seed")) -> None:
    """Refuse what is not a saved state (not a dict, or without a key every state has had: `required`), and a
    state that was taken with another order (other keys missing from older states are not checked)."""
    if not isinstance(state, dict):
        raise ValueError(f"cannot resume: a {what} state is the dict its state_dict() returned, got "
                         f"{type(state).__name__} {state!r:.80}")
    missing = [key for key in required if key not in state]
    if missing:
        raise ValueError(f"cannot resume: the saved {what} state has no {missing[0]!r} (keys: {sorted(state)[:10]}); "
                         f"pass the state_dict() of a {what}")
    for key, value in current.items():
        if key in state and state[key] != value:
            detail = "the block layout, seed or window" if key == "order" else f"{key}={state[key]}"
            raise ValueError(f"cannot resume: the saved {what} had {detail}, this one has "
                             f"{value if key != 'order' else 'another'}")
