"""The interleaved schema: one row per item of a document, plus schema reconciliation.

A document (a "sample") is a metadata row (`position` -1) and its items in order: text rows
and image rows. Reserved columns have fixed types; every other column is a passthrough
column carried from the source (per-document metadata, per-image or per-text fields).

`reconcile_schema` merges schemas seen in different files, `align_table` makes a table fit a
schema, and `resolve_schema` decides the target schema from an explicit schema, overrides
and what was observed. The rules:
- reserved columns always get their canonical types (an int64 `position` becomes int32,
  checked for range);
- passthrough columns only widen safely (int32 -> int64, string -> large_string), and are
  never cast from large to small types; integers meeting floats become float64 (a JSON
  `"score": 1` in one file and `0.5` in another), checked so that no integer loses digits;
- dictionary-encoded columns are unwrapped;
- an explicit `schema=` wins over `schema_overrides=` (with a warning), and what the user
  declares is cast to with Arrow's checked casts (`align_table(..., declared=True)`): a
  value that does not fit raises instead of being cut.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from loguru import logger

from stable_datasets.errors import StableDatasetsError

MODALITIES = ("text", "image", "metadata")
INTERLEAVED_SCHEMA = pa.schema([
    pa.field("sample_id", pa.string(), nullable=False),
    pa.field("position", pa.int32(), nullable=False),
    pa.field("modality", pa.string(), nullable=False),
    pa.field("content_type", pa.string()),
    pa.field("text_content", pa.string()),
    pa.field("binary_content", pa.large_binary()),
    pa.field("source_ref", pa.string()),
    pa.field("materialize_error", pa.string()),
])
RESERVED_COLUMNS = tuple(INTERLEAVED_SCHEMA.names)
REQUIRED_COLUMNS = ("sample_id", "position", "modality")


class SchemaError(StableDatasetsError, ValueError):
    """Tables or schemas that cannot be reconciled safely."""


def build_source_ref(path: str, member: str | None = None, byte_offset: int | None = None,
                     byte_size: int | None = None, frame_index: int | None = None) -> str:
    ref = {"path": path, "member": member, "byte_offset": byte_offset, "byte_size": byte_size,
           "frame_index": frame_index}
    return json.dumps({k: v for k, v in ref.items() if v is not None}, sort_keys=True)


def parse_source_ref(value: str | None) -> dict[str, Any]:
    return json.loads(value) if value else {}


def _unwrap(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


_WIDER = [  # (narrow, wide) pairs that widen without loss
    *[(a, b) for a, b in [(pa.int8(), pa.int16()), (pa.int16(), pa.int32()), (pa.int32(), pa.int64()),
                          (pa.int8(), pa.int32()), (pa.int8(), pa.int64()), (pa.int16(), pa.int64()),
                          (pa.float16(), pa.float32()), (pa.float32(), pa.float64()), (pa.float16(), pa.float64()),
                          (pa.string(), pa.large_string()), (pa.binary(), pa.large_binary())]],
]


def _number_kind(t: pa.DataType) -> str | None:
    return "int" if pa.types.is_integer(t) else "float" if pa.types.is_floating(t) else None


def _merge_types(name: str, a: pa.DataType, b: pa.DataType) -> pa.DataType:
    a, b = _unwrap(a), _unwrap(b)
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if (a, b) in _WIDER:
        return b
    if (b, a) in _WIDER:
        return a
    if {_number_kind(a), _number_kind(b)} == {"int", "float"}:
        return pa.float64()
    raise SchemaError(f"column {name!r} has incompatible types {a} and {b} across inputs; declare its type "
                      f"with schema_overrides={{{name!r}: ...}}")


def reconcile_schema(schemas: pa.Schema | Iterable[pa.Schema]) -> pa.Schema:
    """One schema for one or several inputs: reserved columns canonical, passthrough columns widened safely."""
    if isinstance(schemas, pa.Schema):
        schemas = [schemas]
    passthrough: dict[str, pa.DataType] = {}
    for schema in schemas:
        for field in schema:
            if field.name in RESERVED_COLUMNS:
                continue
            passthrough[field.name] = _merge_types(field.name, passthrough[field.name], field.type) \
                if field.name in passthrough else _unwrap(field.type)
    return pa.schema([*INTERLEAVED_SCHEMA, *[pa.field(n, t) for n, t in passthrough.items()]])


def resolve_schema(observed: pa.Schema | None = None, *, schema: pa.Schema | None = None,
                   schema_overrides: Mapping[str, pa.DataType] | None = None) -> pa.Schema:
    """The target schema: explicit `schema` (wins), else the observed one with overrides applied."""
    if schema is not None:
        if schema_overrides:
            logger.warning("both schema= and schema_overrides= given; schema= wins and the overrides are ignored")
        return reconcile_schema([schema])
    base = reconcile_schema([observed]) if observed is not None else INTERLEAVED_SCHEMA
    if not schema_overrides:
        return base
    reserved = sorted(set(schema_overrides) & set(RESERVED_COLUMNS))
    if reserved:
        raise SchemaError(f"reserved columns {reserved} have fixed types and cannot be overridden")
    fields = {f.name: f for f in base}
    for name, dtype in schema_overrides.items():
        fields[name] = pa.field(name, dtype)
    return pa.schema(list(fields.values()))


def _cast_reserved(name: str, column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    column = column.cast(_unwrap(column.type)) if pa.types.is_dictionary(column.type) else column
    if column.type == target:
        return column
    if name == "position":
        if len(column) and (pc.min(column).as_py() < -(2**31) or pc.max(column).as_py() > 2**31 - 1):
            raise SchemaError("position values do not fit int32")
        return column.cast(pa.int32())
    return column.cast(target)


def align_table(table: pa.Table, schema: pa.Schema, *, declared: bool = False) -> pa.Table:
    """Make `table` fit `schema`: missing columns as nulls, dictionaries unwrapped, extra columns dropped.

    Passthrough columns only widen, unless the schema was `declared` by the user: then any
    checked Arrow cast is made (0.91 -> "0.91" works, 300 -> int8 raises)."""
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            if not field.nullable:
                raise SchemaError(f"required column {field.name!r} is missing")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if field.name in RESERVED_COLUMNS:
            columns.append(_cast_reserved(field.name, column, field.type))
            continue
        source = _unwrap(column.type)
        if pa.types.is_dictionary(column.type):
            column = column.cast(source)
        if source != field.type:
            if pa.types.is_null(source) or (source, field.type) in _WIDER:
                column = column.cast(field.type)
            elif declared or (_number_kind(source) == "int" and field.type == pa.float64()):
                try:
                    column = column.cast(field.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    target = f"the declared {field.type}" if declared else field.type
                    raise SchemaError(f"column {field.name!r} cannot be cast from {source} to {target}: "
                                      f"{exc}") from None
            else:
                raise SchemaError(f"column {field.name!r} is {source} but the schema says {field.type}; "
                                  "only safe widening casts are made")
        columns.append(column)
    extra = [n for n in table.column_names if n not in schema.names]
    if extra:
        logger.debug("align_table drops columns not in the schema: {}", extra)
    return pa.Table.from_arrays(columns, schema=schema)
