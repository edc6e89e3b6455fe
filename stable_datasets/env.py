"""Numbers read from `STABLE_DATASETS_*` environment variables, all checked the same way: a
blank or unset variable means the default, anything else must convert and pass its check, or
the error names the variable, its value and what it must be."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from stable_datasets.errors import ConfigurationError

T = TypeVar("T", int, float)


def env_number(name: str, default: T, convert: Callable[[str], T], accept: Callable[[T], bool],
               requirement: str) -> T:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise ConfigurationError(f"{name}={text!r} {requirement}")
    return value
