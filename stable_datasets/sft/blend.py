"""A weighted blend of packed SFT files: `GPTSFTPackedParquetBlendDataset`, by Megatron-Bridge's 2026 name.

Several packed sources (each what `GPTSFTPackedParquetDataset` reads: a `*.idx.parquet`/`*.idx.pq`
file, a glob, a folder, a `.npy` pack file or one of our caches) are served as one dataset of
about `num_samples` packs, each source by its weight:

- counts: the weights are normalised (any scale: [3, 1], [0.75, 0.25] and [300, 100] are the same
  blend, the normalised shares being rounded to 12 places so float noise cannot add a pack) and
  source i gives ceil(num_samples x w_i) packs, Megatron-Core's `BlendedDataset` rule, so weights
  [3, 1] over 12 samples give [9, 3];
- which packs: each source's packs are drawn epoch by epoch, shuffled without replacement, with
  `seed` (its `samples_mapping`), so the same seed gives the same packs in the same places;
- order: Megatron-Core's greedy interleaving (`stable_datasets.megatron.blend.blending_indices`),
  no random numbers: pack k comes from the source whose count lags its share the most.

`index_mapping_dir=` (Megatron-Bridge's name for where its datasets keep their index files; `cache_dir=` is the
same) keeps the blending index there as `.npy` files: the first process computes it, every other (each rank) loads
it memory-mapped (`stable_datasets.megatron.blend_cache`).

Items are the sources' own (`input_ids`, `seq_boundaries`, `loss_mask` as lists), so `collate_fn`
(the first source's) batches them as it batches one source. A negative index is a padding
sample, as in Megatron-Bridge: the pack at `len(self) + idx` with an all-zero loss mask.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stable_datasets.megatron.blend import blending_indices, normalise, samples_per_source
from stable_datasets.sft.megatron import GPTSFTPackedParquetDataset

__all__ = ["GPTSFTPackedParquetBlendDataset"]


class GPTSFTPackedParquetBlendDataset:
    """Packs of `file_paths` blended by `weights` (module docstring); keyword arguments go to each source's
    `GPTSFTPackedParquetDataset` (`max_seq_length=`, `pad_seq_to_mult=`, ...)."""

    def __init__(self, file_paths: Sequence[Any], weights: Sequence[float], num_samples: int, tokenizer: Any, *,
                 seed: int = 1234, index_mapping_dir: str | os.PathLike[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, **kwargs: Any):
        if isinstance(file_paths, (str, bytes)) or len(file_paths) != len(weights):
            raise ValueError(f"a packed blend needs one weight per source: {file_paths!r:.120} with {len(weights)} "
                             "weights")
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive int (the packs the blend serves), got {num_samples!r}")
        if "max_num_samples" in kwargs:
            raise TypeError("GPTSFTPackedParquetBlendDataset sets each source's max_num_samples from the weights; "
                            "pass num_samples=")
        if index_mapping_dir is not None and cache_dir is not None and Path(index_mapping_dir) != Path(cache_dir):
            raise ValueError(f"index_mapping_dir={str(index_mapping_dir)!r} and cache_dir={str(cache_dir)!r} name "
                             "the same option; pass one")
        # shares rounded to 12 places: weights of one ratio at any scale ([3, 1], [0.3, 0.1]) give the same
        # counts and order (0.1 / 0.4 is 0.25000000000000006 in float64, whose ceil(12 x w) would be 4)
        self.weights = [round(w, 12) for w in normalise(weights)]
        self.counts = samples_per_source(self.weights, num_samples)
        self.datasets = [GPTSFTPackedParquetDataset(path, tokenizer, max_num_samples=count, seed=seed, **kwargs)
                         for path, count in zip(file_paths, self.counts)]
        self.dataset_index, self.dataset_sample_index = blending_indices(
            self.weights, sum(self.counts), index_mapping_dir if cache_dir is None else cache_dir)

    def __len__(self) -> int:
        return len(self.dataset_index)

    def source_counts(self) -> list[int]:
        """Packs each source gives the blend (ceil(num_samples x weight))."""
        return np.bincount(self.dataset_index, minlength=len(self.datasets)).tolist()

    def indices(self) -> list[tuple[int, int]]:
        """(source, pack row within the source) of every blend position: what a seed decides."""
        rows = np.empty(len(self), dtype=np.int64)
        for d, dataset in enumerate(self.datasets):  # one numpy gather per source, not a step per position
            at = self.dataset_index == d
            rows[at] = dataset.samples_mapping[self.dataset_sample_index[at]]
        return list(zip(self.dataset_index.tolist(), rows.tolist()))

    def __getitem__(self, idx: int) -> dict[str, list[int]]:
        padding = idx < 0
        position = len(self) + idx if padding else idx
        if not 0 <= position < len(self):
            raise IndexError(f"index {idx} is out of range for a blend of {len(self)} packs")
        item = self.datasets[int(self.dataset_index[position])][int(self.dataset_sample_index[position])]
        if padding:
            item["loss_mask"] = [0] * len(item["loss_mask"])
        return item

    @property
    def collate_fn(self) -> Callable[..., dict[str, Any]]:
        """The first source's collate (every source is given the same collate arguments)."""
        return self.datasets[0].collate_fn
