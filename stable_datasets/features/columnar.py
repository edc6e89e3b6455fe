"""Whole Arrow columns -> a `Features` schema: the bulk path for columnar input (pandas, Arrow,
dicts of lists), so a million rows are not a million Python calls.

Arrow columns are cast by features/casting.py (zero copy where the type is the feature's), within
their kind only: an int column does not silently become text. Features Arrow cannot judge
(images, fixed-shape arrays, videos) go through the feature's own `encode`, for that column
only. A bad value is reported by the per-value check, which names the column and the row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.arrow.types import is_list_type
from stable_datasets.errors import EncodingError
from stable_datasets.features.array import _ArrayND
from stable_datasets.features.base import FeatureType
from stable_datasets.features.casting import (
    CastLocation,
    arrow_castable,
    cast_column,
    first_failing_row,
    overflows_to_inf,
    value_kind,
)
from stable_datasets.features.features import Features, column_to_arrow
from stable_datasets.features.value import ClassLabel, Value

#: a column as the encoder takes it: Arrow, or Python objects Arrow cannot hold (PIL images, ...)
Column = pa.ChunkedArray | list[Any]


class RowEncodingError(EncodingError):
    """A value of a column does not fit its feature; `row` is its position in the input."""

    def __init__(self, field: str, message: str, row: int):
        self.row = row
        super().__init__(field, message)

    def __reduce__(self):
        return type(self), (self.field, self.message, self.row)


def _first_bad_row(feature: FeatureType, column: pa.ChunkedArray, name: str) -> RowEncodingError | None:
    """The per-value check, run only once a bulk step has refused a column: names the first bad row."""
    row = 0
    for chunk in column.chunks:
        for value in chunk.to_pylist():
            try:
                feature.encode(value, name)
            except EncodingError as exc:
                return RowEncodingError(exc.field, exc.message, row)
            row += 1
    return None


class InputLocation(CastLocation):
    """In-memory input: a failure names the field and the row (RowEncodingError), worded as the
    per-value encoder words it; casts stay within a value's kind."""

    def unknown_class(self, name: str, row: int, value: Any, feature: ClassLabel) -> Exception:
        return RowEncodingError(name, f"unknown class name {value!r}; names are {feature.names[:20]}", row)

    def label_out_of_range(self, name: str, row: int, value: int, feature: ClassLabel) -> Exception:
        return RowEncodingError(name, f"label {value} is out of range [0, {feature.num_classes})", row)

    def bad_value(self, name: str, column: pa.ChunkedArray, feature: FeatureType, problem: str) -> Exception:
        bad = _first_bad_row(feature, column, name)
        if bad is not None:
            return bad
        row = first_failing_row(column, feature.arrow_type())  # a value Python takes and Arrow does not (2**53 + 1)
        target = getattr(feature, "dtype", feature.arrow_type())
        if row is not None:
            return RowEncodingError(name, f"value {column[row].as_py()!r:.80} cannot be stored as {target} ({problem})",
                                    row)
        return EncodingError(name, f"cannot store a {column.type} column as {feature.arrow_type()}: {problem}")


_INPUT = InputLocation()


class RequestedCastLocation(InputLocation):
    """`cast_column` to another Value type: the user asked for the type, so any Arrow safe cast
    goes (ints to text, numeric text to numbers, exact floats to ints), as in Hugging Face; a
    value the cast would change or lose names its row."""

    any_kind = True

    def bad_value(self, name: str, column: pa.ChunkedArray, feature: FeatureType, problem: str) -> Exception:
        row = first_failing_row(column, feature.arrow_type())
        target = getattr(feature, "dtype", feature.arrow_type())
        if row is None:
            return EncodingError(name, f"cannot cast a {column.type} column to {target}: {problem}")
        return RowEncodingError(name, f"value {column[row].as_py()!r:.80} cannot be cast to {target} ({problem})", row)


_REQUESTED = RequestedCastLocation()


def cast_requested(column: pa.ChunkedArray, feature: Value, name: str) -> pa.ChunkedArray:
    """`column` cast to `feature` because the user asked for it (`cast_column`); raises
    RowEncodingError naming the first value the cast cannot keep. Numbers become bools only from
    0 and 1 (Arrow would turn 2 into True, and the 2 would be lost)."""
    if feature.dtype == "bool" and value_kind(column.type) == "number":
        lost = pc.fill_null(pc.and_(pc.not_equal(column, 0), pc.not_equal(column, 1)), False)
        if pc.any(lost).as_py():
            row = pc.index(lost, True).as_py()
            raise RowEncodingError(name, f"value {column[row].as_py()!r} is neither 0 nor 1, so it cannot be a "
                                         "bool without being lost", row)
    within_kind = arrow_castable(column.type, feature)  # the encoder's checks, with its wording
    cast = cast_column(column, feature, name, _INPUT if within_kind else _REQUESTED)
    assert cast is not None  # a Value cast is always Arrow's to judge when any kind is allowed
    return cast


