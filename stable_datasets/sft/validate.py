"""Pack validation a block of packs at a time, in numpy.

Checking each pack in Python as it is read cost ~20 µs a pack, more than reading it. Instead the
checks run once per block (a decoded Parquet row group, or 16,384 rows of a cache) on the Arrow
list offsets and the `seq_start_id` values, and leave one bad-or-not flag per pack. Reading a
pack then looks its flag up; a flagged pack is checked again on its own, which names the fault
exactly as the per-pack check did. Only a bad pack raises: its neighbours in the block still read.

The rule is Megatron-Bridge's `GPTSFTPackedParquetDataset.validate_row`, so a file it accepts
reads here and a file it refuses is refused with its words: `loss_mask` as long as `input_ids`;
`seq_start_id` not empty, starting at 0, non-decreasing (two equal starts are an empty
sequence, which is allowed) and every start below `len(input_ids)` (so a pack with no tokens
is refused: its start 0 is not below 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import primitive_view
from stable_datasets.layouts.parquet_shards import ParquetRowGroups

CACHE_BLOCK_SHIFT = 14
CACHE_BLOCK_ROWS = 1 << CACHE_BLOCK_SHIFT  # 16,384


def _chunks(column: Any) -> list[Any]:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        if not (pa.types.is_list(chunk.type) or pa.types.is_large_list(chunk.type)):
            raise TypeError(f"expected a list column, got {chunk.type}")
    return chunks


def _numbers(array: pa.Array) -> np.ndarray:
    """A numeric array as numpy: a view of its buffer when it has no nulls (`Array.to_numpy` imports pandas on
    its first call, a third of a second on the first pack read)."""
    view = primitive_view(array)
    return view if view is not None else array.to_numpy(zero_copy_only=False)


def _nulls(chunks: list[Any]) -> np.ndarray:
    return np.concatenate([c.is_null().to_numpy(zero_copy_only=False) if c.null_count else np.zeros(len(c), bool)
                           for c in chunks]) if chunks else np.zeros(0, bool)


def _lengths(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """(list lengths, nulls) of a list column, read from its offsets only: the values are not touched."""
    chunks = _chunks(column)
    lengths = [np.diff(_numbers(c.offsets)) for c in chunks]
    return (np.concatenate(lengths) if lengths else np.zeros(0, np.int64)), _nulls(chunks)


def _offsets_and_values(column: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets from 0, the values they index, nulls) of a small list column, sliced or chunked."""
    chunks = _chunks(column)
    column = pa.concat_arrays(chunks) if len(chunks) != 1 else chunks[0]
    offsets = _numbers(column.offsets).astype(np.int64, copy=False)
    first, last = (int(offsets[0]), int(offsets[-1])) if len(offsets) else (0, 0)
    values = _numbers(column.values.slice(first, last - first)) if last > first else \
        np.zeros(0, np.int64)
    return offsets - first, values, _nulls(chunks)


def row_fault(n_input_ids: int, n_loss_mask: int, seq_start_id: Sequence[int] | np.ndarray) -> str | None:
    """Why a pack breaks Megatron-Bridge's row rule, in its words (without its `Row {idx}: ` prefix); None if it
    holds. The first fault in Megatron-Bridge's order is named: the mask length, the first start, then per
    index the bound before the order."""
    if n_loss_mask != n_input_ids:
        return f"loss_mask length ({n_loss_mask}) != input_ids length ({n_input_ids})"
    starts = np.asarray(seq_start_id, dtype=np.int64).reshape(-1)
    if not len(starts) or starts[0] != 0:
        return f"seq_start_id must start with 0, got {starts[:5].tolist()}"
    out = starts >= n_input_ids
    out[1:] |= starts[1:] < starts[:-1]
    faults = np.flatnonzero(out)
    if not len(faults):
        return None
    i = int(faults[0])
    if starts[i] >= n_input_ids:
        return f"seq_start_id[{i}]={int(starts[i])} >= len(input_ids)={n_input_ids}"
    return f"seq_start_id is not non-decreasing at index {i}: {int(starts[i - 1])} > {int(starts[i])}"


