"""Fixed-shape tensors: `Array2D/3D/4D(shape, dtype)`.

Stored as a flat `fixed_size_list<dtype>[prod(shape)]`, so a record batch column is one
contiguous buffer and a row is a zero-copy reshaped numpy view of the memory map.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import fixed_size_view
from stable_datasets.errors import EncodingError
from stable_datasets.features.base import FeatureType, describe
from stable_datasets.features.value import Value, check_numeric_cast, normalize_dtype


class _ArrayND(FeatureType):
    ndim = 0

    def __init__(self, shape: tuple[int, ...] | list[int], dtype: Any):
        shape = tuple(int(d) for d in shape)
        if len(shape) != self.ndim or any(d <= 0 for d in shape):
            raise ValueError(f"{type(self).__name__} needs {self.ndim} positive dimensions, got {shape}")
        self.shape = shape
        self.dtype = normalize_dtype(dtype)
        self._np_dtype = Value(self.dtype).numpy_dtype
        if self._np_dtype is None:
            raise ValueError(f"{type(self).__name__} needs a numeric or bool dtype, got {self.dtype}")
        self._size = math.prod(shape)

    def arrow_type(self) -> pa.DataType:
        return pa.list_(Value(self.dtype).arrow_type(), self._size)

    def to_dict(self) -> dict[str, Any]:
        return {"_type": self.type_name, "shape": list(self.shape), "dtype": self.dtype}

    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        try:
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise EncodingError(field, f"cannot read {describe(value)} as an array: {exc}") from None
        if array.shape != self.shape and array.shape != (self._size,):  # (size,): the stored form to_dict gives
            raise EncodingError(field, f"expected shape {self.shape}, got {array.shape}")
        if array.dtype != self._np_dtype and not _castable(array.dtype, self._np_dtype):
            raise EncodingError(field, f"expected dtype {self.dtype}, got {array.dtype} (not castable safely)")
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, naming the element
            cast = np.ascontiguousarray(array, dtype=self._np_dtype)
        return check_numeric_cast(array, cast, field).reshape(-1)

    def to_arrow(self, values: list) -> pa.Array:
        """Build a column with one numpy copy instead of element-wise conversion."""
        if values and all(v is not None for v in values):
            flat = pa.array(np.concatenate(values), type=Value(self.dtype).arrow_type())
            return pa.FixedSizeListArray.from_arrays(flat, self._size)
        return pa.array(values, type=self.arrow_type())

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None:
            return None
        return np.asarray(raw, dtype=self._np_dtype).reshape(self.shape)

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        view = fixed_size_view(array)
        if view is not None:
            stacked = view.reshape((len(array), *self.shape))
            return stacked if numpy else list(stacked)
        return super().decode_array(array, numpy=numpy, decode=decode)


def _castable(source: np.dtype, target: np.dtype) -> bool:
    """Casts within a kind, and between signed and unsigned integers: Python ints arrive as int64,
    and `check_numeric_cast` then refuses any element whose value does not fit."""
    if source.kind in "iub" and target.kind in "iu":
        return True
    return np.can_cast(source, target, "same_kind")


class Array2D(_ArrayND):
    type_name = "Array2D"
    ndim = 2


class Array3D(_ArrayND):
    type_name = "Array3D"
    ndim = 3


class Array4D(_ArrayND):
    type_name = "Array4D"
    ndim = 4


class Array5D(_ArrayND):
    type_name = "Array5D"
    ndim = 5
