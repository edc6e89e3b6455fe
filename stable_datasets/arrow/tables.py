"""Arrow helpers shared by layouts and datasets."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa


def index_array(values: np.ndarray, type: pa.DataType | None = None) -> pa.Array:
    """A numpy array of fixed-width numbers as an Arrow array over the same bytes. `pa.array(ndarray)`
    asks pandas whether the array is a Series, which imports pandas (1-2 s) in every fresh process and
    DataLoader worker that has not yet done it."""
    values = np.ascontiguousarray(values, dtype=np.int64 if type is None else type.to_pandas_dtype())
    return pa.Array.from_buffers(type or pa.int64(), len(values), [None, pa.py_buffer(values)])


def ordered_gather(indices: np.ndarray, starts: np.ndarray, fetch: Callable[[int, np.ndarray], pa.Table],
                   schema: pa.Schema) -> pa.Table:
    """Rows at global `indices`, in order, from parts that begin at `starts` (ascending).

    `fetch(part, local_indices)` returns those rows of one part. Each part is asked once,
    then one `take` on the combined single-chunk table restores the requested order; this
    avoids `Table.take` over many chunks, which concatenates whole columns.
    """
    indices = np.asarray(indices, dtype=np.int64)
    if not len(indices):
        return schema.empty_table()
    parts = np.searchsorted(starts, indices, side="right") - 1
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    cuts = np.flatnonzero(np.diff(sorted_parts)) + 1
    pieces = []
    for group in np.split(order, cuts):
        part = int(parts[group[0]])
        pieces.append(fetch(part, indices[group] - starts[part]))
    table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    table = table.combine_chunks()
    if np.all(order[:-1] < order[1:]):
        return table
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return table.take(index_array(inverse))
