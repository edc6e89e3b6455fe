"""Tokenized sequences between the two stages of a packed build: written in parallel, one
Arrow IPC file per job, then memory-mapped so that packing needs only the counts and each
pack's sequences are numpy views, not Python lists."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

TOKENS_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8()))])


def write_tokens(path: Path, chunks: Iterable[Sequence[tuple[np.ndarray, np.ndarray]]]) -> int:
    """Write chunks of (input_ids, loss_mask) sequences; returns how many were written."""
    count = 0
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, TOKENS_SCHEMA) as writer:
        for chunk in chunks:
            columns = []
            for position, dtype in ((0, np.int32), (1, np.int8)):
                values = [np.asarray(sequence[position], dtype=dtype) for sequence in chunk]
                offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int32)
                flat = np.concatenate(values) if values else np.zeros(0, dtype)
                columns.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat)))
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=TOKENS_SCHEMA))
            count += len(chunk)
    return count


class TokenSequences:
    """The sequences of several token files, in order, by global index."""

    def __init__(self, paths: Sequence[str | Path]):
        self._ids: list[tuple[np.ndarray, np.ndarray]] = []  # per file: offsets, values
        self._masks: list[np.ndarray] = []
        counts = []
        for path in paths:
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all().combine_chunks()
            ids, mask = table.column("input_ids").chunks, table.column("loss_mask").chunks
            if ids:
                offsets = ids[0].offsets.to_numpy()
                self._ids.append((offsets, ids[0].values.to_numpy()))
                self._masks.append(mask[0].values.to_numpy())
            else:
                self._ids.append((np.zeros(1, np.int32), np.zeros(0, np.int32)))
                self._masks.append(np.zeros(0, np.int8))
            counts.append(len(self._ids[-1][0]) - 1)
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self._starts[-1])

    def token_counts(self) -> np.ndarray:
        return np.concatenate([np.diff(offsets) for offsets, _ in self._ids]).astype(np.int64) if self._ids else \
            np.zeros(0, np.int64)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        f = int(np.searchsorted(self._starts, index, side="right")) - 1
        offsets, values = self._ids[f]
        local = index - int(self._starts[f])
        lo, hi = int(offsets[local]), int(offsets[local + 1])
        return values[lo:hi], self._masks[f][lo:hi]
