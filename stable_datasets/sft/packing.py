"""Bin packing of sequence lengths into packs of `pack_size` tokens.

`first_fit`, `first_fit_decreasing` and `first_fit_shuffle` (functions over a list of lengths)
give the same bins as Megatron-Bridge's functions of those names (an item longer than the
pack gets a bin of its own), in O(n log n) with a max segment tree over bins.
`best_fit_decreasing` puts each item, longest first, into the fullest bin that still has
room (as TRL's best-fit packing does). These return bins of *lengths*.

`pack_indices` returns bins of item *indices* and follows Megatron-Bridge's whole packing
pipeline, not just the algorithm, so that the same lengths and seed give the same packs:
the algorithm runs over the lengths sorted ascending (a histogram), `first_fit_shuffle`
shuffles that sorted list; then the sequences of each length, shortest length first, are
permuted and handed out from the end of the permutation to the bins asking for that length,
in bin order. Both draws use one `numpy.random.RandomState(seed)`, the stream Megatron-Bridge
draws from after `np.random.seed(seed)`; the global RNG is never touched.
`best_fit_decreasing` keeps input order among equal lengths and draws nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ALGORITHMS = ("first_fit", "first_fit_decreasing", "first_fit_shuffle", "best_fit_decreasing")


def _first_fit_order(lengths: np.ndarray, order: np.ndarray, pack_size: int) -> list[list[int]]:
    """Item indices per bin, placing items in `order` into the first bin with room."""
    n = len(order)
    if n == 0:
        return []
    size = 1
    while size < n:
        size *= 2
    tree = np.full(2 * size, -(1 << 62), dtype=np.int64).tolist()  # max remaining room per subtree
    bins: list[list[int]] = []
    room: list[int] = []
    lengths_list = lengths.tolist()
    for item in order.tolist():
        need = lengths_list[item]
        if tree[1] >= need:  # descend to the leftmost bin with room
            node = 1
            while node < size:
                node = 2 * node if tree[2 * node] >= need else 2 * node + 1
            b = node - size
            bins[b].append(item)
            room[b] -= need
        else:
            b = len(bins)
            bins.append([item])
            room.append(pack_size - need)
            node = b + size
        value = room[b]
        node = b + size
        tree[node] = value
        node //= 2
        while node:
            left, right = tree[2 * node], tree[2 * node + 1]
            best = left if left >= right else right
            if tree[node] == best:
                break
            tree[node] = best
            node //= 2
    return bins


def _best_fit_order(lengths: np.ndarray, order: np.ndarray, pack_size: int) -> list[list[int]]:
    """Item indices per bin: each item goes to the bin with the least room that still fits it."""
    bins: list[list[int]] = []
    # stacks of bin ids by remaining room, and a max segment tree over room values 0..pack_size
    by_room: list[list[int]] = [[] for _ in range(pack_size + 1)]
    size = 1
    while size < pack_size + 1:
        size *= 2
    count = [0] * (2 * size)  # number of bins per room value, summed over subtrees
    lengths_list = lengths.tolist()

    def add(r: int, delta: int) -> None:
        node = r + size
        while node:
            count[node] += delta
            node //= 2

    def smallest_room_at_least(need: int) -> int:
        """The smallest room value >= need with a bin, or -1."""
        lo, hi = need + size, pack_size + size
        if lo > hi:
            return -1
        # walk the range [lo, hi] left to right by canonical segments
        left_nodes, right_nodes = [], []
        while lo <= hi:
            if lo & 1:
                left_nodes.append(lo)
                lo += 1
            if not hi & 1:
                right_nodes.append(hi)
                hi -= 1
            lo //= 2
            hi //= 2
        for node in left_nodes + right_nodes[::-1]:
            if count[node]:
                while node < size:
                    node = 2 * node if count[2 * node] else 2 * node + 1
                return node - size
        return -1

    for item in order.tolist():
        need = lengths_list[item]
        r = smallest_room_at_least(need) if need <= pack_size else -1
        if r == -1:
            b = len(bins)
            bins.append([item])
            left = pack_size - need
        else:
            b = by_room[r].pop()
            add(r, -1)
            bins[b].append(item)
            left = r - need
        if left >= 0:
            by_room[left].append(b)
            add(left, 1)
    return bins


def pack_indices(seqlens: Sequence[int] | np.ndarray, pack_size: int, algorithm: str = "first_fit_shuffle",
                 seed: int | None = 0) -> list[list[int]]:
    """Bins of item indices (into `seqlens`), as Megatron-Bridge's pipeline assigns them (module docstring)."""
    lengths = np.asarray(seqlens, dtype=np.int64)
    if pack_size <= 0:
        raise ValueError(f"pack_size must be positive, got {pack_size}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown packing algorithm {algorithm!r}; choose one of {ALGORITHMS}")
    if algorithm == "best_fit_decreasing":
        return _best_fit_order(lengths, np.argsort(-lengths, kind="stable"), pack_size)
    rng = np.random.RandomState(seed)
    ascending = np.argsort(lengths, kind="stable")  # the histogram, read back shortest first
    if algorithm == "first_fit":
        order = ascending
    elif algorithm == "first_fit_decreasing":
        order = ascending[::-1]
    else:
        order = ascending.copy()
        rng.shuffle(order)
    bins = _first_fit_order(lengths, order, pack_size)
    return _hand_out_by_length(lengths, bins, ascending, rng)


