"""A blend of token blocks from several sources by weight, counted and interleaved as Megatron-Core's `BlendedDataset`.

Megatron-Core's rule (`BlendedMegatronDatasetBuilder` with a blend, weights and a size): the weights are normalised;
dataset i contributes ceil(size x w_i) samples (the blend is their sum, so a little over `size`) and is built with
ceil(ceil(size x w_i) x (1 + surplus)) samples (`mid_level_dataset_surplus`, 0.005), each a `GPTDataset` with the
same seed, sequence length and split. The interleaving is greedy: sample k goes to the dataset whose count lags its
share w_i x max(k, 1) the most (the first on a tie), and takes that dataset's next sample. No random numbers: the
same weights and size give the same interleaving; the seed shapes each dataset's own samples.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from stable_datasets.errors import StableDatasetsError
from stable_datasets.megatron.blend_cache import cached_blending_indices
from stable_datasets.megatron.blocks import TokenBlocks
from stable_datasets.streaming.iterable import StreamingDataset

#: Megatron-Core's default `mid_level_dataset_surplus`
SURPLUS = 0.005


class BlendError(StableDatasetsError, ValueError):
    """A blend that asks a source for more samples than it was built with (Megatron-Core raises IndexError)."""


def normalise(weights: Sequence[float]) -> list[float]:
    """Weights divided by their sum, in float64 (Megatron-Core's `normalize`)."""
    values = np.array(weights, dtype=np.float64)
    if values.ndim != 1 or not len(values) or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"blend weights must be positive finite numbers, got {list(weights)!r}")
    return (values / np.sum(values)).tolist()


def samples_per_source(weights: Sequence[float], size: int, surplus: float = 0.0) -> list[int]:
    """Samples each source gives a blend of `size` (surplus 0) or is built with (Megatron's surplus)."""
    return [math.ceil(math.ceil(size * w) * (1 + surplus)) for w in normalise(weights)]


def blending_indices(weights: Sequence[float], size: int, cache_dir: str | os.PathLike[str] | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(dataset_index int16, dataset_sample_index int64) of a blend of `size` samples: Megatron-Core's greedy
    rule (module docstring), in the same float64 arithmetic, so the same choice on every tie; computed in bulk
    (`blend_index`), 10-13x faster than one Python step per sample from a million samples on, and equal to
    it everywhere. With `cache_dir`, computed once and shared through `.npy` files there (`blend_cache`)."""
    return cached_blending_indices(normalise(weights), size, cache_dir)


class BlendedBlocks:
    """Token blocks of several sources interleaved by weight (module docstring); item i is the sample Megatron-Core's
    `BlendedDataset[i]` serves, with its `dataset_id`. `cache_dir=` keeps the blending index there, computed by the
    first process and loaded, memory-mapped, by the others (Megatron-Core's `path_to_cache`; `blend_cache`)."""

    def __init__(self, sources: Sequence[Any], weights: Sequence[float], seq_length: int, *, seed: int, size: int,
                 surplus: float = SURPLUS, cache_dir: str | os.PathLike[str] | None = None, **options: Any):
        if len(sources) != len(weights):
            raise ValueError(f"a blend needs one weight per source: {len(sources)} sources, {len(weights)} weights")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int (the samples the blend serves), got {size!r}")
        self.weights = normalise(weights)
        targets = samples_per_source(self.weights, size)
        built = samples_per_source(self.weights, size, surplus)
        self.datasets = [TokenBlocks(source, seq_length, seed=seed, num_samples=n, **options)
                         for source, n in zip(sources, built)]
        self.size = sum(targets)
        self.dataset_index, self.dataset_sample_index = blending_indices(self.weights, self.size, cache_dir)
        used = np.bincount(self.dataset_index, minlength=len(self.datasets))
        for i, (count, dataset) in enumerate(zip(used, self.datasets)):
            if count > len(dataset):
                raise BlendError(f"the blend asks source {i} ({sources[i]!s:.80}) for {count} samples, but it holds "
                                 f"{len(dataset)}; raise surplus= (now {surplus})")
        self.fingerprint = hashlib.sha256(repr(("megatron_blend", 1, [d.fingerprint for d in self.datasets],
                                                self.weights, self.size)).encode()).hexdigest()[:32]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        d = int(self.dataset_index[index])
        return {"dataset_id": d, **self.datasets[d][int(self.dataset_sample_index[index])]}

    def __repr__(self) -> str:
        return f"BlendedBlocks({len(self)} samples from {len(self.datasets)} sources, weights={self.weights})"


def blended_token_blocks(sources: Sequence[Any], weights: Sequence[float], seq_length: int, *, seed: int, size: int,
                         surplus: float = SURPLUS, add_extra_token: bool = True, split: str | None = None,
                         split_name: str = "train", column: str = "input_ids", rank: int | None = None,
                         world_size: int | None = None, drop_last: bool = False,
                         loader_batch_size: int | None = None, cache_dir: str | os.PathLike[str] | None = None
                         ) -> StreamingDataset:
    """A resumable stream of Megatron-Core's `BlendedDataset` samples over `sources` (indexed prefixes or datasets)
    weighted by `weights` (any scale), about `size` samples long (see the module docstring); `cache_dir=` as in
    `BlendedBlocks`."""
    blend = BlendedBlocks(sources, weights, seq_length, seed=seed, size=size, surplus=surplus, cache_dir=cache_dir,
                          add_extra_token=add_extra_token, split=split, split_name=split_name, column=column)
    return StreamingDataset(blend, shuffle=False, rank=rank, world_size=world_size, drop_last=drop_last,
                            loader_batch_size=loader_batch_size)
