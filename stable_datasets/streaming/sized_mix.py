"""Mosaic-style epoch sizes for a mix: per-source `proportion`, `repeat` or `choose`, evaluated lazily.

Each source gets an exact number of draws per epoch (as mosaicml-streaming's `Stream` derives them):

- `choose=n`: n draws; `repeat=r`: int(r x the source's rows) draws (truncated, as mosaic's `int()`);
- `proportion=p`: p / sum(proportions) of `epoch_size` (default: all sources' rows);
- relative (`proportion`) and absolute (`repeat`/`choose`) cannot be mixed; a source with neither in
  an absolute mix is read once (`repeat=1`). At most one of the three per source;
- `epoch_size` alone (no `proportion`, `repeat` or `choose`): each source's share of `epoch_size` by its rows;
- `epoch_size=0` is no epoch size (mosaic's `if epoch_size:`).

A share (of `proportion` or of `epoch_size` alone) is derived exactly as mosaicml-streaming's
`Stream.apply_weights` derives it: floor(epoch_size x weight / all weights) in float64, then the draws still
missing go one each to distinct sources picked by `numpy.random.default_rng(seed).choice(sources, missing,
replace=False)`, so the same seed (mosaic's `shuffle_seed`) gives mosaic's counts.

The sources are shuffled together by the seed without a per-row or per-block array: the epoch is cut
into blocks of 1,000 positions, and how many draws of each source fall in each block comes from a
binary tree of seeded multivariate hypergeometric splits: the root holds every source's count over
all blocks, a node splits its counts between its two halves of blocks with a generator seeded by
(seed, node), and a block's counts (and the counts before it) are read on the way down. So a block
costs log2(blocks) draws (about 20 for a billion rows), the first row of any epoch is milliseconds,
and nothing is kept but a small cache of recent nodes. A block's labels are then permuted by a
generator seeded with (seed, block). A source's draw d reads pass d // rows, row d % rows; each pass
reads the source in a fresh shuffled order (`MixedSource` asks the source for another epoch's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stable_datasets.streaming.bijection import mix_keys
from stable_datasets.streaming.order import distinct
from stable_datasets.streaming.seeds import check_seed, fresh_seed

BLOCK = 1000
NODE_CACHE = 4096  # tree nodes kept (the path to a block is about 20 of them)
HYPERGEOMETRIC_LIMIT = 10**9  # numpy's multivariate hypergeometric refuses more draws than this
PLAN_VERSION = 4  # 1: a sequential split per block; 2: an unshuffled partial pass read the first rows every epoch;
#: 3: repeat= rounded and proportion= gave its spare draws to the largest remainders (states saved with an older
#: plan are refused, not reinterpreted)


def _per_source(values: Any, name: str, count: int) -> list[Any]:
    if values is None:
        return [None] * count
    values = list(values)
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries for {count} datasets; give one per dataset (None to skip)")
    return values


def _shares(total: int, weights: np.ndarray, seed: int) -> np.ndarray:
    """`total` draws split by `weights` as mosaicml-streaming's `Stream.apply_weights` splits them: each source's
    float share truncated, then the draws still missing (fewer than the sources) one each to distinct sources
    picked by `numpy.random.default_rng(seed).choice(sources, missing, replace=False)`."""
    counts = (total * (weights / weights.sum())).astype(np.int64)
    spare = total - int(counts.sum())
    counts[np.random.default_rng(seed).choice(len(weights), spare, replace=False)] += 1
    return counts


def epoch_counts(lengths: Sequence[int], proportion: Any = None, repeat: Any = None, choose: Any = None,
                 epoch_size: int | None = None, seed: int = 0) -> np.ndarray:
    """Each source's number of draws per epoch (see the module docstring), or a clear error. `seed` picks the
    sources that get the spare draws of a relative split (as mosaic's `shuffle_seed` does)."""
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
    epoch_size = int(epoch_size) if epoch_size else None  # mosaic's `if epoch_size:`: 0 is no epoch size
    if relative:
        if len(relative) != n:
            missing = [i for i in range(n) if i not in relative]
            raise ValueError(f"datasets {missing} have no proportion; give every dataset one (0 to skip it)")
        weights = np.asarray(given["proportion"], dtype=np.float64)
        if weights.sum() <= 0:
            raise ValueError(f"proportions must sum to more than 0, got {weights.tolist()}")
        counts = _shares(int(rows.sum()) if epoch_size is None else epoch_size, weights, seed)
    elif not absolute and epoch_size is not None:
        if rows.sum() <= 0:
            raise ValueError(f"epoch_size={epoch_size} is split by the datasets' rows, and they have none")
        counts = _shares(epoch_size, rows.astype(np.float64), seed)
    else:
        if epoch_size is not None:
            raise ValueError("epoch_size goes with proportion (or alone); with repeat/choose the epoch size follows "
                             "from them")
        counts = rows.copy()
        for i in range(n):
            if given["repeat"][i] is not None:  # mosaic's int(repeat * rows): truncated, in mosaic's arithmetic
                counts[i] = int(given["repeat"][i] * rows[i])
            elif given["choose"][i] is not None:
                counts[i] = int(given["choose"][i])
    empty = [i for i in range(n) if counts[i] > 0 and rows[i] == 0]
    if empty:
        raise ValueError(f"datasets at indices {empty} are empty but are asked for rows")
    return counts


def split_counts(rng: np.random.Generator, counts: np.ndarray, size: int) -> np.ndarray:
    """`size` of the draws in `counts` picked without replacement: how many of each source (sums to `size`).

    numpy's multivariate hypergeometric stops at a billion draws; above, each source's marginal is its
    hypergeometric's normal approximation (a spread of tens of thousands at that size), rounded and kept
    inside what the other sources can take, so the counts stay exact."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total < HYPERGEOMETRIC_LIMIT:
        return rng.multivariate_hypergeometric(counts, size).astype(np.int64)
    out = np.zeros(len(counts), dtype=np.int64)
    left, need = total, int(size)
    for i, c in enumerate(counts.tolist()):
        rest = left - c
        if need == 0 or c == 0:
            pass
        elif rest == 0:
            out[i] = need
        else:
            mean = need * c / left
            var = mean * (rest / left) * ((left - need) / max(left - 1, 1))
            value = round(float(rng.normal(mean, np.sqrt(var))) if var > 0 else mean)
            out[i] = min(max(value, need - rest, 0), c, need)
        need -= int(out[i])
        left = rest
    return out


class SizedMixPlan:
    """Which (source, pass, row) is at each position of an epoch with exact per-source counts."""

    def __init__(self, lengths: Sequence[int], counts: Sequence[int], seed: int | None = None):
        self.lengths = np.asarray([int(n) for n in lengths], dtype=np.int64)
        self.counts = np.asarray([int(c) for c in counts], dtype=np.int64)
        self.seed = fresh_seed() if seed is None else check_seed(seed, "interleave_datasets")
        self.length = int(self.counts.sum())
        safe = np.maximum(self.lengths, 1)
        self.passes = int((-(-self.counts // safe)).max()) if len(self.counts) else 0
        self.blocks = -(-self.length // BLOCK)
        self._nodes: dict[tuple[int, int], np.ndarray] = {}  # (first block, end block) -> counts inside

    def __getstate__(self) -> dict[str, Any]:  # each process grows its own cache
        return {**self.__dict__, "_nodes": {}}

    def identity(self) -> dict[str, Any]:
        return {"lengths": self.lengths.tolist(), "counts": self.counts.tolist(), "seed": self.seed, "sized": True,
                "plan": PLAN_VERSION}

    def __len__(self) -> int:
        return self.length

    def _rows_in(self, lo: int, hi: int) -> int:
        """Mix positions in blocks [lo, hi) (the last block may be short)."""
        return min(hi * BLOCK, self.length) - lo * BLOCK

    def _children(self, lo: int, mid: int, hi: int, counts: np.ndarray) -> np.ndarray:
        """The counts of the left half [lo, mid) of node [lo, hi): a seeded hypergeometric split, cached."""
        left = self._nodes.get((lo, mid))
        if left is None:
            size = self._rows_in(lo, mid)
            total = int(counts.sum())
            if size >= total:
                left = counts.copy()
            else:
                left = split_counts(np.random.default_rng([self.seed, 1, lo, hi]), counts, size)
            if len(self._nodes) >= NODE_CACHE:
                self._nodes.clear()
            self._nodes[(lo, mid)] = left
        return left

    def block_counts(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        """(draws of each source before `block`, draws of each source in it): one walk down the tree."""
        if not 0 <= block < self.blocks:
            raise IndexError(f"block {block} outside [0, {self.blocks})")
        lo, hi, counts = 0, self.blocks, self.counts
        before = np.zeros(len(self.counts), dtype=np.int64)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            left = self._children(lo, mid, hi, counts)
            if block < mid:
                hi, counts = mid, left
            else:
                before = before + left
                lo, counts = mid, counts - left
        return before, counts

    def at_with_pass(self, positions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, pass, row of that source) for mix positions."""
        t = np.asarray(positions, dtype=np.int64)
        if t.size and (t.min() < 0 or t.max() >= self.length):
            raise IndexError(f"mix position outside [0, {self.length})")
        sources = len(self.counts)
        source, draw = np.empty_like(t), np.empty_like(t)
        block = t // BLOCK
        for b in distinct(block):
            before, inside = self.block_counts(b)
            labels = np.repeat(np.arange(sources), inside)
            labels = np.random.default_rng([self.seed, 2, b]).permutation(labels)
            hits = labels[:, None] == np.arange(sources)
            seen = np.cumsum(hits, axis=0) - hits
            mine = block == b
            local = t[mine] - b * BLOCK
            source[mine] = labels[local]
            draw[mine] = before[labels[local]] + seen[local, labels[local]]
        length = np.maximum(self.lengths[source], 1)
        return source, draw // length, draw % length

    def partial_take(self, source: int, pass_: int) -> int | None:
        """Draws of pass `pass_` of `source` when it reads fewer than the source's rows (None: a whole pass)."""
        take = int(self.counts[source]) - pass_ * int(self.lengths[source])
        return take if 0 < take < int(self.lengths[source]) else None

    def at(self, positions: Any) -> tuple[np.ndarray, np.ndarray]:
        """(source, row of that source), as `MixPlan.at`."""
        source, _, row = self.at_with_pass(positions)
        return source, row

    def indices(self, offsets: Sequence[int]) -> np.ndarray:
        """Every position as an index into the sources concatenated (for a map-style view)."""
        source, row = self.at(np.arange(self.length, dtype=np.int64))
        return np.asarray(offsets, dtype=np.int64)[source] + row


def partial_pass_rows(seed: int, source: int, epoch: int, rows: int, take: int, draws: Any) -> np.ndarray:
    """Rows of an unshuffled source's partial pass (`take` of its `rows`, `take` < `rows`) at draws `draws` of that
    pass: a seeded random subset of the rows, in ascending order, drawn afresh for each (source, epoch), as
    mosaicml-streaming draws a partial repeat (`rng.choice(rows, take, replace=False)`, sorted, rng seeded by
    shuffle_seed + epoch) rather than the first `take` rows every epoch. Evaluated lazily: the subset is the
    positions labelled "chosen" by a two-source `SizedMixPlan` over the rows (take chosen, the rest not), so a
    read costs a few tree walks and blocks of 1,000 labels, never an array over the rows."""
    key = int(mix_keys(seed, 3, source, epoch)[()]) % (1 << 63)
    labels = SizedMixPlan([take, rows - take], [take, rows - take], seed=key)
    j = np.asarray(draws, dtype=np.int64)
    out = np.empty_like(j)
    if not j.size:
        return out
    lo, hi = 0, labels.blocks - 1  # the block holding the smallest draw: the last whose chosen-before <= it
    first = int(j.min())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(labels.block_counts(mid)[0][0]) <= first:
            lo = mid
        else:
            hi = mid - 1
    block, left = lo, np.ones(j.shape, bool)
    while left.any():
        before, inside = labels.block_counts(block)
        mine = left & (j >= before[0]) & (j < before[0] + inside[0])
        if mine.any():
            block_labels = np.random.default_rng([labels.seed, 2, block]).permutation(np.repeat([0, 1], inside))
            chosen = np.flatnonzero(block_labels == 0)
            out[mine] = block * BLOCK + chosen[j[mine] - before[0]]
            left &= ~mine
        block += 1
    return out