def _hand_out_by_length(lengths: np.ndarray, bins: list[list[int]], ascending: np.ndarray,
                        rng: np.random.RandomState) -> list[list[int]]:
    """Re-assign items to the bins' length slots: per length (shortest first) one permutation, taken from the end.

    The bins only fix which *lengths* go together; which sequence of a given length fills a
    slot is this second draw, so equal lengths are interchangeable until here.
    """
    sizes = [len(b) for b in bins]
    slots = np.fromiter((i for b in bins for i in b), dtype=np.int64, count=sum(sizes))
    slot_lengths = lengths[slots]
    slots_by_length = np.argsort(slot_lengths, kind="stable")  # bin order within one length
    sorted_lengths = lengths[ascending]
    assigned = np.empty_like(slots)
    cuts = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(ascending)]):
        items = ascending[lo:hi]  # this length's items in input order
        taken = items[rng.permutation(hi - lo)][::-1]  # pop() from the end of the permuted list
        assigned[slots_by_length[lo:hi]] = taken
    out, start = [], 0
    for size in sizes:
        out.append(assigned[start:start + size].tolist())
        start += size
    return out


def _ordered_bins(seqlens: Sequence[Any], pack_size: int, order: np.ndarray | None = None,
                  item_lengths: Sequence[int] | None = None) -> list[list[Any]]:
    """Bins of the entries of `seqlens`, placed first-fit in `order`; the entries are their own lengths
    unless `item_lengths` gives them (then the entries may be any objects, and come back as they are)."""
    if item_lengths is not None and len(seqlens) != len(item_lengths):
        raise ValueError(f"seqlens and item_lengths must have the same number of entries, got {len(seqlens)} and "
                         f"{len(item_lengths)}")
    lengths = np.asarray(seqlens if item_lengths is None else item_lengths, dtype=np.int64).reshape(-1)
    if order is None:
        order = np.arange(len(lengths))
    values = lengths.tolist() if item_lengths is None else list(seqlens)
    return [[values[i] for i in b] for b in _first_fit_order(lengths, order, pack_size)]


def first_fit(seqlens: Sequence[Any], pack_size: int, *, item_lengths: Sequence[int] | None = None
              ) -> list[list[Any]]:
    """Megatron-Bridge's first fit: entries in input order, each into the first bin with room.

    With `item_lengths=` (keyword only, as Megatron-Bridge has it) the entries are objects and
    their lengths are given separately; the bins hold the objects themselves.
    """
    return _ordered_bins(seqlens, pack_size, item_lengths=item_lengths)


def first_fit_decreasing(seqlens: Sequence[Any], pack_size: int, *, item_lengths: Sequence[int] | None = None
                         ) -> list[list[Any]]:
    """First fit over the entries longest first; entries of equal length keep their input order
    (a stable sort), so objects packed with `item_lengths=` come back in Megatron-Bridge's bins."""
    lengths = seqlens if item_lengths is None else item_lengths
    if item_lengths is not None and len(seqlens) != len(item_lengths):
        raise ValueError(f"seqlens and item_lengths must have the same number of entries, got {len(seqlens)} and "
                         f"{len(item_lengths)}")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64).reshape(-1), kind="stable")
    return _ordered_bins(seqlens, pack_size, order, item_lengths)


def first_fit_shuffle(seqlens: Sequence[int], pack_size: int, seed: int | None = 0) -> list[list[int]]:
    order = np.arange(len(seqlens))
    np.random.RandomState(seed).shuffle(order)
    return _ordered_bins(seqlens, pack_size, order)


def best_fit_decreasing(seqlens: Sequence[int], pack_size: int) -> list[list[int]]:
    values = np.asarray(seqlens, dtype=np.int64)
    return [[int(values[i]) for i in b] for b in pack_indices(values, pack_size, "best_fit_decreasing")]


def packing_metadata(seqlens: Sequence[int], bins: list[list[int]], pack_size: int) -> dict[str, float | int]:
    """The statistics Megatron-Bridge writes beside packed files (bins hold lengths)."""
    packed = [sum(b) for b in bins]
    return {
        "dataset_max_seqlen": int(max(seqlens)),
        "max_samples_per_bin": max(len(b) for b in bins),
        "packing_factor": round(len(seqlens) / len(bins), 2),
        "packing_efficiency": round(sum(packed) / len(packed) / pack_size * 100, 2),
        "pack_size": pack_size,
        "min_packed_seqlen": min(packed),
    }
