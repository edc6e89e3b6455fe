"""`PackedSampler`: the order of training packs, reproducible and resumable.

A thin form of `stable_datasets.streaming.BlockShuffleSampler` with the arguments packed-SFT
code has always passed: the order of an epoch depends only on (seed, epoch, rank, world_size),
each rank takes its own share, and `state_dict()` / `load_state_dict()` resume mid-epoch.

`locality_starts` (row-group start offsets, e.g. from `row_group_starts(dataset)`) switches to
the block shuffle: row groups are shuffled, and the packs of each window of `window_row_groups`
row groups are shuffled together. Reads then stay within a few decoded row groups at a time,
which is what a Parquet reader's row-group cache needs. Without it, a full permutation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stable_datasets.streaming.sampler import BlockShuffleSampler
from stable_datasets.streaming.source import block_bounds_of


class PackedSampler(BlockShuffleSampler):
    def __init__(self, data: int | Sequence[Any], *, seed: int = 0, shuffle: bool = True, rank: int = 0,
                 world_size: int = 1, drop_last: bool = True, locality_starts: Sequence[int] | None = None,
                 window_row_groups: int = 4):
        num_samples = data if isinstance(data, int) else len(data)
        super().__init__(num_samples, block_bounds=locality_starts, seed=seed, shuffle=shuffle,
                         window_blocks=max(1, int(window_row_groups)), rank=rank, world_size=world_size,
                         drop_last=drop_last)


def row_group_starts(dataset: Any) -> np.ndarray:
    """Start offsets of the Parquet row groups (or other stored blocks) behind a dataset."""
    bounds = block_bounds_of(dataset)
    if bounds is not None:
        return bounds[:-1]
    raise ValueError("row-group locality needs a dataset with stored blocks (block_bounds(): a PackedSFTDataset, or a "
                     "StableDataset that is not lazily shuffled)")
