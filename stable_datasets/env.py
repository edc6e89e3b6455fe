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


# -- bounds on what one input may make us allocate (docs/load-your-own-files.md, "Limits") ---------------
#: deepest nesting of a JSON value read (pyarrow's parser overflows its stack past ~20,000, Python's near 1,000)
MAX_JSON_DEPTH = 500
#: largest decompressed copy of a compressed input (`.gz`, `.zst`, ...): a 33 KB file may expand to terabytes
MAX_DECOMPRESSED_BYTES = 64 << 30
#: largest expansion of a compressed input (decompressed / compressed bytes), checked past 64 MiB decompressed
MAX_DECOMPRESSION_RATIO = 1000
#: most pixels of one image cell decoded (width x height): a PNG header may claim 20000 x 20000; PIL refuses the same
MAX_IMAGE_PIXELS = 178_956_970


def max_json_depth() -> int:
    return env_number("STABLE_DATASETS_MAX_JSON_DEPTH", MAX_JSON_DEPTH, int, lambda n: 1 <= n <= 100_000,
                      "must be a whole number of levels from 1 to 100000")


def max_decompressed_bytes() -> int:
    return env_number("STABLE_DATASETS_MAX_DECOMPRESSED_BYTES", MAX_DECOMPRESSED_BYTES, int, lambda n: n >= 1,
                      "must be a whole number of bytes >= 1")


def max_image_pixels() -> int:
    return env_number("STABLE_DATASETS_MAX_IMAGE_PIXELS", MAX_IMAGE_PIXELS, int, lambda n: n >= 1,
                      "must be a whole number of pixels >= 1")


def max_decompression_ratio() -> int:
    return env_number("STABLE_DATASETS_MAX_DECOMPRESSION_RATIO", MAX_DECOMPRESSION_RATIO, int, lambda n: n >= 1,
                      "must be a whole number >= 1")
