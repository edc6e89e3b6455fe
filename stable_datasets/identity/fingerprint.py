"""Canonical JSON and the fingerprint that keys every cache directory.

Everything that shapes the stored bytes goes into the fingerprint inputs; if any of them
changes, the cache lands in a new directory and nothing stale is ever served.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from pathlib import PurePath
from typing import Any

import numpy as np

# Bump when the on-disk format of any layout changes incompatibly.
CACHE_FORMAT_VERSION = 2  # 2: per-build folders behind a link; split and config folders encoded one-to-one
FINGERPRINT_LENGTH = 16


def to_jsonable(obj: Any, where: str = "value") -> Any:
    """Convert config values to plain JSON types; fail loudly on anything ambiguous."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return repr(obj)
        return obj
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return to_jsonable(obj.item(), where)
    if isinstance(obj, np.ndarray):
        return {"_ndarray": obj.dtype.str, "shape": list(obj.shape),
                "sha256": hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()}
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value, where)
    if isinstance(obj, (bytes, bytearray)):
        return {"_bytes_sha256": hashlib.sha256(obj).hexdigest()}
    if hasattr(obj, "fingerprint_identity") and not isinstance(obj, type):  # objects that describe themselves
        return to_jsonable(obj.fingerprint_identity(), where)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name), f"{where}.{f.name}") for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        return sorted((to_jsonable(v, where) for v in obj), key=repr)
    raise TypeError(f"{where}: cannot fingerprint a value of type {type(obj).__name__} ({obj!r:.80}); "
                    "use JSON-like values (str, int, float, bool, list, dict, Path) in configs")


def canonical_json(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hash_text(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def fingerprint(inputs: dict[str, Any]) -> str:
    """Short hex digest of the canonical JSON of `inputs`."""
    return hash_text(canonical_json(inputs))[:FINGERPRINT_LENGTH]
