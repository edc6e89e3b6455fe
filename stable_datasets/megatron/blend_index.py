"""Megatron-Core's greedy blending index (`helpers.cpp` `build_blending_indices`), computed in bulk and exactly.

The rule: sample k goes to the source d whose error w_d x max(k, 1) - count_d is the largest, in float64, the first
source winning a tie; it takes that source's next sample. Each choice depends on every count before it, so the plain
form is one Python step per sample (about 2.4 s per million samples with two sources), and a pretraining blend is
10^8 to 10^9 samples. It has no closed form (the counts are not a rounding of w x k: with three or more sources they
differ from every largest-remainder rounding at a large share of positions), but it forgets its start quickly: two
count vectors at the same position, both summing to the position, choose their way onto the same counts within a
few to a few hundred steps (the errors live in a bounded region that holds one count vector per position).

So the positions are cut into segments that step together, each step a few dense numpy operations over all of them:

- the first segment starts from the exact counts; every other one starts `warm_up` positions before its own start
  from a guess (the largest-remainder rounding of w x position) and steps through the warm-up without recording;
- all segments then record their choices and the sample each takes, `segment` positions each, with the float64
  error of Megatron-Core's loop, `fl(fl(w_d x t) - count_d)`, and its first-wins argmax;
- a segment is right if its counts at its start equal the exact counts there. The first segment is; segment i+1
  is right if segment i is right and ended on the counts segment i+1 started with (the same counts at the same
  position give the same choices from there on). Each segment whose start differs from its predecessor's end is
  stepped again from that end, and the check repeats until every start matches: the leftmost mismatch moves right
  each round, so this ends, and the result equals the plain loop everywhere (ties included) whatever the weights.

Memory is bounded: at most `window` segments step at once (a few sources x window float64 arrays), window after
window, each starting from the exact counts the previous one ended on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: positions each segment records
SEGMENT = 1024
#: steps a segment takes from its guessed counts before it records
WARM_UP = 128
#: segments stepped together (bounds memory: a few sources x WINDOW float64 arrays)
WINDOW = 16384


def blending_indices(shares: Sequence[float], size: int, *, segment: int = SEGMENT, warm_up: int = WARM_UP,
                     window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """(dataset_index int16, dataset_sample_index int64) of `size` samples blended by the normalised `shares`:
    exactly Megatron-Core's `build_blending_indices` (module docstring). `segment`, `warm_up` and `window` change
    only the speed."""
    w = np.asarray(shares, dtype=np.float64)
    if len(w) >= 32767:
        raise ValueError(f"a blend holds fewer than 32767 sources, got {len(w)}")
    if segment < 1 or warm_up < 0 or window < 1:
        raise ValueError(f"segment and window must be >= 1 and warm_up >= 0, got {segment}, {warm_up}, {window}")
    dataset_index = np.zeros(size, dtype=np.int16)
    dataset_sample_index = np.zeros(size, dtype=np.int64)
    if size == 0:
        return dataset_index, dataset_sample_index
    counts = np.zeros(len(w), dtype=np.float64)
    first = int(np.argmax(w))  # position 0: t = max(0, 1) = 1 and no counts, so the largest share (first on a tie)
    dataset_index[0], counts[first] = first, 1.0
    position = 1
    segment = max(1, min(segment, max(64, size // 4096)))  # smaller blends: about 4,096 shorter segments
    while position < size:
        end = min(size, position + window * segment)
        _fill(w, counts, position, end, segment, warm_up, dataset_index, dataset_sample_index)
        counts += np.bincount(dataset_index[position:end], minlength=len(w))
        position = end
    return dataset_index, dataset_sample_index


def _fill(w: np.ndarray, counts: np.ndarray, start: int, end: int, segment: int, warm_up: int,
          dataset_index: np.ndarray, dataset_sample_index: np.ndarray) -> None:
    """Positions [start, end) given the exact `counts` at `start` (module docstring), written in place."""
    spans = -(-(end - start) // segment)
    starts = start + segment * np.arange(spans, dtype=np.float64)
    chosen = np.empty((segment, spans), dtype=np.int16)  # row j: every segment's choice at its step j
    taken = np.empty((segment, spans), dtype=np.int64)
    began = np.empty((len(w), spans), dtype=np.float64)  # counts each segment records from
    began[:, 0] = counts
    if spans > 1:
        warm = min(warm_up, int(starts[1]) - 1)  # every warm-up starts at position 1 or later
        began[:, 1:] = _guess(w, starts[1:] - warm)
        _step(w, began[:, 1:], starts[1:] - warm, warm)
    ended = began.copy()
    _step(w, ended, starts, segment, chosen, taken)
    while True:
        wrong = np.flatnonzero(np.any(ended[:, :-1] != began[:, 1:], axis=0)) + 1
        if not len(wrong):
            break
        began[:, wrong] = ended[:, wrong - 1]
        again = began[:, wrong].copy()
        rows_chosen, rows_taken = chosen[:, wrong], taken[:, wrong]
        _step(w, again, starts[wrong], segment, rows_chosen, rows_taken)
        chosen[:, wrong], taken[:, wrong], ended[:, wrong] = rows_chosen, rows_taken, again
    dataset_index[start:end] = chosen.T.reshape(-1)[:end - start]
    dataset_sample_index[start:end] = taken.T.reshape(-1)[:end - start]


def _guess(w: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Counts near the greedy's at each position: w x position rounded down, the remaining samples going to the
    largest remainders, summing to the position exactly (the greedy keeps every count within a few of w x k)."""
    exact = w[:, None] * positions[None, :]
    counts = np.floor(exact)
    order = np.argsort(counts - exact, axis=0, kind="stable")  # largest remainder first
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(len(w))[:, None], axis=0)
    counts += rank < (positions - counts.sum(axis=0))
    counts[int(np.argmax(w))] += positions - counts.sum(axis=0)  # float noise: the sum is the position, always
    return counts


