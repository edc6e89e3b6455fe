"""The interleaved schema: one row per item of a document, plus schema reconciliation.

A document (a "sample") is a metadata row (`position` -1) and its items in order: text rows
and image rows. Reserved columns have fixed types; every other column is a passthrough
column carried from the source (per-document metadata, per-image or per-text fields).

The three public helpers behave as NeMo Curator's of the same names, so code written for
Curator keeps its results:
- `resolve_schema(schema, overrides)` returns None when neither is given; overrides merge onto
  `INTERLEAVED_SCHEMA`; an explicit `schema` is returned as it is and ignores overrides (with
  Curator's warning). A reserved column may only be overridden to its large or small variant
  (`text_content` as `large_string`): readers rely on the others' types.
- `reconcile_schema` gives reserved columns their canonical types but never downcasts a large
  type (an observed `large_string` `text_content` stays `large_string`); passthrough columns
  merged across several schemas widen safely (int32 -> int64, string -> large_string, integers
  meeting floats become float64), dictionaries are unwrapped.
- `align_table(table, target)` makes a table fit exactly `target` (it does not reconcile it):
  missing columns are null-filled, extra ones dropped, reserved columns cast as Curator casts
  them (unsafe only from a large type to its small variant), passthrough columns with Arrow's
  checked casts, so a value that does not fit raises a SchemaError naming the column.
Readers and writers align to `target_schema`, the user's schema completed with the reserved
columns, or what they observed with the overrides applied.
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


_LARGE = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}  # reserved types with a large variant


def _same_kind(canonical: pa.DataType, other: pa.DataType) -> bool:
    """`other` is `canonical` or its large/small variant (string/large_string, binary/large_binary)."""
    return other == canonical or _LARGE.get(canonical) == other or _LARGE.get(other) == canonical


def reconcile_schema(schemas: pa.Schema | Iterable[pa.Schema]) -> pa.Schema:
    """One schema for one or several inputs: reserved columns canonical (a large variant observed is kept),
    passthrough columns widened safely."""
    if isinstance(schemas, pa.Schema):
        schemas = [schemas]
    passthrough: dict[str, pa.DataType] = {}
    large: set[str] = set()
    for schema in schemas:
        for field in schema:
            if field.name in RESERVED_COLUMNS:
                canonical = INTERLEAVED_SCHEMA.field(field.name).type
                if _unwrap(field.type) == _LARGE.get(canonical):
                    large.add(field.name)
                continue
            passthrough[field.name] = _merge_types(field.name, passthrough[field.name], field.type) \
                if field.name in passthrough else _unwrap(field.type)
    reserved = [f.with_type(_LARGE[f.type]) if f.name in large else f for f in INTERLEAVED_SCHEMA]
    return pa.schema([*reserved, *[pa.field(n, t) for n, t in passthrough.items()]])


def resolve_schema(schema: pa.Schema | None = None, overrides: Mapping[str, pa.DataType] | None = None, *,
                   schema_overrides: Mapping[str, pa.DataType] | None = None) -> pa.Schema | None:
    """The schema the user asked for: `schema` as given (overrides ignored, with a warning), else the
    overrides merged onto INTERLEAVED_SCHEMA, else None. `schema_overrides=` is `overrides` by the
    readers' and writers' keyword."""
    if overrides is not None and schema_overrides is not None:
        raise TypeError("resolve_schema: pass the overrides once (overrides or schema_overrides)")
    overrides = overrides if overrides is not None else schema_overrides
    if schema is not None:
        if overrides:
            logger.warning("schema_overrides ignored because schema= is already set; use one or the other, not both")
        return schema
    if not overrides:
        return None
    fields = {f.name: f for f in INTERLEAVED_SCHEMA}
    bad = sorted(n for n, t in overrides.items() if n in RESERVED_COLUMNS and not _same_kind(fields[n].type, t))
    if bad:
        raise SchemaError(f"reserved columns {bad} have fixed types and cannot be overridden (only to their large "
                          "or small variant, e.g. text_content as large_string)")
    for name, dtype in overrides.items():
        nullable = fields[name].nullable if name in fields else True
        fields[name] = pa.field(name, dtype, nullable=nullable)
    return pa.schema(list(fields.values()))


def target_schema(observed: pa.Schema, schema: pa.Schema | None = None,
                  schema_overrides: Mapping[str, pa.DataType] | None = None) -> pa.Schema:
    """What a reader or writer aligns its tables to: the user's `schema` completed with the reserved columns
    it lacks, or the `observed` schema reconciled with the overrides applied over it."""
    resolved = resolve_schema(schema, schema_overrides=schema_overrides)
    if schema is not None:
        return reconcile_schema([resolved])
    fields = {f.name: f for f in reconcile_schema([observed])}
    if resolved is not None:
        for name in schema_overrides or {}:
            wanted = resolved.field(name)
            fields[name] = wanted if name in RESERVED_COLUMNS else pa.field(name, wanted.type)
    return pa.schema(list(fields.values()))


def _cast_reserved(name: str, column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    column = column.cast(_unwrap(column.type)) if pa.types.is_dictionary(column.type) else column
    if column.type == target:
        return column
    if name == "position":
        if len(column) and (pc.min(column).as_py() < -(2**31) or pc.max(column).as_py() > 2**31 - 1):
            raise SchemaError("position values do not fit int32")
        return column.cast(target)
    return column.cast(target, safe=_LARGE.get(target) != column.type)  # large -> small unchecked, as Curator


def align_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Make `table` fit exactly `schema`: missing columns as nulls, dictionaries unwrapped, extra columns
    dropped, reserved columns cast as Curator casts them, passthrough columns with checked casts."""
    columns = []
    for field in schema:
        if field.name not in table.column_names:
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
            try:
                column = column.cast(field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(f"column {field.name!r} cannot be cast from {source} to {field.type}: {exc}") \
                    from None
        columns.append(column)
    extra = [n for n in table.column_names if n not in schema.names]
    if extra:
        logger.debug("align_table drops columns not in the schema: {}", extra)
    return pa.Table.from_arrays(columns, schema=schema)
