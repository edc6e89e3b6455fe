"""Small record batches joined into batches of a sane size before they reach a layout's writer.

A columnar source hands the write path whatever batches its reader made: a loader over 50,000
one-line files makes 50,000 one-row batches. Each record batch in a cache costs every process
that opens it (about 1.3 KB of bookkeeping per batch, more to validate), and the block shuffle
of training streams reads batches as blocks. So batches smaller than `max_rows` rows are joined,
in order, until the join holds `max_rows` rows or `max_bytes` bytes; a batch that is big enough
alone passes through uncopied. Rows and their order never change, only where batches end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from stable_datasets.features.encoder import DEFAULT_BATCH_BYTES

#: a joined batch ends once it holds this many bytes, whatever its rows: the encoder's bound
MAX_BATCH_BYTES = DEFAULT_BATCH_BYTES


def coalesced(batches: Iterable[pa.RecordBatch], max_rows: int,
              max_bytes: int = MAX_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """`batches` in order, the small ones joined: each yielded batch holds at most `max_rows` rows
    unless it came in bigger; runs of small batches are cut once they reach `max_rows` rows or
    `max_bytes` bytes. Empty batches are dropped."""
    if max_rows < 1 or max_bytes < 1:
        raise ValueError(f"max_rows and max_bytes must be positive, got {max_rows} and {max_bytes}")
    held: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        if batch.num_rows >= max_rows or batch.nbytes >= max_bytes or not batch.num_columns:  # (no columns: no join)
            if held:
                yield _joined(held)
                held, rows, size = [], 0, 0
            yield batch
            continue
        if held and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):
            yield _joined(held)
            held, rows, size = [], 0, 0
        held.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= max_rows or size >= max_bytes:
            yield _joined(held)
            held, rows, size = [], 0, 0
    if held:
        yield _joined(held)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One batch holding `batches` in order (one copy of their buffers; a single batch is not copied)."""
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