def bad_packs_from_lengths(ids_len: np.ndarray, mask_len: np.ndarray, starts_offsets: np.ndarray,
                           starts: np.ndarray) -> np.ndarray:
    """One flag per pack: True where `row_fault` names a fault (what `PackedSFTDataset._check` raises)."""
    ids_len = np.asarray(ids_len, np.int64)
    starts = np.asarray(starts, np.int64)
    bad = np.asarray(mask_len, np.int64) != ids_len
    counts = np.diff(starts_offsets)
    bad |= counts == 0
    filled = np.flatnonzero(counts > 0)
    bad[filled] |= starts[starts_offsets[:-1][filled]] != 0
    last = starts[starts_offsets[1:][filled] - 1]
    bad[filled] |= last >= ids_len[filled]  # the largest start when they do not decrease; else flagged below
    if len(starts) > 1:
        falls = np.flatnonzero(np.diff(starts) < 0)  # between value j and j + 1; equal starts: an empty sequence
        if len(falls):
            row = np.searchsorted(starts_offsets, falls, side="right") - 1
            inside = falls + 1 < starts_offsets[row + 1]  # both values in the same pack
            bad[row[inside]] = True
    return bad


def bad_packs(input_ids: Any, loss_mask: Any, seq_start_id: Any) -> np.ndarray:
    """One flag per pack of Arrow list columns; packs with a null column are flagged too."""
    ids_len, ids_null = _lengths(input_ids)
    mask_len, mask_null = _lengths(loss_mask)
    starts_off, starts, starts_null = _offsets_and_values(seq_start_id)
    bad = bad_packs_from_lengths(ids_len, mask_len, starts_off, starts)
    return bad | ids_null | mask_null | starts_null


@runtime_checkable
class ReadsRowGroups(Protocol):
    """Packs whose reads decode Parquet row groups (a Parquet cache read as stored): checked on those groups."""

    def row_groups(self) -> ParquetRowGroups | None: ...


@runtime_checkable
class FlatPacks(Protocol):
    """Packs held as flat arrays per column and where each pack starts in them (NeMo .npy packs)."""

    offsets: dict[str, np.ndarray]
    values: dict[str, np.ndarray]


@runtime_checkable
class CheckedWhole(Protocol):
    """Packs checked whole when their files opened (packed indexed pairs): one flag per pack already."""

    def bad_packs(self) -> np.ndarray: ...


class BlockChecks:
    """Flags of the blocks read so far (per dataset object; a worker process fills its own)."""

    def __init__(self, source: Any):
        groups = source.row_groups() if isinstance(source, ReadsRowGroups) else None
        self.source = groups if groups is not None else source
        self.row_groups = isinstance(self.source, ParquetRowGroups)
        # flags as bytes: indexing bytes gives an int, ~5x cheaper than a numpy bool scalar per pack
        self.blocks: dict[int, bytes] = {}
        self.whole: bytes | None = None
        if isinstance(source, CheckedWhole):
            self.whole = np.asarray(source.bad_packs(), dtype=bool).tobytes()
        elif isinstance(source, FlatPacks):  # .npy packs: flat arrays already
            offsets = source.offsets
            self.whole = bad_packs_from_lengths(np.diff(offsets["input_ids"]), np.diff(offsets["loss_mask"]),
                                                offsets["seq_start_id"], source.values["seq_start_id"]).tobytes()

    def is_bad(self, pack: int) -> bool:
        if self.whole is not None:
            return self.whole[pack] != 0
        if self.row_groups:
            block, local = self.source.locate(pack)
        else:
            block, local = pack >> CACHE_BLOCK_SHIFT, pack & (CACHE_BLOCK_ROWS - 1)
        flags = self.blocks.get(block)
        if flags is None:
            flags = self.blocks[block] = self._check_block(block).astype(bool).tobytes()
        return flags[local] != 0

    def _check_block(self, block: int) -> np.ndarray:
        if self.row_groups:
            batch = self.source.group(block)[0]
        else:
            lo = block * CACHE_BLOCK_ROWS
            batch = self.source.arrow_rows(lo, min(lo + CACHE_BLOCK_ROWS, self.source.num_rows))
        return bad_packs(batch.column("input_ids"), batch.column("loss_mask"), batch.column("seq_start_id"))