def encode_column(feature: FeatureType, column: pa.ChunkedArray | pa.Array | list, name: str) -> pa.ChunkedArray:
    """`column` (Arrow, or a list of Python objects) stored as `feature` stores it; raises
    RowEncodingError naming the column and the row."""
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column], type=column.type)
    if isinstance(column, pa.ChunkedArray):
        if isinstance(column.type, pa.ExtensionType):  # e.g. Hugging Face's Array2D: read its storage
            column = pa.chunked_array([c.storage for c in column.chunks], type=column.type.storage_type)
        if is_date_or_time(column.type) and isinstance(feature, Value) and feature.dtype in ("string", "large_string"):
            column = column.cast(feature.arrow_type())  # ISO text, as the file loaders store dates and times
        if isinstance(feature, _ArrayND) and column.type != feature.arrow_type():
            fixed = _fixed_from_nested(feature, column)
            if fixed is not None:
                return fixed
        cast = cast_column(column, feature, name, _INPUT)
        if cast is not None:
            return cast
        values: Any = [v for chunk in column.chunks for v in chunk.to_pylist()]
    else:
        values = column
    # one value at a time: features whose checks Arrow cannot do (images, arrays, videos), or objects
    encoded: list[Any] = []
    for value in values:
        try:
            encoded.append(feature.encode(value, name))
        except EncodingError as exc:
            raise RowEncodingError(exc.field, exc.message, len(encoded)) from None
    return pa.chunked_array([column_to_arrow(feature, encoded)], type=feature.arrow_type())


def _fixed_from_nested(feature: _ArrayND, column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """Nested lists of exactly `feature.shape` (no nulls) as flat fixed-size lists; None otherwise
    (the per-value path then names the first cell that does not fit)."""
    target = feature.arrow_type()
    chunks = []
    for chunk in column.chunks:
        values: pa.Array = chunk
        for size in feature.shape:
            if not is_list_type(values.type) or values.null_count:
                return None
            lengths = pc.list_value_length(values)
            if len(values) and (pc.min(lengths).as_py() != size or pc.max(lengths).as_py() != size):
                return None
            values = values.flatten()
        if values.null_count or value_kind(values.type) != "number":
            return None
        try:
            flat = values.cast(target.value_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if overflows_to_inf(values, flat):
            return None
        chunks.append(pa.FixedSizeListArray.from_arrays(flat, target.list_size))
    return pa.chunked_array(chunks, type=target)


def is_date_or_time(arrow_type: pa.DataType) -> bool:
    """Dates, times and timestamps: no feature of their own, stored as their ISO text."""
    return pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type)


def as_columns(data: Mapping[str, Any]) -> dict[str, Column]:
    """A dict of columns (lists, numpy arrays, Arrow arrays) as Arrow columns where Arrow can hold
    them as a whole, else as lists of objects (PIL images, arrays of several dimensions)."""
    lengths = {name: len(values) for name, values in data.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"columns have different lengths: {lengths}")
    columns: dict[str, Column] = {}
    for name, values in data.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"column names must be non-empty strings, got {name!r}")
        if isinstance(values, pa.ChunkedArray):
            columns[name] = values
        elif isinstance(values, pa.Array):
            columns[name] = pa.chunked_array([values], type=values.type)
        elif isinstance(values, np.ndarray) and values.ndim > 1:
            columns[name] = list(values)  # one cell per row of a multi-dimensional array
        else:
            try:
                array = pa.array(values)
            except (pa.ArrowException, ValueError, TypeError, OverflowError):
                columns[name] = list(values)
            else:
                columns[name] = pa.chunked_array([array], type=array.type)
    return columns


def slice_column(column: Column, start: int, stop: int) -> Column:
    return column.slice(start, stop - start) if isinstance(column, pa.ChunkedArray) else column[start:stop]


def encode_columns(features: Features, columns: Mapping[str, Column]) -> pa.Table:
    """Exactly the columns of `features`, in their order, stored as they store them."""
    names = list(columns)
    missing = [n for n in features if n not in columns]
    if missing:
        raise EncodingError(missing[0], f"missing column '{missing[0]}' (the input has columns {names})")
    extra = [n for n in names if n not in features]
    if extra:
        raise EncodingError(extra[0], f"unexpected column '{extra[0]}' (features are {list(features)})")
    arrays = [encode_column(feature, columns[name], name) for name, feature in features.items()]
    return pa.Table.from_arrays(arrays, schema=features.arrow_schema)


def table_columns(table: pa.Table | pa.RecordBatch) -> dict[str, pa.ChunkedArray]:
    """The columns of a table by name; a name used twice is an error naming it."""
    names = table.schema.names
    if len(set(names)) != len(names):
        repeated = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"column '{repeated}' appears more than once in the input")
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    return {name: table.column(name) for name in names}
