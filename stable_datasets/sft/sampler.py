"""`PackedSampler`: the order of training samples, reproducible and resumable.

The order of an epoch depends only on (seed, epoch, rank, world_size): every rank computes
the same global permutation from its own RNG, and takes every `world_size`-th sample, so
ranks never overlap. `state_dict()` records how far this rank got; `load_state_dict()`
continues from exactly there (mid-epoch resume after a crash or pre-emption).

`locality_starts` (row-group start offsets, e.g. from `row_group_starts(dataset)`) switches
to a locality-aware shuffle: windows of `window_row_groups` consecutive row groups are
shuffled, then the samples within each window. Reads then stay within a few decoded row
groups at a time, which is what a Parquet reader's row-group cache needs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


class PackedSampler:
    def __init__(self, data: int | Sequence[Any], *, seed: int = 0, shuffle: bool = True, rank: int = 0,
                 world_size: int = 1, drop_last: bool = True, locality_starts: Sequence[int] | None = None,
                 window_row_groups: int = 4):
        self.num_samples = data if isinstance(data, int) else len(data)
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.seed, self.shuffle, self.rank, self.world_size = seed, shuffle, rank, world_size
        self.drop_last = drop_last
        self.locality_starts = None if locality_starts is None else np.asarray(locality_starts, dtype=np.int64)
        self.window_row_groups = max(1, int(window_row_groups))
        self.epoch = 0
        self.consumed = 0  # samples this rank has yielded in the current epoch

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.consumed = epoch, 0

    def _global_order(self) -> np.ndarray:
        n = self.num_samples
        if not self.shuffle:
            return np.arange(n)
        rng = np.random.default_rng([self.seed, self.epoch])  # its own stream per (seed, epoch)
        if self.locality_starts is None:
            return rng.permutation(n)
        starts = np.append(self.locality_starts[self.locality_starts < n], n)
        bounds = starts[:: self.window_row_groups]
        if bounds[-1] != n:
            bounds = np.append(bounds, n)
        windows = [np.arange(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]
        return np.concatenate([rng.permutation(windows[w]) for w in rng.permutation(len(windows))]) \
            if windows else np.arange(0)

    def _rank_order(self) -> np.ndarray:
        order = self._global_order()
        per_rank = len(self)
        if not self.drop_last and per_rank * self.world_size > len(order):  # pad by wrapping around
            order = np.concatenate([order, order[: per_rank * self.world_size - len(order)]])
        return order[self.rank: per_rank * self.world_size: self.world_size]

    def __len__(self) -> int:
        """Samples per rank per epoch."""
        if self.drop_last:
            return self.num_samples // self.world_size
        return -(-self.num_samples // self.world_size)

    def __iter__(self) -> Iterator[int]:
        order = self._rank_order()
        while self.consumed < len(order):
            index = int(order[self.consumed])
            self.consumed += 1
            yield index
        self.epoch, self.consumed = self.epoch + 1, 0  # a finished epoch moves on by itself

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "epoch": self.epoch, "consumed": self.consumed, "rank": self.rank,
                "world_size": self.world_size, "num_samples": self.num_samples}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("seed", "world_size", "num_samples"):
            if state[key] != getattr(self, key):
                raise ValueError(f"cannot resume: the saved sampler had {key}={state[key]}, this one has "
                                 f"{getattr(self, key)}")
        self.epoch, self.consumed = int(state["epoch"]), int(state["consumed"])


def row_group_starts(dataset: Any) -> np.ndarray:
    """Start offsets of the Parquet row groups behind a PackedSFTDataset or a Parquet-layout dataset."""
    source = getattr(dataset, "_source", None)
    if source is not None and hasattr(source, "starts"):
        return source.starts[:-1]
    backends = getattr(dataset, "_backends", None) or getattr(getattr(source, "dataset", None), "_backends", None)
    if backends and hasattr(backends[0], "row_groups"):
        return backends[0].row_groups.starts[:-1]
    raise ValueError("row-group locality needs a Parquet source (files or a parquet-layout cache)")
