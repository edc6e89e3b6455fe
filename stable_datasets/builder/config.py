"""`Version` and `BuilderConfig`: the knobs of a builder, every field part of the fingerprint."""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import Any


@functools.total_ordering
class Version:
    """A MAJOR.MINOR.PATCH version; compares numerically and prints as text."""

    def __init__(self, version: str | Version, description: str = ""):
        text = str(version)
        parts = text.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"version must look like '1.2.3', got {text!r}")
        self.major, self.minor, self.patch = (int(p) for p in parts)
        self.description = description

    @property
    def tuple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def __repr__(self) -> str:
        return f"Version('{self}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Version(other)
        return isinstance(other, Version) and self.tuple == other.tuple

    def __lt__(self, other: Version | str) -> bool:
        return self.tuple < Version(other).tuple

    def __hash__(self) -> int:
        return hash(self.tuple)

    def fingerprint_identity(self) -> str:
        return str(self)


@dataclass
class BuilderConfig:
    """Base config. Subclass it as a dataclass to add fields; each field changes the fingerprint."""

    name: str = "default"
    version: Version | str | None = None
    description: str = ""
    data_dir: str | None = None
    data_files: Any = None
    #: How local data files enter the fingerprint: "stat" (size + mtime) or "sha256" (size + content).
    input_identity: str = "stat"

    def __post_init__(self) -> None:
        # "~/data/*.csv" names the user's files, as the shell reads it (a Python string is not expanded)
        self.data_dir = _expand_user(self.data_dir)
        self.data_files = _expand_user(self.data_files)

    def replace(self, **changes: Any) -> BuilderConfig:
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise ValueError(f"{type(self).__name__} has no field(s) {unknown}; fields are {sorted(fields)}")
        for name, value in changes.items():
            expected = _SIMPLE_TYPES.get(str(fields[name].type).replace("typing.", ""))
            if expected is not None and (not isinstance(value, expected) or
                                         (isinstance(value, bool) and bool not in expected)):
                wanted = getattr(fields[name].type, "__name__", fields[name].type)
                raise ValueError(f"{type(self).__name__}.{name} expects {wanted}, "
                                 f"got {type(value).__name__} {value!r}")
        return dataclasses.replace(self, **changes)


def _expand_user(value: Any) -> Any:
    """`value` with a leading `~` of each local path expanded; everything else as it was."""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        return os.path.expanduser(text) if isinstance(text, str) and text.startswith("~") else value
    if isinstance(value, (list, tuple)):
        return type(value)(_expand_user(v) for v in value)
    if isinstance(value, dict):
        return {k: _expand_user(v) for k, v in value.items()}
    return value


# Annotations checked on override (others, e.g. unions or containers, are passed through).
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
    "<class 'int'>": (int,), "<class 'float'>": (int, float), "<class 'str'>": (str,), "<class 'bool'>": (bool,),
}
