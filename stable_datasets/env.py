"""Every environment variable the library reads, read here and nowhere else.

`VARIABLES` is the one table of them (docs/settings.md shows it; a test keeps both in step with the
source). Each is checked the same way: a blank or unset variable means the default; anything else must
convert and pass its check, or the error names the variable, its value and what it must be.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from stable_datasets.errors import ConfigurationError

T = TypeVar("T", int, float)

#: name -> what it sets (and its default); docs/settings.md lists the same names
VARIABLES: dict[str, str] = {
    "STABLE_DATASETS_CACHE_DIR": "the cache root: a folder or an object-store URL (default ~/.cache/stable_datasets)",
    "STABLE_DATASETS_LOCAL_CACHE_DIR": "this node's folder for copies of remote caches and inputs "
                                       "(default ~/.cache/stable_datasets/object-store)",
    "STABLE_DATASETS_CACHE_LIMIT": "size bound of a local cache root, such as 200GB or 20% of its disk: least "
                                   "recently used caches not in use are evicted after a publish (default: none)",
    "STABLE_DATASETS_LOCAL_CACHE_LIMIT": "size bound of the local shard cache, such as 20GB (default 50GiB)",
    "STABLE_DATASETS_STORAGE_OPTIONS": "a JSON object of object-store options used when none are passed",
    "STABLE_DATASETS_STORAGE_RETRIES": "attempts per object-store request (default 4)",
    "STABLE_DATASETS_LEASE_SECONDS": "how long a remote build's lease lasts unless renewed (default 300)",
    "STABLE_DATASETS_REMOTE_LANCE": "'in_place' (default): random access reads a remote Lance cache on the store; "
                                    "'download': its files come into the local shard cache",
    "STABLE_DATASETS_LOCK_TIMEOUT": "seconds to wait for another builder's lock (default 3600; inf waits forever)",
    "STABLE_DATASETS_SOFT_LOCK": "1: lock files by their presence, for network filesystems without flock",
    "STABLE_DATASETS_DISABLE_PROGRESS": "1: no progress bars",
    "STABLE_DATASETS_DECODE_THREADS": "threads for batch frame decoding (default: the cores, at most 4)",
    "STABLE_DATASETS_LANCE_FORK_PROXY": "0: a process forked after Lance was used reads Lance directly, "
                                        "not through a helper process",
    "STABLE_DATASETS_LANCE_STORAGE_OPTIONS": "set by the library for its Lance helper process (not for users)",
    "STABLE_DATASETS_BUILDERS_PATH": "folders searched for builder scripts, before the bundled ones",
    "STABLE_DATASETS_URL_REWRITES": "a JSON object of URL prefix substitutions for downloads (mirrors)",
    "STABLE_DATASETS_LOGGING": "standard: the library's messages go to the standard logging module "
                               "(sds.use_standard_logging() does the same)",
    "LOGURU_LEVEL": "the level of loguru's stderr sink when standard logging takes the library's messages",
    "STABLE_DATASETS_MAX_JSON_DEPTH": "deepest nesting of a JSON value read (default 500)",
    "STABLE_DATASETS_MAX_DECOMPRESSED_BYTES": "largest decompressed copy of a compressed input (default 64 GiB)",
    "STABLE_DATASETS_MAX_DECOMPRESSION_RATIO": "largest expansion of a compressed input, checked past 64 MiB "
                                               "(default 1000)",
    "STABLE_DATASETS_MAX_IMAGE_PIXELS": "most pixels of one image decoded (default 178,956,970, as PIL)",
    "STABLE_DATASETS_MAX_OPEN_SHARDS": "Arrow shard (or Lance fragment) files one opened cache keeps memory-mapped, "
                                       "least recently used closed first (default 8192; the kernel allows a "
                                       "process 65,530 maps)",
    "STABLE_DATASETS_SHARD_LIST_FILE_ABOVE": "a cache of more shards than this lists them in `_shards.arrow`, "
                                             "memory-mapped, instead of in `_metadata.json` (default 10000)",
    "RANK": "this process's rank under torchrun, until torch.distributed is initialized",
    "WORLD_SIZE": "the number of ranks under torchrun, until torch.distributed is initialized",
    "RAY_ADDRESS": "the Ray cluster engine='ray' and to_ray() join when no ray_address is given",
}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_text(name: str) -> str | None:
    """The variable's value, stripped; None when unset or blank."""
    text = os.environ.get(name, "").strip()
    return text or None


