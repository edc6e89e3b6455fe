"""`Sequence(feature)` (alias `List`): a variable-length (or fixed `length`) list of any feature."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import cell_getter, primitive_view
from stable_datasets.errors import EncodingError
from stable_datasets.features.base import FeatureType, as_feature, describe, feature_from_dict
from stable_datasets.features.value import Value, check_numeric_cast


def feature_dict(feature: FeatureType) -> dict[str, Any]:
    """Canonical dict of a feature when nested inside another (structs carry `_type`)."""
    from stable_datasets.features.features import Features  # local: features.features imports this module

    if isinstance(feature, Features):
        return {"_type": "Struct", "fields": feature.to_dict()}
    return feature.to_dict()


class Sequence(FeatureType):
    type_name = "Sequence"

    def __init__(self, feature: Any, length: int = -1):
        self.feature = as_feature(feature)
        self.length = int(length)
        inner = self.feature
        self._numeric = isinstance(inner, Value) and inner.numpy_dtype is not None and inner.dtype != "bool"
        #: a list of numeric lists (audio `[T, C]`, say): a 2-d array goes to Arrow whole (`encode_rows`)
        self._rows_of_numbers = isinstance(inner, Sequence) and inner._numeric
        #: lists (of lists ...) of values: Arrow's Python lists are already the decoded cell
        self._plain = isinstance(inner, Value) or (isinstance(inner, Sequence) and inner._plain)

    def arrow_type(self) -> pa.DataType:
        return pa.list_(self.feature.arrow_type())

    def to_dict(self) -> dict[str, Any]:
        return {"_type": "Sequence", "feature": feature_dict(self.feature), "length": self.length}

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> FeatureType:
        inner, length = data["feature"], data.get("length", -1)
        if data["_type"] == "Sequence" and isinstance(inner, dict) and "_type" not in inner:
            # Hugging Face's legacy Sequence of a dict: a struct whose fields are lists
            from stable_datasets.features.features import Features  # local: features.features imports this module

            return Features({name: cls(feature_from_dict(spec), length=length) for name, spec in inner.items()})
        return cls(feature_from_dict(inner), length=length)

    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
            raise EncodingError(field, f"expected a list, got {describe(value)}")
        if self.length >= 0 and len(value) != self.length:
            raise EncodingError(field, f"expected a list of length {self.length}, got length {len(value)}")
        if self._numeric and isinstance(value, np.ndarray):
            target = self.feature.numpy_dtype
            if value.ndim != 1:
                raise EncodingError(field, f"expected a 1-d array, got {describe(value)}")
            if value.dtype != target and not np.can_cast(value.dtype, target, "same_kind"):
                raise EncodingError(field, f"cannot store {describe(value)} as {target}")
            with np.errstate(over="ignore", invalid="ignore"):
                cast = value.astype(target, copy=False)
            return check_numeric_cast(value, cast, field)
        inner = self.feature
        return [inner.encode(v, f"{field}[{i}]") for i, v in enumerate(value)]

    def encode_rows(self, value: Any, field: str) -> Any:
        """`encode`, except that a 2-d array for a list of numeric lists stays one cast 2-d array (rows of equal
        length) instead of a list of its rows: `to_arrow` stores it with two offset arrays and one copy, where a
        list of rows costs a Python object per row (an hour of audio is 10^8 of them)."""
        if not (self._rows_of_numbers and isinstance(value, np.ndarray) and value.ndim == 2):
            return self.encode(value, field)
        inner = self.feature
        assert isinstance(inner, Sequence)
        if self.length >= 0 and len(value) != self.length:
            raise EncodingError(field, f"expected a list of length {self.length}, got length {len(value)}")
        if inner.length >= 0 and value.shape[1] != inner.length:
            raise EncodingError(f"{field}[0]", f"expected a list of length {inner.length}, got length "
                                               f"{value.shape[1]}")
        target = inner.feature.numpy_dtype
        if value.dtype != target and not np.can_cast(value.dtype, target, "same_kind"):
            raise EncodingError(field, f"cannot store {describe(value)} as {target}")
        with np.errstate(over="ignore", invalid="ignore"):
            cast = np.ascontiguousarray(value, dtype=target)
        return check_numeric_cast(value, cast, field)

    def to_arrow(self, values: list) -> pa.Array:
        """A column of encoded values; 2-d arrays from `encode_rows` become list<list<...>> without a Python
        object per row."""
        if not any(isinstance(v, np.ndarray) and v.ndim == 2 for v in values):
            return pa.array(values, type=self.arrow_type())
        if any(not (isinstance(v, np.ndarray) and v.ndim == 2) for v in values):  # mixed: rows of the arrays
            return pa.array([list(v) if isinstance(v, np.ndarray) and v.ndim == 2 else v for v in values],
                            type=self.arrow_type())
        inner_type = self.feature.arrow_type()
        assert isinstance(self.feature, Sequence)
        value_type = self.feature.feature.arrow_type()
        rows = np.array([len(v) for v in values], dtype=np.int64)
        widths = np.repeat(np.array([v.shape[1] for v in values], dtype=np.int64), rows)
        flat = pa.array(np.concatenate([v.reshape(-1) for v in values]), type=value_type)
        inner_offsets = np.zeros(len(widths) + 1, dtype=np.int64)
        np.cumsum(widths, out=inner_offsets[1:])
        outer_offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(rows, out=outer_offsets[1:])
        if inner_offsets[-1] < 2**31 and outer_offsets[-1] < 2**31:  # list<> holds int32 offsets
            inner = pa.ListArray.from_arrays(pa.array(inner_offsets.astype(np.int32)), flat, type=inner_type)
            return pa.ListArray.from_arrays(pa.array(outer_offsets.astype(np.int32)), inner, type=self.arrow_type())
        raise EncodingError("", f"a batch of {inner_offsets[-1]} values is past the 2^31 a list column holds")

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None:
            return None
        if numpy and self._numeric:
            return np.asarray(raw, dtype=self.feature.numpy_dtype)
        if numpy and self._rows_of_numbers and isinstance(raw, np.ndarray) and raw.ndim == 2:
            return raw.astype(self.feature.feature.numpy_dtype, copy=False)  # rows of one length, read as one view
        if isinstance(raw, np.ndarray):  # a zero-copy slice from a list<number> column (2-d: list<list<number>>)
            return raw.tolist()
        if self._plain and not numpy and isinstance(raw, list):  # Value.decode would return each cell as it is
            if self._rows_of_numbers and any(isinstance(v, np.ndarray) for v in raw):  # ragged rows from the
                return [v.tolist() if isinstance(v, np.ndarray) else v for v in raw]    # cell getter: 1-d views
            return raw
        if numpy and self._rows_of_numbers and isinstance(raw, list) and raw:
            rows = _rectangle(raw)
            if rows is not None:  # rows of one length, no nulls: one 2-d array, as Hugging Face's numpy format
                return rows.astype(self.feature.feature.numpy_dtype, copy=False)
        inner = self.feature
        return [inner.decode(v, numpy=numpy, decode=decode) for v in raw]

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        if numpy and self._numeric and not array.null_count:
            values = primitive_view(array.flatten())
            if values is not None:
                offsets = primitive_view(array.offsets)
                return np.split(values, (offsets - offsets[0])[1:-1])
        if not numpy and isinstance(self.feature, Value):  # Value.decode returns python cells as they are
            return array.to_pylist()
        if numpy and self._rows_of_numbers and not array.null_count:  # each cell one view, no per-element objects
            get = cell_getter(array)
            return [self.decode(get(k), numpy=True, decode=decode) for k in range(len(array))]
        return super().decode_array(array, numpy=numpy, decode=decode)


def _rectangle(rows: list) -> np.ndarray | None:
    """`rows` as a 2-d numeric array, or None when they are ragged or hold a null."""
    try:
        array = np.asarray(rows)
    except ValueError:  # ragged
        return None
    return array if array.ndim == 2 and array.dtype.kind in "biuf" else None


List = Sequence