def _step(w: np.ndarray, counts: np.ndarray, positions: np.ndarray, steps: int, chosen: np.ndarray | None = None,
          taken: np.ndarray | None = None) -> None:
    """`steps` greedy steps of every column of `counts` (sources x segments) at once, from `positions`
    (all >= 1), in Megatron-Core's float64 arithmetic; choices and samples taken go to row j of `chosen`/`taken`.

    Dense arithmetic only (masked copies and `np.where` on a random mask cost ~20x a dense operation): the
    largest error, then each source's hit = (its error is the largest and no source before it was hit), which
    is Megatron-Core's strict `>` scan with the first source keeping a tie."""
    shares = w[:, None]
    t = positions.astype(np.float64)  # each column's max(k, 1) (positions start at 1; +1.0 stays exact below 2^53)
    error = np.empty_like(counts)
    best, hit, spare, pick, got, left = (np.empty(counts.shape[1], dtype=np.float64) for _ in range(6))
    last = len(w) - 1
    for j in range(steps):
        np.multiply(shares, t, out=error)
        np.subtract(error, counts, out=error)
        np.max(error, axis=0, out=best)
        left.fill(1.0)
        pick.fill(0.0)
        got.fill(0.0)
        for d in range(len(w)):
            np.equal(error[d], best, out=hit)
            hit *= left  # a source before this one already holds the tie
            if d < last:
                left -= hit
            np.multiply(hit, counts[d], out=spare)
            got += spare
            counts[d] += hit
            if d:
                np.multiply(hit, float(d), out=spare)
                pick += spare
        if chosen is not None:
            chosen[j], taken[j] = pick, got
        t += 1.0


def stepwise_blending_indices(shares: Sequence[float], size: int) -> tuple[np.ndarray, np.ndarray]:
    """The greedy as Megatron-Core's helpers.cpp writes it, one Python step per sample: the definition that
    `blending_indices` computes in bulk, kept as the reference its tests and benchmark compare against (slow:
    about 2 s per million samples)."""
    counts, chosen, taken = [0] * len(shares), [0] * size, [0] * size
    for k in range(size):
        at = float(k) if k else 1.0
        best, lag = 0, shares[0] * at - counts[0]
        for d in range(1, len(shares)):
            error = shares[d] * at - counts[d]
            if error > lag:  # the first source wins a tie
                best, lag = d, error
        chosen[k], taken[k] = best, counts[best]
        counts[best] += 1
    return np.array(chosen, dtype=np.int16), np.array(taken, dtype=np.int64)
