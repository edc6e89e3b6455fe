"""Arrow tables read from files <-> Features: inferring features from a schema, and casting a
table to given features column by column, so a value that does not fit is an error naming its
file, column and row instead of a silently changed or dropped row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.features.base import FeatureType
from stable_datasets.features.features import Features, infer_feature
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import ClassLabel, Value

#: schema metadata key under which Hugging Face `datasets` stores its features in Arrow/Parquet files
HF_METADATA_KEY = b"huggingface"


class LoaderError(ValueError):
    """A data file that cannot be read as asked; the message names the file and where in it."""


def feature_for_type(arrow_type: pa.DataType) -> FeatureType:
    """Our feature for an Arrow type a reader inferred. Types without a feature of their own are
    stored as text (dates, times, timestamps: their ISO form; an all-null column: strings) or as
    float64 (decimals)."""
    try:
        return infer_feature(arrow_type, lenient=True)
    except ValueError as exc:  # names the innermost type that has no feature
        raise LoaderError(f"{exc}; pass features= to say how to store this column") from None


def features_from_schema(schema: pa.Schema) -> Features:
    """Features stored in the schema (ours, or Hugging Face's), else inferred from its types."""
    metadata = schema.metadata or {}
    if HF_METADATA_KEY in metadata:
        try:
            stored = json.loads(metadata[HF_METADATA_KEY]).get("info", {}).get("features")
        except (ValueError, AttributeError):
            stored = None
        if stored and list(stored) == schema.names:
            try:
                return Features.from_dict(stored)
            except ValueError:
                pass  # a Hugging Face type we do not have: fall back to the Arrow types
    try:
        stored_ours = Features.from_arrow_schema(schema)
        if list(stored_ours) == schema.names:
            return stored_ours
    except ValueError:
        pass
    return Features({f.name: feature_for_type(f.type) for f in schema})


def is_columnar(feature: Any) -> bool:
    """True when Arrow casts alone turn a column read from a file into this feature (no Python per row)."""
    if isinstance(feature, Mapping):
        return all(is_columnar(f) for f in feature.values())
    if isinstance(feature, Sequence):
        return is_columnar(feature.feature) and not isinstance(feature.feature, ClassLabel)
    return isinstance(feature, (Value, ClassLabel))


def conform_table(table: pa.Table | pa.RecordBatch, features: Features, where: str,
                  first_row: int = 0) -> pa.Table:
    """`table` with exactly the columns of `features`, in their order and Arrow types.

    A missing or unexpected column, or a value the cast cannot keep (a float with a fraction
    for an int column, text for a number, an unknown class name), raises a LoaderError naming
    `where` (the file), the column and the row (`first_row` is the table's first row in the file).
    """
    names = list(features)
    missing = [n for n in names if n not in table.schema.names]
    if missing:
        raise LoaderError(f"{where}: no column {missing[0]!r} (the file has columns {table.schema.names}, the "
                          f"features ask for {names})")
    extra = [n for n in table.schema.names if n not in features]
    if extra:
        raise LoaderError(f"{where}: column {extra[0]!r} is not in the features {names}; add it to features= "
                          "(or remove it from the file)")
    arrays = [conform_column(table.column(name), features[name], where, name, first_row) for name in names]
    return pa.Table.from_arrays(arrays, schema=features.arrow_schema)


def conform_column(column: pa.ChunkedArray | pa.Array, feature: FeatureType, where: str, name: str,
                   first_row: int = 0) -> pa.ChunkedArray | pa.Array:
    if isinstance(feature, ClassLabel):
        return _class_labels(column, feature, where, name, first_row)
    target = feature.arrow_type()
    if column.type == target:
        return column
    try:
        return pc.cast(column, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        row = _first_bad_row(column, target)
        if row is None:
            raise LoaderError(f"{where}: column {name!r} of type {column.type} cannot be stored as {feature!r}: "
                              f"{exc}") from None
        value = column[row].as_py()
        raise LoaderError(f"{where}: column {name!r}, row {first_row + row + 1}: value {value!r:.80} cannot be "
                          f"stored as {feature!r} ({_first_line(exc)}); pass features= to store the column as "
                          "another type") from None


def _class_labels(column: Any, feature: ClassLabel, where: str, name: str, first_row: int) -> Any:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or \
            pa.types.is_dictionary(column.type):
        column = pc.cast(column, pa.string()) if pa.types.is_dictionary(column.type) else column
        indices = pc.index_in(column, value_set=pa.array(feature.names, pa.string()))
        unknown = pc.and_(pc.is_null(indices), pc.is_valid(column))
        if pc.any(unknown).as_py():
            row = pc.index(unknown, True).as_py()
            raise LoaderError(f"{where}: column {name!r}, row {first_row + row + 1}: unknown class name "
                              f"{column[row].as_py()!r}; names are {feature.names[:20]}")
        return pc.cast(indices, pa.int64())
    try:
        values = pc.cast(column, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise LoaderError(f"{where}: column {name!r} ({column.type}) cannot be class labels: {_first_line(exc)}") \
            from None
    bad = pc.or_(pc.less(values, 0), pc.greater_equal(values, feature.num_classes))
    if pc.any(bad).as_py():
        row = pc.index(bad, True).as_py()
        raise LoaderError(f"{where}: column {name!r}, row {first_row + row + 1}: class index {values[row].as_py()} "
                          f"is out of range [0, {feature.num_classes})")
    return values


def _first_bad_row(column: Any, target: pa.DataType) -> int | None:
    """The first row whose cast fails (a bisection: the error path only)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    lo, hi = 0, len(column)
    if _casts(column, target):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _casts(column.slice(lo, mid - lo), target):
            lo = mid
        else:
            hi = mid
    return lo


def _casts(array: pa.Array, target: pa.DataType) -> bool:
    try:
        pc.cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
