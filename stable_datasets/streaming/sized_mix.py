"""Mosaic-style epoch sizes for a mix: per-source `proportion`, `repeat` or `choose`, evaluated lazily.

Each source gets an exact number of draws per epoch (as mosaicml-streaming's `Stream` derives them):

- `choose=n`: n draws; `repeat=r`: round(r x the source's rows) draws;
- `proportion=p`: p / sum(proportions) of `epoch_size` (default: all sources' rows), rounded so that
  the counts add up to `epoch_size` exactly (largest remainders get the spare draws);
- relative (`proportion`) and absolute (`repeat`/`choose`) cannot be mixed; a source with neither in
  an absolute mix is read once (`repeat=1`). At most one of the three per source.

The sources are shuffled together by the seed without a per-row array: the epoch is cut into blocks of
1,000 positions, how many draws of each source fall in each block comes from a seeded multivariate
hypergeometric split (kept: blocks x sources integers), and a block's labels are permuted by a
generator seeded with (seed, block). A source's draw d reads pass d // rows, row d % rows; each pass
reads the source in a fresh shuffled order (`MixedSource` asks the source for another epoch's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

BLOCK = 1000


def _per_source(values: Any, name: str, count: int) -> list[Any]:
    if values is None:
        return [None] * count
    values = list(values)
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries for {count} datasets; give one per dataset (None to skip)")
    return values


def epoch_counts(lengths: Sequence[int], proportion: Any = None, repeat: Any = None, choose: Any = None,
                 epoch_size: int | None = None) -> np.ndarray:
    """Each source's number of draws per epoch (see the module docstring), or a clear error."""
    n = len(lengths)
    given = {"proportion": _per_source(proportion, "proportion", n), "repeat": _per_source(repeat, "repeat", n),
             "choose": _per_source(choose, "choose", n)}
    for i in range(n):
        set_here = [k for k, v in given.items() if v[i] is not None]
        if len(set_here) > 1:
            raise ValueError(f"dataset {i} sets both {set_here[0]} and {set_here[1]}; give at most one of "
                             "proportion, repeat, choose per dataset")
        for k in set_here:
            value = given[k][i]
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(value) or value < 0:
                raise ValueError(f"dataset {i}'s {k} must be a finite number >= 0, got {value!r}")
            if k == "choose" and int(value) != value:
                raise ValueError(f"dataset {i}'s choose must be a whole number of rows, got {value!r}")
    relative = [i for i in range(n) if given["proportion"][i] is not None]
    absolute = [i for i in range(n) if given["repeat"][i] is not None or given["choose"][i] is not None]
    if relative and absolute:
        raise ValueError(f"datasets {relative} set proportion (relative) and datasets {absolute} set repeat/choose "
                         "(absolute); use one kind for every dataset")
    if epoch_size is not None and (isinstance(epoch_size, bool) or int(epoch_size) != epoch_size or epoch_size < 0):
        raise ValueError(f"epoch_size must be a whole number >= 0, got {epoch_size!r}")
    rows = np.asarray([int(x) for x in lengths], dtype=np.int64)
    if relative:
        if len(relative) != n:
            missing = [i for i in range(n) if i not in relative]
            raise ValueError(f"datasets {missing} have no proportion; give every dataset one (0 to skip it)")
        weights = np.asarray(given["proportion"], dtype=np.float64)
        if weights.sum() <= 0:
            raise ValueError(f"proportions must sum to more than 0, got {weights.tolist()}")
        total = int(rows.sum() if epoch_size is None else epoch_size)
        exact = weights / weights.sum() * total
        counts = np.floor(exact).astype(np.int64)
        spare = total - int(counts.sum())
        counts[np.argsort(-(exact - counts), kind="stable")[:spare]] += 1
    else:
        if epoch_size is not None:
            raise ValueError("epoch_size goes with proportion; with repeat/choose the epoch size follows from them")
        counts = rows.copy()
        for i in range(n):
            if given["repeat"][i] is not None:
                counts[i] = round(float(given["repeat"][i]) * int(rows[i]))
            elif given["choose"][i] is not None:
                counts[i] = int(given["choose"][i])
    empty = [i for i in range(n) if counts[i] > 0 and rows[i] == 0]
    if empty:
        raise ValueError(f"datasets at indices {empty} are empty but are asked for rows")
    return counts


class SizedMixPlan:
    """Which (source, pass, row) is at each position of an epoch with exact per-source counts."""

    def __init__(self, lengths: Sequence[int], counts: Sequence[int], seed: int | None = None):
        self.lengths = np.asarray([int(n) for n in lengths], dtype=np.int64)
        self.counts = np.asarray([int(c) for c in counts], dtype=np.int64)
        self.seed = int(np.random.SeedSequence().entropy) if seed is None else int(seed)
        if self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.length = int(self.counts.sum())
        safe = np.maximum(self.lengths, 1)
        self.passes = int((-(-self.counts // safe)).max()) if len(self.counts) else 0
        rng = np.random.default_rng([self.seed, 1])
        remaining = self.counts.copy()
        blocks = -(-self.length // BLOCK)
        self._before = np.zeros((blocks, len(self.counts)), dtype=np.int64)
        self._in = np.zeros((blocks, len(self.counts)), dtype=np.int64)
        for b in range(blocks):
            self._before[b] = self.counts - remaining
            size = min(BLOCK, int(remaining.sum()))
            take = rng.multivariate_hypergeometric(remaining, size) if size < remaining.sum() else remaining.copy()
            self._in[b] = take
            remaining = remaining - take

    def identity(self) -> dict[str, Any]:
        return {"lengths": self.lengths.tolist(), "counts": self.counts.tolist(), "seed": self.seed, "sized": True}

    def __len__(self) -> int:
        return self.length

    def at_with_pass(self, positions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, pass, row of that source) for mix positions."""
        t = np.asarray(positions, dtype=np.int64)
        if t.size and (t.min() < 0 or t.max() >= self.length):
            raise IndexError(f"mix position outside [0, {self.length})")
        sources = len(self.counts)
        source, draw = np.empty_like(t), np.empty_like(t)
        block = t // BLOCK
        for b in np.unique(block).tolist():
            labels = np.repeat(np.arange(sources), self._in[b])
            labels = np.random.default_rng([self.seed, 2, b]).permutation(labels)
            hits = labels[:, None] == np.arange(sources)
            seen = np.cumsum(hits, axis=0) - hits
            mine = block == b
            local = t[mine] - b * BLOCK
            source[mine] = labels[local]
            draw[mine] = self._before[b][labels[local]] + seen[local, labels[local]]
        length = np.maximum(self.lengths[source], 1)
        return source, draw // length, draw % length

    def at(self, positions: Any) -> tuple[np.ndarray, np.ndarray]:
        """(source, row of that source), as `MixPlan.at`."""
        source, _, row = self.at_with_pass(positions)
        return source, row

    def indices(self, offsets: Sequence[int]) -> np.ndarray:
        """Every position as an index into the sources concatenated (for a map-style view)."""
        source, row = self.at(np.arange(self.length, dtype=np.int64))
        return np.asarray(offsets, dtype=np.int64)[source] + row
