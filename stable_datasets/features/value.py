"""Scalar features: `Value(dtype)` and `ClassLabel(names=|num_classes=)`."""

from __future__ import annotations

import math
from collections.abc import Sequence as SequenceABC
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import binary_values, primitive_view
from stable_datasets.errors import EncodingError
from stable_datasets.features.base import FeatureType, describe

_ARROW_TYPES: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
}
_ALIASES = {"float": "float32", "double": "float64", "int": "int64", "str": "string", "bytes": "binary",
            "boolean": "bool", "half": "float16"}


def normalize_dtype(dtype: Any) -> str:
    """Map numpy dtypes, Python types and aliases to one of the canonical dtype names."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    elif dtype is bool:
        name = "bool"
    elif dtype is int:
        name = "int64"
    elif dtype is float:
        name = "float64"
    elif dtype is str:
        name = "string"
    elif dtype is bytes:
        name = "binary"
    else:
        name = np.dtype(dtype).name
    if name not in _ARROW_TYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; supported: {', '.join(_ARROW_TYPES)}")
    return name


def check_string(value: str, field: str) -> str:
    """A str Arrow can store: UTF-8 has no lone surrogates (e.g. from `surrogateescape` decoding)."""
    if not value.isascii():  # O(1) in CPython: the flag is stored on the string
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EncodingError(field, f"string has a lone surrogate {value[exc.start]!r} at position {exc.start} "
                                       f"and cannot be stored as UTF-8: {value[:40]!r}") from None
    return value


def check_numeric_cast(source: np.ndarray, cast: np.ndarray, field: str) -> np.ndarray:
    """`cast` if it holds the same numbers as `source`; numpy's casts turn an overflow into inf
    (floats) or a wrapped value (ints) without a word."""
    if source.dtype == cast.dtype or source.size == 0 or source.dtype.kind not in "fiub":
        return cast
    if cast.dtype.kind == "f":
        bad = np.isinf(cast) & ~np.isinf(source) if source.dtype.kind == "f" else np.isinf(cast)
    elif source.dtype.kind == "f":
        bad = cast != source  # a float cast to an int keeps only whole numbers that fit
    else:
        bad = cast.astype(source.dtype) != source
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        at = f"{field}[{']['.join(map(str, where))}]" if where else field
        raise EncodingError(at, f"value {source[where].item()!r} does not fit {cast.dtype} "
                                f"(it would be stored as {cast[where].item()!r})")
    return cast


def numeric_kind(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype.startswith("int"):
        return "int"
    if dtype.startswith("uint"):
        return "uint"
    if dtype.startswith("float"):
        return "float"
    if dtype.endswith("string"):
        return "string"
    return "binary"


class Value(FeatureType):
    """One scalar of a fixed dtype (bool, int8..uint64, float16..float64, string, binary)."""

    type_name = "Value"

    def __init__(self, dtype: Any):
        self.dtype = normalize_dtype(dtype)
        self._kind = numeric_kind(self.dtype)
        if self._kind in ("int", "uint"):
            info = np.iinfo(self.dtype)
            self._lo, self._hi = int(info.min), int(info.max)
        # the largest finite value of a narrow float: beyond it a value would be stored as inf
        self._float_max = float(np.finfo(self.dtype).max) if self._kind == "float" and self.dtype != "float64" else None

    def arrow_type(self) -> pa.DataType:
        return _ARROW_TYPES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return {"_type": "Value", "dtype": self.dtype}

    @property
    def numpy_dtype(self) -> np.dtype | None:
        return None if self._kind in ("string", "binary") else np.dtype(self.dtype)

    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        kind = self._kind
        if type(value) is int and kind in ("int", "uint") and self._lo <= value <= self._hi:
            return value
        if type(value) is str and kind == "string" and value.isascii():
            return value
        if kind in ("int", "uint"):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise EncodingError(field, f"expected an integer for {self.dtype}, got {describe(value)}: {value!r}")
            value = int(value)
            if not self._lo <= value <= self._hi:
                raise EncodingError(field, f"value {value} is out of range for {self.dtype} "
                                           f"[{self._lo}, {self._hi}]")
            return value
        if kind == "float":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise EncodingError(field, f"expected a number for {self.dtype}, got {describe(value)}: {value!r}")
            try:
                number = float(value)
            except OverflowError:
                raise EncodingError(field, f"value {value} does not fit {self.dtype}") from None
            if self._float_max is not None and abs(number) > self._float_max and not math.isinf(number):
                raise EncodingError(field, f"value {number!r} does not fit {self.dtype} (largest finite value "
                                           f"{self._float_max:.6g}); it would be stored as inf")
            return number
        if kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise EncodingError(field, f"expected a bool, got {describe(value)}: {value!r}")
            return bool(value)
        if kind == "string":
            if not isinstance(value, str):
                raise EncodingError(field, f"expected a str, got {describe(value)}: {value!r:.80}")
            return check_string(value, field)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise EncodingError(field, f"expected bytes, got {describe(value)}")

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if numpy and raw is not None and self._kind not in ("string", "binary"):
            return np.asarray(raw, dtype=self.dtype)[()]
        return raw

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        if self._kind in ("string", "binary"):
            return binary_values(array, as_str=self._kind == "string")
        view = primitive_view(array)
        if view is None:  # nulls present: numpy gets NaN-able objects, python gets None
            return array.to_numpy(zero_copy_only=False) if numpy else array.to_pylist()
        return view if numpy else view.tolist()


#: the id of a row without a label (STL-10's unlabeled split), accepted by ClassLabel as Hugging Face's is
NO_LABEL = -1


class ClassLabel(FeatureType):
    """An integer class id stored as int64; encode accepts an index, a class name, or -1 for no label."""

    type_name = "ClassLabel"

    def __init__(self, num_classes: int | None = None, names: SequenceABC[str] | None = None,
                 names_file: str | Path | None = None):
        if names is not None and names_file is not None:  # Hugging Face's rule and words
            raise ValueError("Please provide either names or names_file but not both.")
        if names is not None and not isinstance(names, (list, tuple)):
            raise TypeError(f"Please provide names as a list, is {type(names)}")
        if names_file is not None:
            names = [line.strip() for line in Path(names_file).read_text().splitlines() if line.strip()]
        if names is not None:
            names = [str(n) for n in names]
            if len(set(names)) != len(names):
                raise ValueError(f"ClassLabel names must be unique, got {names}")
            if num_classes is not None and num_classes != len(names):
                raise ValueError(f"num_classes={num_classes} does not match {len(names)} names")
            num_classes = len(names)
        elif num_classes is None:
            raise ValueError("ClassLabel needs names=, names_file= or num_classes=")
        else:
            names = [str(i) for i in range(num_classes)]
        self.names: list[str] = list(names)
        self.num_classes: int = int(num_classes)
        self._index = {n: i for i, n in enumerate(self.names)}

    def arrow_type(self) -> pa.DataType:
        return pa.int64()

    def to_dict(self) -> dict[str, Any]:
        return {"_type": "ClassLabel", "names": list(self.names), "num_classes": self.num_classes}

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> ClassLabel:
        names = data.get("names")
        num_classes = data.get("num_classes")
        return cls(num_classes=None if names else num_classes, names=names or None)

    def str2int(self, name: str | SequenceABC[str]) -> int | list[int]:
        if not isinstance(name, str):
            if not isinstance(name, (SequenceABC, np.ndarray)):  # ValueError, as Hugging Face raises it
                raise ValueError(f"str2int takes a class name or a list of them, got {type(name).__name__}: {name!r}")
            return [self.str2int(n) for n in name]  # type: ignore[misc]
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"unknown class name {name!r}; names are {self.names}") from None

    def int2str(self, index: int | SequenceABC[int]) -> str | list[str]:
        if not isinstance(index, (int, np.integer)):
            if not isinstance(index, (SequenceABC, np.ndarray)) or isinstance(index, str):
                raise ValueError(f"int2str takes a class index or a list of them, got {type(index).__name__}: "
                                 f"{index!r}")
            return [self.int2str(i) for i in index]  # type: ignore[misc]
        if not 0 <= int(index) < self.num_classes:
            raise ValueError(f"class index {index} is out of range [0, {self.num_classes})")
        return self.names[int(index)]

    def encode(self, value: Any, field: str) -> Any:
        if type(value) is int and NO_LABEL <= value < self.num_classes:
            return value
        if value is None:
            return None
        if isinstance(value, str):
            index = self._index.get(value)
            if index is None:
                raise EncodingError(field, f"unknown class name {value!r}; names are {self.names[:20]}")
            return index
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise EncodingError(field, f"expected a class index or name, got {describe(value)}: {value!r}")
        value = int(value)
        if not NO_LABEL <= value < self.num_classes:
            raise EncodingError(field, f"label {value} is out of range [0, {self.num_classes})")
        return value

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if numpy and raw is not None:
            return np.int64(raw)
        return raw

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        return Value("int64").decode_array(array, numpy=numpy)
