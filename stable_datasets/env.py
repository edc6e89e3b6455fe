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


S = TypeVar("S")


def env_setting(name: str, parse: Callable[[str], S], requirement: str) -> S | None:
    """A setting that is not a plain number (a size such as `200GB`): None when blank or unset; a value
    `parse` refuses (ValueError) is an error naming the variable, its value and what it must be."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise ConfigurationError(f"{name}={text!r} {requirement} ({exc})") from None