def env_number(name: str, default: T, convert: Callable[[str], T], accept: Callable[[T], bool],
               requirement: str) -> T:
    text = env_text(name)
    if text is None:
        return default
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise ConfigurationError(f"{name}={text!r} {requirement}")
    return value


def env_flag(name: str, default: bool = False) -> bool:
    """1/true/yes/on or 0/false/no/off (any case); anything else is an error naming the variable."""
    text = env_text(name)
    if text is None:
        return default
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ConfigurationError(f"{name}={text!r} is not a switch: use 1 or 0 (or true/false)")


def env_choice(name: str, choices: Sequence[str], default: str) -> str:
    text = env_text(name)
    if text is None:
        return default
    if text not in choices:
        raise ConfigurationError(f"{name}={text!r} is not one of {list(choices)}")
    return text


def env_json_object(name: str, example: str = '{"key": "value"}') -> dict[str, Any]:
    """A JSON object, or {} when unset."""
    text = env_text(name)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"${name} is not valid JSON ({exc}); give an object such as '{example}'") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"${name} must be a JSON object, got {type(value).__name__}")
    return value


def default_environment(name: str, value: str) -> None:
    """Set a variable for this process and the ones it starts, unless the user set it (theirs is kept)."""
    os.environ.setdefault(name, value)


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment with `extra` set: for a helper subprocess (values, not argv, carry secrets)."""
    return {**os.environ, **extra}


S = TypeVar("S")


def env_setting(name: str, parse: Callable[[str], S], requirement: str) -> S | None:
    """A setting that is not a plain number (a size such as `200GB`): None when blank or unset; a value
    `parse` refuses (ValueError) is an error naming the variable, its value and what it must be."""
    text = env_text(name)
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise ConfigurationError(f"{name}={text!r} {requirement} ({exc})") from None


# -- bounds on what one input may make us allocate (docs/load-your-own-files.md, "Limits") ---------------
#: deepest nesting of a JSON value read (pyarrow's parser overflows its stack past ~20,000, Python's near 1,000)
MAX_JSON_DEPTH = 500
#: largest decompressed copy of a compressed input (`.gz`, `.zst`, ...): a 33 KB file may expand to terabytes
MAX_DECOMPRESSED_BYTES = 64 << 30
#: largest expansion of a compressed input (decompressed / compressed bytes), checked past 64 MiB decompressed
MAX_DECOMPRESSION_RATIO = 1000
#: most pixels of one image cell decoded (width x height): a PNG header may claim 20000 x 20000; PIL refuses the same
MAX_IMAGE_PIXELS = 178_956_970
#: Arrow shard or Lance fragment files one opened cache keeps mapped (layouts.mapped_files): each costs one of the
#: kernel's vm.max_map_count (65,530 by default) memory maps, which malloc and the loaders need too. Past it, random
#: reads map a file again (~100 us), so it is as high as leaves room for several such caches in one process.
MAX_OPEN_SHARDS = 8192
#: past this many shards a cache's shard list is an Arrow file beside `_metadata.json` (cache.shard_list): 48 bytes
#: a shard, mapped and shared by a node's processes, instead of ~190 bytes of JSON parsed into each process
SHARD_LIST_FILE_ABOVE = 10_000


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


def max_open_shards() -> int:
    return env_number("STABLE_DATASETS_MAX_OPEN_SHARDS", MAX_OPEN_SHARDS, int, lambda n: 1 <= n <= 1_000_000,
                      "must be a whole number of shard files from 1 to 1000000")


def shard_list_file_above() -> int:
    return env_number("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", SHARD_LIST_FILE_ABOVE, int, lambda n: n >= 0,
                      "must be a whole number of shards >= 0")
