"""`Features`: the schema of a dataset, a mapping of column name to feature (also a struct).

`to_dict()` is the one canonical JSON form: it is hashed into the fingerprint and stored in
`_metadata.json`, so a cache can be opened and decoded without its builder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.errors import EncodingError
from stable_datasets.features.array import Array2D, Array3D, Array4D, Array5D, _ArrayND
from stable_datasets.features.base import FeatureType, as_feature, describe, feature_from_dict
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence, feature_dict
from stable_datasets.features.value import ClassLabel, Value

SCHEMA_METADATA_KEY = b"stable_datasets.features"


class Features(dict, FeatureType):
    """Ordered mapping of name -> feature. Nested dicts become nested Features (Arrow structs)."""

    type_name = "Struct"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for key, value in list(self.items()):
            if not isinstance(key, str) or not key:
                raise ValueError(f"feature names must be non-empty strings, got {key!r}")
            dict.__setitem__(self, key, as_feature(value))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, as_feature(value))

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict.__eq__(self, other)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v!r}" for k, v in self.items())
        return f"Features({{{inner}}})"

    def copy(self) -> Features:
        return Features(dict(self))

    # -- schema -------------------------------------------------------------------------
    def arrow_type(self) -> pa.DataType:
        return pa.struct([pa.field(k, f.arrow_type()) for k, f in self.items()])

    @property
    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field(k, f.arrow_type()) for k, f in self.items()]
        return pa.schema(fields, metadata={SCHEMA_METADATA_KEY: self.to_json().encode()})

    def to_dict(self) -> dict[str, Any]:
        return {name: feature_dict(feature) for name, feature in self.items()}

    def fingerprint_identity(self) -> dict[str, Any]:
        """A struct inside a config: hashed as its fields."""
        return {"_type": "Struct", "fields": self.to_dict()}

    def to_json(self) -> str:
        """Compact JSON in declared order (an Arrow schema's metadata); fingerprints use canonical_json."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Features:
        """Features from their canonical dict, or from Hugging Face's serialized features."""
        features = {}
        for name, spec in data.items():
            try:
                features[name] = feature_from_dict(spec)
            except (ValueError, TypeError, KeyError) as exc:
                message = f"missing key {exc.args[0]!r} in {spec!r}" if isinstance(exc, KeyError) else exc
                raise ValueError(f"feature {name!r}: {message}") from None
        return cls(features)

    def in_order(self, names: list[str]) -> Features:
        """These features in the order of `names` when they are the same set (the columns of stored
        files, whose order is the declared one), else unchanged. Caches written before the
        metadata kept the declared order list their features sorted by name."""
        if list(self) == names or sorted(self) != sorted(names) or len(set(names)) != len(names):
            return self
        return Features({name: self[name] for name in names})

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> Features:
        return cls.from_dict(data["fields"])

    @classmethod
    def from_arrow_schema(cls, schema: pa.Schema) -> Features:
        """Use stored features when the schema carries them, else infer from Arrow types."""
        meta = schema.metadata or {}
        if SCHEMA_METADATA_KEY in meta:
            return cls.from_dict(json.loads(meta[SCHEMA_METADATA_KEY])).in_order(schema.names)
        return cls({f.name: infer_feature(f.type) for f in schema})

    # -- write side ---------------------------------------------------------------------
    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise EncodingError(field, f"expected a dict, got {describe(value)}")
        check_keys(self, value, field)
        prefix = f"{field}." if field else ""
        return {name: feature.encode(value[name], prefix + name) for name, feature in self.items()}

    # -- read side ----------------------------------------------------------------------
    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None:
            return None
        return {name: f.decode(raw[name], numpy=numpy, decode=decode) for name, f in self.items()}

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        if array.null_count:
            return super().decode_array(array, numpy=numpy, decode=decode)
        columns = {name: f.decode_array(array.field(name), numpy=False, decode=decode)
                   for name, f in self.items()}
        names = list(columns)
        return [dict(zip(names, row)) for row in zip(*columns.values())]


def walk_features(feature: Any) -> Iterator[FeatureType]:
    """A feature and every feature nested in it (struct fields, sequence items), depth first."""
    yield feature
    if isinstance(feature, Mapping):
        for inner in feature.values():
            yield from walk_features(inner)
    elif isinstance(feature, Sequence):
        yield from walk_features(feature.feature)


def check_keys(features: Mapping[str, Any], example: Mapping[str, Any], field: str = "") -> None:
    """Raise an EncodingError naming the first missing or unexpected key."""
    if example.keys() == features.keys():
        return
    prefix = f"{field}." if field else ""
    for name in features:
        if name not in example:
            raise EncodingError(prefix + name, f"missing key '{name}' (example has keys {sorted(example)})")
    extra = sorted(str(k) for k in example if k not in features)
    raise EncodingError(prefix + extra[0], f"unexpected key '{extra[0]}' (features are {list(features)})")


def infer_feature(arrow_type: pa.DataType, lenient: bool = False) -> FeatureType:
    """The feature a plain Arrow type maps to, for data written without stored features.

    `lenient` also takes the types a file reader infers that have no feature of their own:
    decimals are stored as float64; dates, times, timestamps and all-null columns as text."""
    if pa.types.is_struct(arrow_type):
        return Features({arrow_type.field(i).name: infer_feature(arrow_type.field(i).type, lenient)
                         for i in range(arrow_type.num_fields)})
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return Sequence(infer_feature(arrow_type.value_type, lenient))
    if pa.types.is_fixed_size_list(arrow_type):
        return Sequence(infer_feature(arrow_type.value_type, lenient), length=arrow_type.list_size)
    if pa.types.is_dictionary(arrow_type):
        return infer_feature(arrow_type.value_type, lenient)
    if lenient and pa.types.is_decimal(arrow_type):
        return Value("float64")
    if lenient and (pa.types.is_null(arrow_type) or pa.types.is_temporal(arrow_type)):
        return Value("string")
    dtype = _DTYPE_OF_ARROW_TYPE.get(arrow_type)
    if dtype is None:
        raise ValueError(f"no feature type for Arrow type {arrow_type}")
    return Value(dtype)


#: the Value dtype of each plain Arrow type (one lookup instead of building a Value per candidate)
_DTYPE_OF_ARROW_TYPE = {Value(name).arrow_type(): name for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "string", "large_string", "binary", "large_binary")}


def binary_array(values: list) -> pa.Array | None:
    """A binary array built from one join of the cells (pyarrow's per-cell conversion is ~10x
    slower); None when there are nulls or the cells would overflow 32-bit offsets."""
    if None in values:
        return None
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    if lengths.sum() >= 2**31 - 1:
        return None
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = pa.py_buffer(b"".join(values))
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), data])


def column_to_arrow(feature: FeatureType, values: list) -> pa.Array:
    """Build one Arrow column from encoded values, using a feature's bulk path when it has one."""
    if isinstance(feature, (_ArrayND, Sequence)):
        return feature.to_arrow(values)
    if isinstance(feature, Image) or (isinstance(feature, Value) and feature.dtype == "binary"):
        array = binary_array(values)
        if array is not None:
            return array
    return pa.array(values, type=feature.arrow_type())


__all__ = [
    "Array2D", "Array3D", "Array4D", "Array5D", "ClassLabel", "Features", "Image", "Sequence", "Value",
    "check_keys", "column_to_arrow", "infer_feature",
]
