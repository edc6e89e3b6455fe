"""The row order of a shuffled view, evaluated on demand: row i of the view is stored row base[perm(i)].

Why: `ds.shuffle()` used to hold a permutation array of every row (8 bytes a row: 8 GB for a billion
rows, in every process that unpickles the view, and again in every DataLoader worker). A
`KeyedShuffle` holds the size, one 64-bit key and its base (None: the stored rows; an index array of
an earlier select; or another `KeyedShuffle`): `perm` is the keyed Feistel bijection of
`streaming.bijection`, so any rows of the view cost work for those rows only and the view pickles in
a few bytes. Whatever asks for the whole order (`np.asarray(view_indices)`) gets the array, built a
chunk at a time; the view's fingerprint hashes the description, not the rows.

`StableDataset.shuffle` uses it above `LAZY_SHUFFLE_ROWS` rows (or with `lazy=True`); below, it keeps
Hugging Face's exact order (`np.random.default_rng(seed).permutation(n)`), which users compare with HF.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from stable_datasets.streaming.bijection import mix_keys, permute
from stable_datasets.streaming.seeds import check_seed, fresh_seed

#: views of more rows than this are shuffled lazily by default (the eager permutation would take 128 MB)
LAZY_SHUFFLE_ROWS = 1 << 24
#: rows evaluated together when the whole order is asked for (the bijection's temporaries: ~100 bytes a row)
CHUNK = 1 << 18


def shuffle_key(seed: int | None, generator: np.random.Generator | None) -> int:
    """The permutation's key: from the generator when given (it advances, as a permutation would advance it),
    else a hash of the seed, else fresh entropy."""
    if generator is not None:
        return int(generator.integers(0, 2**63, dtype=np.int64))
    if seed is None:
        return fresh_seed()
    return int(mix_keys(check_seed(seed, "shuffle"), 0x5EED)[()]) >> 1


class KeyedShuffle:
    """Row i of a view: `base[permute(i, size, key)]` (see the module docstring)."""

    def __init__(self, size: int, key: int, base: np.ndarray | KeyedShuffle | None = None):
        self.size, self.key, self.base = int(size), int(key), base
        if base is not None and len(base) != self.size:
            raise ValueError(f"a shuffle of {self.size} rows over a base of {len(base)}")

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, np.integer)):
            index = int(item) + self.size if item < 0 else int(item)
            if not 0 <= index < self.size:
                raise IndexError(f"index {item} is out of range for {self.size} rows")
            return int(self._at(np.asarray([index], dtype=np.int64))[0])
        if isinstance(item, slice):
            return self._at(np.arange(*item.indices(self.size), dtype=np.int64))
        positions = np.asarray(item, dtype=np.int64)
        if positions.size and (positions.min() < -self.size or positions.max() >= self.size):
            raise IndexError(f"indices out of range for {self.size} rows")
        return self._at(np.where(positions < 0, positions + self.size, positions))

    def _at(self, positions: np.ndarray) -> np.ndarray:
        inner = permute(positions, self.size, np.uint64(self.key)) if self.size > 1 else positions.copy()
        return inner if self.base is None else np.asarray(self.base[inner], dtype=np.int64)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.empty(self.size, dtype=np.int64)
        for lo in range(0, self.size, CHUNK):
            out[lo:lo + CHUNK] = self._at(np.arange(lo, min(lo + CHUNK, self.size), dtype=np.int64))
        return out if dtype is None else out.astype(dtype)

    def digest(self) -> str:
        """What decides this order, hashed (size, key and the base's digest): O(1) for a lazy shuffle of the
        stored rows, never a walk over its rows. It names the view in fingerprints, so equal orders built
        two ways (lazily, or as an array) get different names: a cache is then built twice, never misnamed."""
        base = None if self.base is None else indices_digest(self.base)
        return hashlib.sha256(json.dumps(["keyed-shuffle", self.size, self.key, base]).encode()).hexdigest()

    def __repr__(self) -> str:
        return f"KeyedShuffle(size={self.size}, key={self.key}, base={type(self.base).__name__})"


def indices_digest(indices: np.ndarray | KeyedShuffle) -> str:
    """sha256 of a view's order: of its positions for an array, of its description for a lazy shuffle."""
    if isinstance(indices, KeyedShuffle):
        return indices.digest()
    return hashlib.sha256(np.ascontiguousarray(indices, dtype=np.int64).tobytes()).hexdigest()
