"""The contract every feature type follows, and the registry used by `from_dict`.

A feature knows three things: its Arrow storage type, how to validate and encode one
Python value into something `pyarrow.array` accepts, and how to decode stored values back
(one raw cell at a time for row access, or a whole Arrow array for batches).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

_FEATURE_TYPES: dict[str, type[FeatureType]] = {}


class FeatureType:
    """Base class of Value, ClassLabel, Sequence, ArrayND, Image and Features (structs)."""

    type_name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.type_name:
            _FEATURE_TYPES[cls.type_name] = cls

    # -- schema -------------------------------------------------------------------------
    def arrow_type(self) -> pa.DataType:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def fingerprint_identity(self) -> dict[str, Any]:
        """What a config holding this feature hashes (identity.fingerprint.to_jsonable asks for it)."""
        return self.to_dict()

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> FeatureType:
        kwargs = {k: v for k, v in data.items() if k != "_type"}
        return cls(**kwargs)

    # -- write side ---------------------------------------------------------------------
    def encode(self, value: Any, field: str) -> Any:
        """Validate `value` and return what pyarrow stores; raise EncodingError naming `field`."""
        raise NotImplementedError

    # -- read side ----------------------------------------------------------------------
    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        """Turn one stored cell (as pyarrow's `as_py` or a zero-copy view gives it) into output."""
        return raw

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        """Decode a whole single-chunk Arrow array; a list, or an ndarray in numpy mode."""
        return [self.decode(v, numpy=numpy, decode=decode) for v in array.to_pylist()]

    # -- equality follows the canonical form --------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeatureType) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "_type")
        return f"{type(self).__name__}({args})"


# Hugging Face's serialized names for our types; its `id` key (always null in practice) carries no meaning here.
_TYPE_ALIASES = {"List": "Sequence", "LargeList": "Sequence"}
_IGNORED_KEYS = ("id",)


def feature_from_dict(data: Any) -> FeatureType:
    """Rebuild any feature from its canonical dict (a plain mapping without `_type` is a struct).

    Hugging Face's serialized features (`datasets.Features.to_dict()`, a `dataset_info.json`)
    are read too: `List`/`LargeList`, the legacy `Sequence` of a dict (a struct of lists),
    and the `id` keys of older versions.
    """
    from stable_datasets.features.features import Features  # local: features.features imports this module

    if not isinstance(data, dict):
        raise ValueError(f"a feature description must be a dict, got {type(data).__name__}: {data!r}")
    type_name = data.get("_type")
    if type_name is None:
        return Features.from_dict(data)
    cls = _FEATURE_TYPES.get(type_name) or _FEATURE_TYPES.get(_TYPE_ALIASES.get(type_name, ""))
    if cls is None:
        known = ", ".join(sorted(_FEATURE_TYPES))
        raise ValueError(f"unknown feature type {type_name!r}; known types: {known}")
    return cls._from_dict({k: v for k, v in data.items() if k not in _IGNORED_KEYS})


def as_feature(obj: Any) -> FeatureType:
    """Accept a feature, or a nested dict of features (which becomes a struct)."""
    from stable_datasets.features.features import Features  # local: features.features imports this module

    if isinstance(obj, FeatureType):
        return obj
    if isinstance(obj, dict):
        return Features(obj)
    if isinstance(obj, list) and len(obj) == 1:
        from stable_datasets.features.sequence import Sequence  # local: sequence imports this module

        return Sequence(as_feature(obj[0]))
    raise TypeError(f"expected a feature type or a dict of features, got {type(obj).__name__}: {obj!r}")


def describe(value: Any) -> str:
    """A short type description for error messages."""
    if isinstance(value, np.ndarray):
        return f"ndarray(shape={value.shape}, dtype={value.dtype})"
    return type(value).__name__
