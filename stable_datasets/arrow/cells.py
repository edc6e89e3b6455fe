"""Zero-copy access to the cells of single-chunk Arrow arrays.

Random row access is the hot path of training: a getter is built once per record batch and
column, then each call is a numpy index or a memoryview slice of the memory map, with no
per-cell pyarrow scalar objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

CellGetter = Callable[[int], Any]


_NUMPY_DTYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
                 pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
                 pa.float16(): np.float16, pa.float32(): np.float32, pa.float64(): np.float64}


def primitive_view(array: pa.Array) -> np.ndarray | None:
    """A read-only numpy view of a null-free numeric array, else None.

    Built from the data buffer directly: `Array.to_numpy` imports pandas on first use, which
    would add a third of a second to opening a dataset.
    """
    dtype = _NUMPY_DTYPES.get(array.type)
    if dtype is None or array.null_count:
        return None
    data = array.buffers()[1]
    if data is None:
        return np.zeros(0, dtype)
    # count= reads only what the array covers: a buffer may be longer (and not a whole number of items)
    return np.frombuffer(data, dtype=dtype, count=array.offset + len(array))[array.offset:]


def offsets_and_data(array: pa.Array) -> tuple[np.ndarray, memoryview]:
    """A null-free binary or string array's offsets (a numpy view, int32 or int64) and data buffer."""
    large = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
    bufs = array.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32, count=array.offset + len(array) + 1)
    offsets = offsets[array.offset :]
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    return offsets, data


def _bounds_and_data(array: pa.Array) -> tuple[memoryview, memoryview]:
    """The offsets as a memoryview of the Arrow buffer itself: indexing it makes each int on the
    fly from packed memory, where a Python list of ints would chase a pointer per cell (a cache
    miss per random row on large shards)."""
    offsets, data = offsets_and_data(array)
    return memoryview(offsets), data


def binary_values(array: pa.Array, *, as_str: bool = False) -> list:
    """All cells of a binary/string array as bytes/str, via one offsets read."""
    if array.null_count:
        return array.to_pylist()
    offsets, data = offsets_and_data(array)
    bounds = offsets.tolist()
    if as_str:
        return [str(data[a:b], "utf-8") for a, b in itertools.pairwise(bounds)]
    return [data[a:b].tobytes() for a, b in itertools.pairwise(bounds)]


def fixed_size_view(array: pa.Array) -> np.ndarray | None:
    """(rows, width) zero-copy view of a null-free fixed_size_list of numbers, else None."""
    if array.null_count or not pa.types.is_fixed_size_list(array.type):
        return None
    values = array.flatten()
    view = primitive_view(values)
    if view is None:
        return None
    return view.reshape(len(array), array.type.list_size)


def cell_getter(array: pa.Array) -> CellGetter:
    """A function returning cell k of `array` in its raw form (python scalar, bytes, ndarray...)."""
    t = array.type
    if not array.null_count:
        view = primitive_view(array)
        if view is not None:
            return view.item
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            bounds, data = _bounds_and_data(array)
            return lambda k: data[bounds[k] : bounds[k + 1]].tobytes()
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            bounds, data = _bounds_and_data(array)
            return lambda k: str(data[bounds[k] : bounds[k + 1]], "utf-8")
        view = fixed_size_view(array)
        if view is not None:
            return view.__getitem__
        if (pa.types.is_list(t) or pa.types.is_large_list(t)) and (getter := _rows_getter(array)) is not None:
            return getter
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            # the whole child array, which a slice's offsets index as they are: `flatten()` would
            # cost a compute call per getter (5x the rest, per decoded Parquet row group)
            values = primitive_view(array.values)
            if values is not None:  # a list of numbers: a numpy slice, no per-element objects
                bounds = primitive_view(array.offsets).tolist()
                return lambda k: values[bounds[k]:bounds[k + 1]]
            values = primitive_view(array.flatten())  # nulls in the child, maybe outside this slice
            if values is not None:
                offsets = primitive_view(array.offsets)
                bounds = (offsets - offsets[0]).tolist()
                return lambda k: values[bounds[k]:bounds[k + 1]]
    return lambda k: array[k].as_py()


def _rows_getter(array: pa.Array) -> CellGetter | None:
    """For a null-free list<list<number>> (an audio clip's `[T, C]`, say): cell k as one 2-d view when its rows share
    a length, else a list of 1-d views; no Python object per element (`as_py` made 16,000 lists a clip)."""
    inner = array.values
    if not (pa.types.is_list(inner.type) or pa.types.is_large_list(inner.type)) or inner.null_count:
        return None
    leaf = primitive_view(inner.values)
    if leaf is None:
        return None
    outer, starts = primitive_view(array.offsets), primitive_view(inner.offsets)

    def get(k: int) -> Any:
        first, last = int(outer[k]), int(outer[k + 1])
        bounds = starts[first:last + 1]
        widths = np.diff(bounds)
        if not len(widths):
            return []
        if (widths == widths[0]).all():
            return leaf[bounds[0]:bounds[-1]].reshape(len(widths), int(widths[0]))
        return [leaf[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]

    return get


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Raw cells of every row of a (small) table, through one getter per column."""
    batch = table.combine_chunks()
    getters = [(name, cell_getter(batch.column(name).chunk(0) if batch.column(name).num_chunks
                                  else pa.array([], type=batch.schema.field(name).type)))
               for name in batch.column_names]
    return [{name: get(k) for name, get in getters} for k in range(batch.num_rows)]


def compile_rows_builder(names: list[str]) -> Callable[[list[list[Any]]], list[dict[str, Any]]]:
    """`lambda columns: [{"a": x0, "b": x1} for x0, x1 in zip(*columns)]` for these names: rows from
    whole columns of cells, with no per-row function call."""
    if not names:
        raise ValueError("a row needs at least one column")
    targets = "".join(f"x{j}, " for j in range(len(names)))
    items = ", ".join(f"{name!r}: x{j}" for j, name in enumerate(names))
    return eval(f"lambda columns: [{{{items}}} for {targets}in zip(*columns)]")


def compile_row_builder(names: list[str]) -> Callable[[list[CellGetter], int], dict[str, Any]]:
    """`lambda g, k: {"a": g[0](k), "b": g[1](k)}` for these column names, compiled once per schema:
    the single-row hot path then builds its dict without a zip or a comprehension frame."""
    items = ", ".join(f"{name!r}: g[{j}](k)" for j, name in enumerate(names))
    return eval(f"lambda g, k: {{{items}}}")
