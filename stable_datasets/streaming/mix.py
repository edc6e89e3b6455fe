"""Mixing sources with Hugging Face's `interleave_datasets` semantics, evaluated lazily.

`MixPlan` says which source, and which draw of it, sits at each position of the mix:

- no probabilities: one row from each source in turn; for datasets (HF's map-style count)
  "first_exhausted" stops after min(lengths) rounds, "all_exhausted" after max(lengths) rounds
  (shorter sources start over); for streams (`stream=True`, HF's IterableDataset count) a mix stops
  right after the row that exhausts the first source ("first_exhausted") or the last one
  ("all_exhausted"), so sources [5 rows, 3 rows] give 6 rows and [3 rows, 5 rows] give 5;
- probabilities: a seeded draw per row, `numpy.random.default_rng(seed).choice(n, p=probabilities)`
  taken 1,000 at a time as HF does (so the same seed gives HF's sequence); "first_exhausted" stops
  at the draw that reads the last row of some source, "all_exhausted" at the draw after which every
  source was read once (the others start over: oversampling).

Nothing is kept per row: the draws are regenerated for the block of 1,000 that holds a position
(PCG64 jumps there with `advance`), and the counts of each source before every block are kept
(blocks x sources integers), so a position's draw number is one block's count away.

`MixedSource` is the map-style view of a mix of streams that `StreamingDataset` reads: position t
is row (t-th draw of source s) of source s's own epoch order (with its shuffle); an unshuffled source's
partial pass (mosaic-style sizes) reads a seeded ascending subset drawn afresh each epoch, as mosaic does.
Ranks, workers, state and resume then come from `StreamingDataset` unchanged, and the state's identity hashes the
sources' identities, the probabilities, the seed and the strategy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from stable_datasets.streaming.order import distinct
from stable_datasets.streaming.reader import make_reader
from stable_datasets.streaming.seeds import check_seed, fresh_seed
from stable_datasets.streaming.sized_mix import partial_pass_rows

STRATEGIES = ("first_exhausted", "all_exhausted")
DRAWS_PER_CALL = 1000  # Hugging Face draws its sources 1,000 at a time
BLOCKS_KEPT = 16  # blocks of draws kept per plan (see MixPlan._block_draws)
SCAN = 1000 * DRAWS_PER_CALL  # draws generated per step while finding where the mix stops


def check_probabilities(probabilities: Any, count: int) -> np.ndarray | None:
    """The probabilities as floats, or a clear error (wrong count, negative, not summing to 1)."""
    if probabilities is None:
        return None
    values = np.asarray(list(probabilities), dtype=np.float64)
    if values.ndim != 1 or len(values) != count:
        raise ValueError(f"probabilities has {len(values)} entries for {count} datasets; give one per dataset")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"probabilities must be finite and >= 0, got {values.tolist()}")
    if abs(float(values.sum()) - 1.0) > 1e-6:
        raise ValueError(f"probabilities must sum to 1, got {float(values.sum()):g} ({values.tolist()})")
    return values


class MixPlan:
    """Which (source, draw) is at each position of a mix; see the module docstring."""

    def __init__(self, lengths: Sequence[int], probabilities: Any = None, seed: int | None = None,
                 stopping_strategy: str = "first_exhausted", stream: bool = False):
        if stopping_strategy not in STRATEGIES:
            raise ValueError(f"stopping_strategy must be one of {', '.join(STRATEGIES)}, got {stopping_strategy!r}")
        if not lengths:
            raise ValueError("interleave_datasets needs at least one dataset")
        self.lengths = np.asarray([int(n) for n in lengths], dtype=np.int64)
        self.probabilities = check_probabilities(probabilities, len(self.lengths))
        self.strategy = stopping_strategy
        self._draws: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if seed is not None:
            self.seed = check_seed(seed, "interleave_datasets")
        else:  # round robin draws nothing: a fixed seed, so its state resumes in another process without one
            self.seed = 0 if self.probabilities is None else fresh_seed()
        drawable = np.ones(len(self.lengths), bool) if self.probabilities is None else self.probabilities > 0
        empty = [i for i in range(len(self.lengths)) if self.lengths[i] == 0 and drawable[i]]
        if empty and (self.probabilities is not None or stopping_strategy == "all_exhausted"):
            raise ValueError(f"datasets at indices {empty} are empty; every dataset that can be drawn needs rows")
        if stopping_strategy == "all_exhausted" and not drawable.all():
            raise ValueError('stopping_strategy="all_exhausted" cannot exhaust a dataset that is never drawn: '
                             f"datasets at indices {np.flatnonzero(~drawable).tolist()} have probability 0")
        if self.probabilities is None and stream:  # a source is exhausted right after its last row
            sources = np.arange(len(self.lengths))
            ends = np.where(self.lengths > 0, (self.lengths - 1) * len(self.lengths) + sources + 1, sources)
            self.length = int(ends.min() if stopping_strategy == "first_exhausted" else ends.max())
            self._block_counts = None
        elif self.probabilities is None:
            rounds = int(self.lengths.min() if stopping_strategy == "first_exhausted" else self.lengths.max())
            self.length = rounds * len(self.lengths)
            self._block_counts = None
        else:
            self.length, self._block_counts = self._scan(drawable)

    def _scan(self, drawable: np.ndarray) -> tuple[int, np.ndarray]:
        """Draw until the stopping rule holds; keep each source's count before every block of 1,000."""
        sources = len(self.lengths)
        rng = np.random.default_rng(self.seed)
        counts = np.zeros(sources, dtype=np.int64)
        exhausted_at = np.full(sources, -1, dtype=np.int64)
        blocks: list[np.ndarray] = []
        start = 0
        while True:
            draws = rng.choice(sources, size=SCAN, p=self.probabilities)
            per_block = np.stack([np.bincount(b, minlength=sources) for b in draws.reshape(-1, DRAWS_PER_CALL)])
            blocks.append(counts + np.cumsum(per_block, axis=0) - per_block)
            for s in np.flatnonzero(drawable & (exhausted_at < 0)):
                need = int(self.lengths[s] - counts[s])
                occurrences = np.flatnonzero(draws == s)
                if len(occurrences) >= need:
                    exhausted_at[s] = start + occurrences[need - 1]
            counts += per_block.sum(axis=0)
            start += SCAN
            reached = exhausted_at[drawable] >= 0
            if (reached.any() if self.strategy == "first_exhausted" else reached.all()):
                break
        valid = exhausted_at[exhausted_at >= 0]
        length = int((valid.min() if self.strategy == "first_exhausted" else valid.max()) + 1)
        block_counts = np.concatenate(blocks)[: -(-length // DRAWS_PER_CALL)]
        return length, block_counts

    def identity(self) -> dict[str, Any]:
        return {"lengths": self.lengths.tolist(), "seed": self.seed, "strategy": self.strategy,
                "probabilities": None if self.probabilities is None else self.probabilities.tolist()}

    def __len__(self) -> int:
        return self.length

    def at(self, positions: Any) -> tuple[np.ndarray, np.ndarray]:
        """(source, row of that source) for mix positions (rows past a source's end start over)."""
        t = np.asarray(positions, dtype=np.int64)
        if t.size and (t.min() < 0 or t.max() >= self.length):
            raise IndexError(f"mix position outside [0, {self.length})")
        sources = len(self.lengths)
        if self._block_counts is None:
            source, draw = t % sources, t // sources
        else:
            source, draw = np.empty_like(t), np.empty_like(t)
            block = t // DRAWS_PER_CALL
            for b in distinct(block):
                draws, rank = self._block_draws(b)
                mine = block == b
                local = t[mine] - b * DRAWS_PER_CALL
                source[mine] = draws[local]
                draw[mine] = self._block_counts[b][draws[local]] + rank[local]
        return source, draw % self.lengths[source]

    def _block_draws(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Block b's 1,000 draws and, for each, how many draws of the same source came before it in the block;
        the last few blocks are kept (a reader's consecutive reads, and a mix's workers, share blocks)."""
        cached = self._draws.get(b)
        if cached is None:
            sources = len(self.lengths)
            generator = np.random.PCG64(self.seed)
            generator.advance(b * DRAWS_PER_CALL)  # one 64-bit step per uniform draw
            draws = np.random.Generator(generator).choice(sources, size=DRAWS_PER_CALL, p=self.probabilities)
            hits = draws[:, None] == np.arange(sources)
            rank = (np.cumsum(hits, axis=0) - hits)[np.arange(DRAWS_PER_CALL), draws]
            if len(self._draws) >= BLOCKS_KEPT:
                self._draws.pop(next(iter(self._draws)))
            cached = self._draws[b] = (draws, rank)
        return cached

    def __getstate__(self) -> dict[str, Any]:  # each process keeps its own blocks
        return {**self.__dict__, "_draws": {}}

    passes = 1  # a source that starts over reads the same order again (as HF does)

    def partial_take(self, source: int, pass_: int) -> int | None:
        """Draws of a partial pass (None: every pass here reads the source whole, as HF's oversampling does)."""
        return None

    def at_with_pass(self, positions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, pass, row): always pass 0 here (see `passes`)."""
        source, row = self.at(positions)
        return source, np.zeros_like(source), row

    def indices(self, offsets: Sequence[int]) -> np.ndarray:
        """Every position as an index into the sources concatenated (for a map-style view: O(length))."""
        source, row = self.at(np.arange(self.length, dtype=np.int64))
        return np.asarray(offsets, dtype=np.int64)[source] + row


def column_difference(first: Any, other: Any) -> str | None:
    """The first column whose feature differs between two feature dicts, described; None when they agree."""
    a, b = dict(first), dict(other)
    for name in list(a) + [n for n in b if n not in a]:
        if name not in a or name not in b:
            return f"column {name!r} is in {'the first' if name in a else 'this'} dataset only"
        if a[name] != b[name]:
            return f"column {name!r} is {a[name]!r} in the first dataset and {b[name]!r} here"
    return None


class MixedSource:
    """The map-style view of a mix of streams, read by `StreamingDataset` (see the module docstring)."""

    def __init__(self, streams: Sequence[Any], plan: Any):
        self.streams = list(streams)
        self.plan = plan
        self.epoch = 0
        described = [s.order_identity() for s in self.streams] + [plan.identity()]
        self.fingerprint = "mix-" + hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]
        self._readers: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self.plan)

    @property
    def features(self) -> Any:
        return self.streams[0].features

    def __getstate__(self) -> dict[str, Any]:  # each process opens its own readers
        return {**self.__dict__, "_readers": {}}

    def source_files(self) -> list[tuple[str, list[Any]]] | None:
        """(name, identity) of the data files the sources read in place, in source order (None: no source reads
        data files), so a mixed stream's saved state names a file edited since, as a single stream's does."""
        listed = [stream.source_files() for stream in self.streams]
        if all(files is None for files in listed):
            return None
        return [item for files in listed for item in files or []]

    def open_before_fork(self) -> None:
        """Work every DataLoader worker would repeat, done once before they fork: each source's block bounds
        and order options (`StreamingDataset.order`), and what its dataset opens before a fork."""
        for stream in self.streams:
            _ = stream.order  # built once here and kept (forked workers inherit it)
            stream.open_before_fork()

    def set_epoch(self, epoch: int) -> None:
        """The sources' orders follow the mix's epoch."""
        if epoch != self.epoch:
            self.epoch, self._readers = int(epoch), {}

    def _reader(self, s: int, pass_: int = 0) -> tuple[Any, Any]:
        """Source s's order for pass `pass_` of this epoch: the source's own epoch epoch x passes + pass."""
        entry = self._readers.get((s, pass_))
        if entry is None:
            stream = self.streams[s]
            order = stream.order.epoch(self.epoch * self.plan.passes + pass_)
            entry = (order, make_reader(stream.source, stream.order.bounds, order.block_window))
            self._readers[(s, pass_)] = entry
        return entry

    def __getitems__(self, positions: Sequence[int]) -> list[Any]:
        source, passes, row = self.plan.at_with_pass(np.asarray(positions, dtype=np.int64))
        out: list[Any] = [None] * len(source)
        groups = source * (int(passes.max()) + 1 if len(passes) else 1) + passes  # (source, pass) as one key
        for key in distinct(groups):
            where = np.flatnonzero(groups == key)
            s, pass_ = int(source[where[0]]), int(passes[where[0]])
            order, reader = self._reader(s, pass_)
            picked, take = row[where], self.plan.partial_take(s, pass_)
            if take is not None and not self.streams[s].order.shuffle:  # a fresh subset each epoch, as mosaic's
                picked = partial_pass_rows(self.plan.seed, s, self.epoch, int(self.plan.lengths[s]), take, picked)
            rows = reader.rows(order.positions_at(self.streams[s].row_offset + picked))
            function_chain = self.streams[s].row_maps()
            if function_chain:
                for k, value in enumerate(rows):
                    for function in function_chain:
                        value = function(value)
                    rows[k] = value
            for i, value in zip(where.tolist(), rows):  # (a numpy object array would split rows that are lists)
                out[i] = value
        return out

    def __getitem__(self, position: int) -> Any:
        return self.__getitems__([position])[0]
