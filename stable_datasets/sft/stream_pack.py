"""`pack_stream`: Megatron-Bridge packs made on the fly from a stream of tokenized rows.

Why not re-pack tokens offline: changing `pack_size` or the algorithm should cost seconds, not a
rebuild of the tokenized cache. So packing is an index: the token counts of the stream's rows
(read from the `input_ids` list offsets of a StableDataset, never the tokens; other sources are read
once), taken in the stream's epoch-0 order, are cut into look-ahead windows of `lookahead` rows,
and each window is packed with `plan_packs` (the offline packer: same algorithms, same overlong
rule). A pack is then a list of rows; reading a pack reads its rows and lays them out with
`pack_row` (`input_ids`, `loss_mask`, `seq_start_id`).

The packs form a map-style source, so the packed stream is a `StreamingDataset` like any other:
`shuffle()` permutes packs per epoch, ranks and workers split them, and `state_dict()` resumes
exactly on another cluster size. It works after `interleave_datasets` (a mix of streams).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.sft.pack import checked_tokens, pack_row, plan_packs, shifted_mask
from stable_datasets.sft.validate import _offsets_and_values
from stable_datasets.streaming.iterable import StreamingDataset
from stable_datasets.streaming.source import BlockReads, RowSource

LENGTH_CHUNK = 65536  # rows whose token counts are read together


def _token_counts(dataset: RowSource, features: Any, column: str) -> np.ndarray:
    """Tokens of every row of `dataset` (a stream's row source, of these `features`): list offsets when it reads
    Arrow blocks, else the rows themselves."""
    n = len(dataset)
    counts = np.empty(n, dtype=np.int64)
    arrow = isinstance(dataset, BlockReads) and column in (features or {})
    for lo in range(0, n, LENGTH_CHUNK):
        hi = min(lo + LENGTH_CHUNK, n)
        if arrow:
            values = dataset.read_block(lo, hi).column(column)
            counts[lo:hi] = pc.list_value_length(values).fill_null(0).to_numpy(zero_copy_only=False)
        else:
            counts[lo:hi] = [len(row[column]) for row in dataset.__getitems__(list(range(lo, hi)))]
    return counts


def _flat_lists(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a list column: one numpy array of every row's items (in their stored type: the
    packer checks they fit its types), and where each row starts (a null row is empty)."""
    lists = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if lists.null_count:
        lists = pc.if_else(pc.is_null(lists), pa.scalar([], lists.type), lists)
    offsets, values, _ = _offsets_and_values(lists)  # numpy views of the buffers (to_numpy would import pandas)
    return values, offsets


def _arrow_tokens(dataset: BlockReads, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids, mask, starts, ends): the tokens of the rows at `positions` as two flat arrays and where each
    requested row's tokens lie in them, so no token becomes a Python object; no loss_mask column: loss on
    every token. The packs of a look-ahead window draw from a short stretch of rows: that stretch is read
    whole (a slice, nothing gathered) when it is not much longer than the rows asked for, else the distinct
    rows are gathered once in stored order."""
    low, high = int(positions.min()), int(positions.max()) + 1
    if high - low <= 4 * len(positions) + 1024:
        table, local, rows = dataset.read_block(low, high), positions - low, np.arange(low, high)
    else:
        rows, local = np.unique(positions, return_inverse=True)
        table = dataset.read_rows(rows)
    ids, offsets = _flat_lists(table.column("input_ids"))
    if "loss_mask" in table.column_names:
        mask, mask_offsets = _flat_lists(table.column("loss_mask"))
        if not np.array_equal(mask_offsets, offsets):
            row = int(np.flatnonzero(mask_offsets != offsets)[0]) - 1
            raise ValueError(f"row {max(row, 0)} of the packed stream has a loss_mask of another length than its "
                             "input_ids")
    else:
        mask = np.ones(len(ids), np.int8)
    ids, mask = checked_tokens(ids, mask, offsets[1:], rows, "row")  # (int32 ids, a 0/1 mask: else named)
    return ids, mask, offsets[:-1][local], offsets[1:][local]


def _lay_out_packs(ids: np.ndarray, mask: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                   sizes: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Packs of consecutive sequences (`sizes` per pack), as `pack_row` lays each out, for all packs at once:
    every token copied once in pack order, the label shift of every sequence in one step, and each pack a
    slice of the result (sequences already cut to the limit, none empty, no padding)."""
    seq_end = np.cumsum(lengths)
    seq_begin = seq_end - lengths
    spans = list(zip(starts.tolist(), (starts + lengths).tolist()))  # concatenating views beats an index gather
    all_ids = np.concatenate([ids[a:b] for a, b in spans]).astype(np.int32, copy=False)
    all_mask = np.concatenate([mask[a:b] for a, b in spans])
    shifted = shifted_mask(all_mask, seq_end)
    pack_seq = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    token_at = np.concatenate([[0], seq_end])[pack_seq]
    out = []
    for p in range(len(sizes)):
        lo, hi = int(token_at[p]), int(token_at[p + 1])
        first = int(pack_seq[p])
        out.append({"input_ids": all_ids[lo:hi], "loss_mask": shifted[lo:hi],
                    "seq_start_id": (seq_begin[first:int(pack_seq[p + 1])] - lo).astype(np.int32)})
    return out


class PackedSource:
    """Packs of a stream's rows (see the module docstring); map-style, read by `StreamingDataset`."""

    def __init__(self, stream: StreamingDataset, members: np.ndarray, starts: np.ndarray, limit: int,
                 identity: str, pad_seq_to_mult: int = 1, pad_id: int | None = None):
        self.stream, self.members, self.starts = stream, members, starts
        self.limit, self.pad_seq_to_mult, self.pad_id = limit, pad_seq_to_mult, pad_id
        self.fingerprint = identity
        self._order: Any = None

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_order": None}

    def pack_members(self, pack: int) -> np.ndarray:
        """The source rows (stored positions) a pack holds, in pack order."""
        return self._positions(self.members[self.starts[pack]:self.starts[pack + 1]])

    def _positions(self, indices: np.ndarray) -> np.ndarray:
        if self._order is None:
            self._order = self.stream.order.epoch(0)  # packs are fixed over the epoch-0 order of the rows
        return self._order.positions_at(self.stream.row_offset + indices)

    def __getitems__(self, packs: list[int]) -> list[dict[str, np.ndarray]]:
        packs_arr = np.asarray(packs, dtype=np.int64)
        sizes = self.starts[packs_arr + 1] - self.starts[packs_arr]
        flat = np.concatenate([self.members[self.starts[p]:self.starts[p + 1]] for p in packs_arr.tolist()]) \
            if len(packs_arr) else np.zeros(0, np.int64)
        dataset, maps = self.stream.source, self.stream.row_maps()
        positions = self._positions(flat)
        if not maps and isinstance(dataset, BlockReads) and len(positions):
            ids, mask, starts, ends = _arrow_tokens(dataset, positions)  # token columns as numpy, no Python ints
            lengths = np.minimum(ends - starts, self.limit)
            if self.pad_seq_to_mult == 1 and lengths.all():
                return _lay_out_packs(ids, mask, starts, lengths, sizes)
            sequences = [(ids[a:b], mask[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]
        else:
            sequences = []
            for row in dataset.__getitems__(positions.tolist()):
                for function in maps:
                    row = function(row)
                ids = np.asarray(row["input_ids"])  # (its own type: pack_row refuses ids or a mask that do not fit)
                mask = np.asarray(row["loss_mask"]) if "loss_mask" in row else np.ones(len(ids), np.int8)
                sequences.append((ids, mask))
        out, at = [], 0
        names = positions.tolist()
        for size in sizes.tolist():
            out.append(pack_row(sequences[at:at + size], self.limit, pad_seq_to_mult=self.pad_seq_to_mult,
                                pad_id=self.pad_id, names=names[at:at + size], what="row"))
            at += size
        return out

    def __getitem__(self, pack: int) -> dict[str, np.ndarray]:
        return self.__getitems__([int(pack)])[0]


def pack_stream(stream: StreamingDataset, pack_size: int, algorithm: str = "first_fit_shuffle", seed: int = 0, *,
                lookahead: int = 4096, overlong: str = "skip", pad_seq_to_mult: int = 1,
                pad_id: int | None = None, column: str = "input_ids") -> StreamingDataset:
    """A stream of packs of `pack_size` tokens made from `stream`'s tokenized rows (`input_ids`, and
    `loss_mask` aligned with them; see the module docstring). `lookahead` bounds how many consecutive
    rows of the order a pack may draw from. Call `shuffle(seed=)` on the result to permute packs per epoch."""
    if not isinstance(stream, StreamingDataset):
        raise TypeError(f"pack_stream packs a stream (StreamingDataset), got {type(stream).__name__}")
    if stream.batch_size is not None or stream.filtered:
        raise ValueError("pack_stream needs a stream of rows without batch() or filter() (packs are planned by "
                         "position)")
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 1:
        raise ValueError(f"lookahead must be a positive int, got {lookahead!r}")
    columns = stream.column_names
    if columns is not None and column not in columns:
        raise ValueError(f"pack_stream needs a {column!r} column of token ids; the stream has {columns}")
    counts = _token_counts(stream.source, stream.features, column)
    indices = np.arange(stream.length, dtype=np.int64)
    in_order = counts[stream.order.epoch(0).positions_at(stream.row_offset + indices)]
    members, sizes, limit = [], [], pack_size + 1
    for lo in range(0, len(in_order), lookahead):
        window = in_order[lo:lo + lookahead]
        if not np.any(window >= 2):
            continue
        try:
            plan = plan_packs(window, pack_size, algorithm, seed + lo // lookahead, overlong,
                              pad_seq_to_mult=pad_seq_to_mult)
        except ValueError as error:
            if "no sequence fits" in str(error):
                continue
            raise
        limit = plan.limit
        for pack in plan.bins:
            members.append(np.asarray(pack, dtype=np.int64) + lo)
            sizes.append(len(pack))
    if not members:
        raise ValueError(f"no row of the stream fits pack_size={pack_size}; nothing to pack")
    described = [stream.order_identity(), pack_size, algorithm, seed, lookahead, overlong, pad_seq_to_mult, column]
    identity = "packs-" + hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]
    source = PackedSource(stream, np.concatenate(members), np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                          limit, identity, pad_seq_to_mult, pad_id)
    rank, world_size, drop_last = stream.placement()
    return StreamingDataset(source, rank=rank, world_size=world_size, drop_last=drop_last)

