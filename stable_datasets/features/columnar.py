"""Whole Arrow columns -> a `Features` schema: the bulk path for columnar input (pandas, Arrow,
dicts of lists), so a million rows are not a million Python calls.

A column whose Arrow type already is the feature's is kept as it is (zero copy). Numbers,
strings, lists and structs of them are cast by Arrow, within their kind only (an int column
does not silently become text) and with overflow checks; a `ClassLabel` column of names is
looked up as a whole. Features Arrow cannot judge (images, fixed-shape arrays, videos) go
through the feature's own `encode`, for that column only. A bad value is reported by the
per-value check, which names the column and the row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.errors import EncodingError
from stable_datasets.features.array import _ArrayND
from stable_datasets.features.base import FeatureType
from stable_datasets.features.features import Features, column_to_arrow
from stable_datasets.features.sequence import Sequence
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


def _kind(arrow_type: pa.DataType) -> str:
    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return "number"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "binary"
    if pa.types.is_null(arrow_type):
        return "null"
    return "other"


def arrow_castable(source: pa.DataType, feature: FeatureType) -> bool:
    """True when Arrow's safe cast from `source` stores what `feature.encode` would for each value."""
    if pa.types.is_dictionary(source):
        return arrow_castable(source.value_type, feature)
    if pa.types.is_null(source):
        return not isinstance(feature, _ArrayND)
    if type(feature) is Value:
        kind, target = _kind(source), feature.arrow_type()
        if kind == "number" and _kind(target) == "number":  # ints to any number, floats to floats (as encode)
            return pa.types.is_integer(source) or pa.types.is_floating(target)
        return kind == _kind(target)
    if isinstance(feature, ClassLabel):
        return False  # its range (and names) are checked by `_class_labels`
    if isinstance(feature, Sequence):
        if pa.types.is_fixed_size_list(source):
            return feature.length in (-1, source.list_size) and arrow_castable(source.value_type, feature.feature)
        if pa.types.is_list(source) or pa.types.is_large_list(source):  # lengths unknown: a fixed one is checked
            return feature.length == -1 and arrow_castable(source.value_type, feature.feature)
        return False
    if isinstance(feature, Features):
        return (pa.types.is_struct(source) and [source.field(i).name for i in range(source.num_fields)] == list(feature)
                and all(arrow_castable(source.field(i).type, f) for i, f in enumerate(feature.values())))
    return False


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


def _class_labels(feature: ClassLabel, column: pa.ChunkedArray, name: str) -> pa.ChunkedArray | None:
    """Class ids from a column of names or ids, checked as a whole; None when the column is neither."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    kind = _kind(column.type)
    if kind == "string":
        ids = pc.index_in(column, value_set=pa.array(feature.names, pa.string()))
        unknown = pc.and_(pc.is_null(ids), pc.is_valid(column))
        if pc.any(unknown).as_py():
            row = int(np.flatnonzero(unknown.to_numpy(zero_copy_only=False))[0])
            raise RowEncodingError(name, f"unknown class name {column[row].as_py()!r}; names are "
                                         f"{feature.names[:20]}", row)
        return ids.cast(pa.int64())
    if pa.types.is_integer(column.type) or kind == "null":
        low, high = pc.min_max(column).values() if len(column) else (None, None)
        if low.as_py() is not None and (low.as_py() < 0 or high.as_py() >= feature.num_classes):
            bad = pc.or_(pc.less(column, 0), pc.greater_equal(column, feature.num_classes))
            row = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False).astype(bool))[0])
            raise RowEncodingError(name, f"label {column[row].as_py()} is out of range [0, {feature.num_classes})",
                                   row)
        return column.cast(pa.int64())
    return None


def encode_column(feature: FeatureType, column: pa.ChunkedArray | pa.Array | list, name: str) -> pa.ChunkedArray:
    """`column` (Arrow, or a list of Python objects) stored as `feature` stores it; raises
    RowEncodingError naming the column and the row."""
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column], type=column.type)
    if isinstance(column, pa.ChunkedArray):
        if isinstance(column.type, pa.ExtensionType):  # e.g. Hugging Face's Array2D: read its storage
            column = pa.chunked_array([c.storage for c in column.chunks], type=column.type.storage_type)
        if isinstance(feature, _ArrayND) and column.type != feature.arrow_type():
            fixed = _fixed_from_nested(feature, column)
            if fixed is not None:
                return fixed
        if isinstance(feature, ClassLabel):
            labels = _class_labels(feature, column, name)
            if labels is not None:
                return labels
        elif arrow_castable(column.type, feature) or (isinstance(feature, _ArrayND)
                                                      and column.type == feature.arrow_type()):
            return _cast(feature, column, name)
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
            if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)
                    or pa.types.is_fixed_size_list(values.type)) or values.null_count:
                return None
            lengths = pc.list_value_length(values)
            if len(values) and (pc.min(lengths).as_py() != size or pc.max(lengths).as_py() != size):
                return None
            values = values.flatten()
        if values.null_count or _kind(values.type) != "number":
            return None
        try:
            flat = values.cast(target.value_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if _overflows_to_inf(values, flat):
            return None
        chunks.append(pa.FixedSizeListArray.from_arrays(flat, target.list_size))
    return pa.chunked_array(chunks, type=target)


def _cast(feature: FeatureType, column: pa.ChunkedArray, name: str) -> pa.ChunkedArray:
    target = feature.arrow_type()
    if column.type == target:
        return column  # zero copy
    try:
        cast = column.cast(target, safe=True)
        if not any(_overflows_to_inf(a, b) for a, b in zip(column.chunks, cast.chunks)):
            return cast
        problem = "it would be stored as inf"
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        problem = str(exc)
    bad = _first_bad_row(feature, column, name)
    if bad is not None:
        raise bad from None
    raise EncodingError(name, f"cannot store a {column.type} column as {target}: {problem}") from None


def _leaf_values(array: pa.Array) -> pa.Array:
    while pa.types.is_list(array.type) or pa.types.is_large_list(array.type) or \
            pa.types.is_fixed_size_list(array.type):
        array = array.flatten()
    return array


def _overflows_to_inf(source: pa.Array, cast: pa.Array) -> bool:
    """True when a finite number became inf (Arrow's safe cast lets float64 -> float32 overflow)."""
    source, cast = _leaf_values(source), _leaf_values(cast)
    if not pa.types.is_floating(cast.type) or cast.type == source.type or cast.type == pa.float64():
        return False
    became_inf = pc.is_inf(cast)
    if pa.types.is_floating(source.type):
        became_inf = pc.and_(became_inf, pc.invert(pc.is_inf(source)))
    return bool(pc.any(became_inf).as_py())


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
