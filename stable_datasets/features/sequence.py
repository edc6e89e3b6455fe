"""`Sequence(feature)` (alias `List`): a variable-length (or fixed `length`) list of any feature."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import primitive_view
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

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None:
            return None
        if numpy and self._numeric:
            return np.asarray(raw, dtype=self.feature.numpy_dtype)
        if isinstance(raw, np.ndarray):  # a zero-copy slice from a list<number> column
            return raw.tolist()
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
        return super().decode_array(array, numpy=numpy, decode=decode)


List = Sequence
