"""Keyed permutations of [0, size) evaluated one element at a time, without materializing them.

Why: an epoch of a billion rows cannot afford a permutation array per process (8 GB), yet every
rank and DataLoader worker must agree on where row k of the epoch comes from. A balanced Feistel
network over the smallest even number of bits covering `size` is a bijection on [0, 2**bits);
walking the cycle (applying it again while the result is >= size) restricts it to [0, size),
still a bijection, at fewer than four rounds of walking on average (2**bits < 4 * size).

Everything is vectorized over numpy arrays: each element may carry its own key and size, so one
call permutes the rows of several windows at once. Keys come from `mix_keys` (a splitmix64 hash of
the seed, epoch and window id), so no global RNG state is read or written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ROUNDS = 6
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a fast, well-spread hash of uint64 values (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def mix_keys(*parts: Any) -> np.ndarray:
    """One uint64 key per element from integer parts (scalars or arrays broadcast together)."""
    arrays = np.broadcast_arrays(*[np.asarray(p, dtype=np.int64).astype(np.uint64) for p in parts])
    key = np.full(arrays[0].shape, 0x2545F4914F6CDD1D, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for part in arrays:
            key = _mix(key ^ (part + _GOLDEN))
    return key


def _half_bits(size: np.ndarray) -> np.ndarray:
    """Bits of each half of the Feistel block: the smallest h with 4**h >= size (at least 1)."""
    bits = np.ceil(np.log2(np.maximum(size, 2).astype(np.float64))).astype(np.int64)
    bits += (2 ** bits.astype(np.float64) < size)  # float rounding near powers of two
    return np.maximum((bits + 1) // 2, 1).astype(np.uint64)


def _round_keys(keys: np.ndarray) -> list[np.ndarray]:
    """One key per element and round, hashed once per call (not again at every step of the cycle walk)."""
    with np.errstate(over="ignore"):
        return [_mix(keys + np.uint64(r) * _GOLDEN) for r in range(ROUNDS)]


def _feistel(x: np.ndarray, round_keys: list[np.ndarray], half: np.ndarray) -> np.ndarray:
    mask = (np.uint64(1) << half) - np.uint64(1)
    left, right = x >> half, x & mask
    with np.errstate(over="ignore"):
        for key in round_keys:
            f = _mix(right ^ key) & mask
            left, right = right, left ^ f
    return (left << half) | right


def permute(index: Any, size: Any, keys: Any) -> np.ndarray:
    """The image of `index` under the keyed permutation of [0, size) chosen by `keys` (arrays broadcast).

    Same (size, key) -> same permutation on every machine; different keys -> independent-looking ones."""
    index, size, keys = np.broadcast_arrays(np.asarray(index, dtype=np.int64), np.asarray(size, dtype=np.int64),
                                            np.asarray(keys, dtype=np.uint64))
    if index.size and (np.any(index < 0) or np.any(index >= size)):
        raise IndexError(f"index outside [0, size): {index[(index < 0) | (index >= size)][:3].tolist()}")
    out = index.astype(np.uint64).copy()
    size_u = size.astype(np.uint64)
    half = _half_bits(size)
    todo = np.flatnonzero(size > 1)
    round_keys = _round_keys(keys[todo])
    while todo.size:  # cycle walking: stays inside [0, size) and stays a bijection
        out[todo] = _feistel(out[todo], round_keys, half[todo])
        again = out[todo] >= size_u[todo]
        todo, round_keys = todo[again], [key[again] for key in round_keys]
    return out.astype(np.int64)


def invert(value: Any, size: Any, keys: Any) -> np.ndarray:
    """The index that `permute` sends to `value` (used by tests to prove it is a bijection)."""
    value, size, keys = np.broadcast_arrays(np.asarray(value, dtype=np.int64), np.asarray(size, dtype=np.int64),
                                            np.asarray(keys, dtype=np.uint64))
    out = value.astype(np.uint64).copy()
    size_u = size.astype(np.uint64)
    half = _half_bits(size)
    mask = (np.uint64(1) << half) - np.uint64(1)
    todo = np.flatnonzero(size > 1)
    while todo.size:
        x, h, m = out[todo], half[todo], mask[todo]
        left, right = x >> h, x & m
        with np.errstate(over="ignore"):
            for key in reversed(_round_keys(keys[todo])):
                f = _mix(left ^ key) & m
                left, right = right ^ f, left
        out[todo] = (left << h) | right
        todo = todo[out[todo] >= size_u[todo]]
    return out.astype(np.int64)
