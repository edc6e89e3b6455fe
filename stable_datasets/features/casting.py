"""Whole Arrow columns cast to features: the one cast behind the in-memory constructors
(features/columnar.py) and the file loaders (loaders/columns.py).

A column already of the feature's type is kept as it is (zero copy: no cast, no check, and
nothing can be wrong with it). Numbers, strings, lists and structs are cast by Arrow's safe
cast, plus the check Arrow leaves out (a finite float narrowed to inf); a `ClassLabel` column of
names is looked up as a whole and a column of ids is range-checked as a whole.

What differs between the callers is where a column came from, so `CastLocation` words each
failure (the row of the input and the field for in-memory data; the file, column and row for a
file) and says which casts are allowed: any Arrow cast for a file's column (the reader parsed it,
and `features=` asked for the type), or only one within the value's kind for in-memory data,
where an int column must not silently become text and the per-value encoder takes the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.arrow.types import is_list_type
from stable_datasets.features.array import _ArrayND
from stable_datasets.features.base import FeatureType
from stable_datasets.features.features import Features
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import NO_LABEL, ClassLabel, Value

#: what Arrow raises for a cast it refuses
CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


class CastLocation:
    """Where the columns come from: builds the error for each kind of failure (subclasses word them)."""

    #: any Arrow cast is allowed (file columns); else only casts `arrow_castable` accepts
    any_kind = False

    def unknown_class(self, name: str, row: int, value: Any, feature: ClassLabel) -> Exception:
        raise NotImplementedError

    def label_out_of_range(self, name: str, row: int, value: int, feature: ClassLabel) -> Exception:
        raise NotImplementedError

    def not_labels(self, name: str, column: pa.ChunkedArray, problem: str) -> Exception:
        """A column that is neither class names nor ids (asked only when `any_kind`)."""
        raise NotImplementedError

    def bad_value(self, name: str, column: pa.ChunkedArray, feature: FeatureType, problem: str) -> Exception:
        """The cast refused the column (`problem` says why): the error names the first bad row where it can."""
        raise NotImplementedError

    def cast(self, column: Any, target: pa.DataType) -> tuple[Any, str | None]:
        """(the column cast to `target`, None), or (None, why not): Arrow's safe cast unless a location
        reads more forms of a value (a file's text "0.0" for an integer column, loaders/columns.py)."""
        return safe_cast(column, target)


def cast_column(column: pa.ChunkedArray, feature: FeatureType, name: str,
                location: CastLocation) -> pa.ChunkedArray | None:
    """`column` stored as `feature` stores it; None when Arrow cannot judge it (the caller encodes it
    value by value). A value that does not fit raises the error `location` words."""
    if isinstance(feature, ClassLabel):
        return class_labels(column, feature, name, location)
    target = feature.arrow_type()
    if not (location.any_kind or arrow_castable(column.type, feature)
            or (isinstance(feature, _ArrayND) and column.type == target)):
        return None  # e.g. images: binary cells are not images until decoded
    if column.type == target:
        return column
    cast, problem = location.cast(column, target)
    if problem is not None:
        raise location.bad_value(name, column, feature, problem)
    return cast


def safe_cast(column: Any, target: pa.DataType) -> tuple[Any, str | None]:
    """(the cast column, None), or (None, why the safe cast does not keep the values)."""
    dropped = dropped_field(column, target)
    if dropped is not None:
        return None, f"field {dropped!r} holds values and is not in the features"
    try:
        cast = column.cast(target, safe=True)
    except CAST_ERRORS as exc:
        return None, first_line(exc)
    pairs = zip(column.chunks, cast.chunks) if isinstance(column, pa.ChunkedArray) else [(column, cast)]
    if any(overflows_to_inf(a, b) for a, b in pairs):
        return None, "it would be stored as inf"
    return cast, None


def first_failing_row(column: pa.ChunkedArray | pa.Array, target: pa.DataType,
                      cast: Callable[[Any, pa.DataType], tuple[Any, str | None]] | None = None) -> int | None:
    """The first row whose cast (`safe_cast` unless given) fails, by bisection (error paths only); None when none
    does."""
    cast = cast or safe_cast
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if cast(column, target)[1] is None:
        return None
    lo, hi = 0, len(column)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cast(column.slice(lo, mid - lo), target)[1] is None:
            lo = mid
        else:
            hi = mid
    return lo


def class_labels(column: pa.ChunkedArray, feature: ClassLabel, name: str,
                 location: CastLocation) -> pa.ChunkedArray | None:
    """Class ids from a column of names or ids, checked as a whole; None when the column is neither
    (and the location does not allow other casts)."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if value_kind(column.type) == "string":
        ids = pc.index_in(column, value_set=pa.array(feature.names, pa.string()))
        unknown = pc.and_(pc.is_null(ids), pc.is_valid(column))
        if pc.any(unknown).as_py():
            row = pc.index(unknown, True).as_py()
            raise location.unknown_class(name, row, column[row].as_py(), feature)
        return ids.cast(pa.int64())
    if not (pa.types.is_integer(column.type) or pa.types.is_null(column.type)):
        if not location.any_kind:
            return None
        try:
            column = column.cast(pa.int64())
        except CAST_ERRORS as exc:
            raise location.not_labels(name, column, first_line(exc)) from None
    if len(column):
        low, high = pc.min_max(column).values()
        if low.as_py() is not None and (low.as_py() < NO_LABEL or high.as_py() >= feature.num_classes):
            bad = pc.or_(pc.less(column, NO_LABEL), pc.greater_equal(column, feature.num_classes))
            row = pc.index(bad, True).as_py()
            raise location.label_out_of_range(name, row, column[row].as_py(), feature)
    return column.cast(pa.int64())


def value_kind(arrow_type: pa.DataType) -> str:
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
        kind, target = value_kind(source), feature.arrow_type()
        if kind == "number" and value_kind(target) == "number":  # ints to any number, floats to floats (as encode)
            return pa.types.is_integer(source) or pa.types.is_floating(target)
        return kind == value_kind(target)
    if isinstance(feature, ClassLabel):
        return False  # its range (and names) are checked by `class_labels`
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


def dropped_field(column: Any, target: pa.DataType, at: str = "") -> str | None:
    """The path ("a/b") of a struct field holding a value that a cast to `target` would drop, or None: Arrow's
    struct cast keeps only the target's fields, so a field the features do not name (inferred from a file)
    would vanish without a word. A field that is null wherever it appears drops nothing."""
    source = column.type
    if pa.types.is_dictionary(source) or not _nested(source) or not _nested(target):
        return None
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        wanted = {target.field(i).name: target.field(i).type for i in range(target.num_fields)}
        for chunk in chunks:
            for i, child in enumerate(chunk.flatten()):  # flatten() folds the struct's own nulls in
                name = source.field(i).name
                path = f"{at}/{name}" if at else name
                if name not in wanted:
                    if child.null_count < len(child):
                        return path
                elif (found := dropped_field(child, wanted[name], path)) is not None:
                    return found
        return None
    if is_list_type(source) and is_list_type(target):
        for chunk in chunks:
            if (found := dropped_field(chunk.flatten(), target.value_type, at)) is not None:
                return found
    return None


def _nested(arrow_type: pa.DataType) -> bool:
    return pa.types.is_struct(arrow_type) or is_list_type(arrow_type)


def _leaf_values(array: pa.Array) -> pa.Array:
    while is_list_type(array.type):
        array = array.flatten()
    return array


def overflows_to_inf(source: pa.Array, cast: pa.Array) -> bool:
    """True when a finite number became inf (Arrow's safe cast lets float64 -> float32 overflow)."""
    source, cast = _leaf_values(source), _leaf_values(cast)
    if not pa.types.is_floating(cast.type) or cast.type == source.type or cast.type == pa.float64():
        return False
    became_inf = pc.is_inf(cast)
    if pa.types.is_floating(source.type):
        became_inf = pc.and_(became_inf, pc.invert(pc.is_inf(source)))
    return bool(pc.any(became_inf).as_py())


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
