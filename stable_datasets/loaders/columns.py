"""Arrow tables read from files <-> Features: inferring features from a schema, and casting a
table to given features column by column (through features/casting.py, as in-memory data is),
so a value that does not fit is an error naming its file, column and row instead of a silently
changed or dropped row."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.base import FeatureType
from stable_datasets.features.casting import CastLocation, cast_column, first_failing_row, safe_cast, value_kind
from stable_datasets.features.features import Features, infer_feature
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import ClassLabel, Value

#: schema metadata key under which Hugging Face `datasets` stores its features in Arrow/Parquet files
HF_METADATA_KEY = b"huggingface"


class LoaderError(StableDatasetsError, ValueError):
    """A data file that cannot be read as asked; the message names the file and where in it."""


def feature_for_type(arrow_type: pa.DataType) -> FeatureType:
    """Our feature for an Arrow type a reader inferred. Types without a feature of their own are
    stored as text (dates, times, timestamps: their ISO form; an all-null column: strings) or as
    float64 (decimals)."""
    try:
        return infer_feature(arrow_type, lenient=True)
    except ValueError as exc:  # names the innermost type that has no feature
        raise LoaderError(f"{exc}; pass features= to say how to store this column") from None


def features_from_schema(schema: pa.Schema, where: str) -> Features:
    """Features stored in the schema (ours, or Hugging Face's), else inferred from its types; a type
    with no feature is an error naming `where` (the file) and the column."""
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
    inferred = {}
    for field in schema:
        try:
            inferred[field.name] = feature_for_type(field.type)
        except LoaderError as exc:
            raise LoaderError(f"{where}: column {field.name!r}: {exc}") from None
    return Features(inferred)


#: an integer literal of 19 digits or more: the only kind that may not fit int64 (text readers infer
#: float64 for it and round it; pandas keeps it as uint64)
LONG_INTEGER = re.compile(rb"(?<![\w.+-])-?\d{19,}(?![\w.])")


def exact_integer_type(column: str, values: Iterable[tuple[Any, Any]],
                       locate: Callable[[Any], str]) -> pa.DataType | None:
    """uint64 for a column whose values (each with a key `locate` turns into "file, line N") are all
    integers and some fit only uint64; None when they are not all integers (a float column stays
    float) or all fit int64. An integer outside both is an error naming its line: float64 would
    round it silently."""
    largest = smallest = 0
    for key, value in values:
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        mixed = (value < 0 and largest >= 1 << 63) or (value >= 1 << 63 and smallest < 0)
        if mixed or not -(1 << 63) <= value < (1 << 64):
            fits = "fits no integer type in a column that also has negative integers" if mixed else \
                "fits neither int64 nor uint64"
            raise LoaderError(f"{locate(key)}: column {column!r}: the integer {value} {fits}; pass features= with "
                              "Value('string') to keep it as text, or Value('float64')")
        largest, smallest = max(largest, value), min(smallest, value)
    return pa.uint64() if largest >= 1 << 63 else None


def is_columnar(feature: Any) -> bool:
    """True when Arrow casts alone turn a column read from a file into this feature (no Python per row)."""
    if isinstance(feature, Mapping):
        return all(is_columnar(f) for f in feature.values())
    if isinstance(feature, Sequence):
        return is_columnar(feature.feature) and not isinstance(feature.feature, ClassLabel)
    return isinstance(feature, (Value, ClassLabel))


#: text an integer column takes exactly as written (no float64 in between): digits, a minus sign
_INTEGER_TEXT = r"^-?[0-9]+$"
#: from this magnitude on a float64 no longer holds every integer: "9007199254740993.0" would read as ...992
_EXACT_IN_FLOAT = 2**53


def cast_file_column(column: Any, target: pa.DataType) -> tuple[Any, str | None]:
    """(a file's column cast to `target`, None), or (None, why not): Arrow's safe cast, and text that
    writes an integer another way ("0.0", "1e3", "+7") read as that integer, as pandas (so Hugging
    Face's csv loader) reads it. A fraction ("1.5") or text that is no number ("abc") is refused, and so
    is such a form past 2**53, which float64 could not read exactly. Whole columns, in Arrow."""
    cast, problem = safe_cast(column, target)
    if problem is None or value_kind(column.type) != "string" or not pa.types.is_integer(target):
        return cast, problem
    plain = pc.match_substring_regex(column, _INTEGER_TEXT)
    none = pa.scalar(None, column.type)
    exact, problem = safe_cast(pc.if_else(plain, column, none), target)
    if problem is not None:
        return None, problem
    numbers, problem = safe_cast(pc.if_else(plain, none, column), pa.float64())
    if problem is not None:
        return None, problem
    if pc.any(pc.greater_equal(pc.abs(numbers), _EXACT_IN_FLOAT)).as_py():
        return None, "an integer past 2**53 written with a decimal point or an exponent is not read exactly"
    whole, problem = safe_cast(numbers, target)
    if problem is not None:
        return None, problem
    return pc.if_else(plain, exact, whole), None


class FileLocation(CastLocation):
    """Columns read from a file: a failure names the file, the column and the line (`line_of` turns
    a row of the table, counted from `first_row`, into the file's line, 1-based as an editor shows it)
    or else the row (counted from 1). Any Arrow cast is allowed, since the reader parsed the column
    and `features=` asked for its type, and text that writes an integer as "0.0" reads as one
    (`cast_file_column`)."""

    any_kind = True

    def __init__(self, where: str, first_row: int = 0, line_of: Callable[[int], int | None] | None = None,
                 path: str | None = None):
        self.where, self.first_row, self.line_of, self.path = where, first_row, line_of, path or where

    def cast(self, column: Any, target: pa.DataType) -> tuple[Any, str | None]:
        return cast_file_column(column, target)

    def _line(self, row: int) -> int | None:
        return self.line_of(self.first_row + row) if self.line_of is not None else None

    def _at(self, name: str, row: int) -> str:
        line = self._line(row)
        if line is not None:
            return f"{self.path}, line {line}: column {name!r}"
        return f"{self.where}: column {name!r}, row {self.first_row + row + 1}"

    def unknown_class(self, name: str, row: int, value: Any, feature: ClassLabel) -> Exception:
        return LoaderError(f"{self._at(name, row)}: unknown class name {value!r}; names are {feature.names[:20]}")

    def label_out_of_range(self, name: str, row: int, value: int, feature: ClassLabel) -> Exception:
        return LoaderError(f"{self._at(name, row)}: class index {value} is out of range [0, {feature.num_classes})")

    def not_labels(self, name: str, column: pa.ChunkedArray, problem: str) -> Exception:
        return LoaderError(f"{self.where}: column {name!r} ({column.type}) cannot be class labels: {problem}")

    def bad_value(self, name: str, column: pa.ChunkedArray, feature: FeatureType, problem: str) -> Exception:
        row = first_failing_row(column, feature.arrow_type(), self.cast)
        if row is None:
            return LoaderError(f"{self.where}: column {name!r} of type {column.type} cannot be stored as {feature!r}: "
                               f"{problem}")
        value = column[row].as_py()
        if self._line(row) is not None:  # as the reader's own conversion errors word it (csv_files.CsvLoader._error)
            stored = feature.dtype if type(feature) is Value else repr(feature)
            why = f" ({problem})" if problem.startswith(("it would", "an integer past")) else ""
            return LoaderError(f"{self._at(name, row)}: value {value!r:.80} cannot be stored as {stored}{why}; pass "
                               "features= to store the column as another type")
        return LoaderError(f"{self._at(name, row)}: value {value!r:.80} cannot be stored as {feature!r} ({problem}); "
                           "pass features= to store the column as another type")


def conform_table(table: pa.Table | pa.RecordBatch, features: Features, where: str,
                  first_row: int = 0, line_of: Callable[[int], int | None] | None = None,
                  path: str | None = None) -> pa.Table:
    """`table` with exactly the columns of `features`, in their order and Arrow types.

    A missing or unexpected column, or a value the cast cannot keep (a float with a fraction
    for an int column, text for a number, an unknown class name), raises a LoaderError naming
    `where` (the file), the column and the line (`line_of(row)`, the row counted from the piece's start
    with `first_row` the table's first) or else the row.
    A table already in the features' schema is returned as it is.
    """
    names = list(features)
    schema = features.arrow_schema
    if table.schema.equals(schema, check_metadata=False) and not any(isinstance(f, ClassLabel)
                                                                     for f in features.values()):
        return table if isinstance(table, pa.Table) else pa.Table.from_batches([table])  # ids need a range check
    missing = [n for n in names if n not in table.schema.names]
    if missing:
        raise LoaderError(f"{where}: no column {missing[0]!r} (the file has columns {table.schema.names}, the "
                          f"features ask for {names})")
    extra = [n for n in table.schema.names if n not in features]
    if extra:
        raise LoaderError(f"{where}: column {extra[0]!r} is not in the features {names}; add it to features= "
                          "(or remove it from the file)")
    location = FileLocation(where, first_row, line_of, path)
    arrays = [conform_column(table.column(name), features[name], location, name) for name in names]
    return pa.Table.from_arrays(arrays, schema=schema)


def conform_column(column: pa.ChunkedArray | pa.Array, feature: FeatureType, location: FileLocation,
                   name: str) -> pa.ChunkedArray:
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column], type=column.type)
    return cast_column(column, feature, name, location)  # never None: a file's columns take any Arrow cast
