"""Which builder a cache belongs to, and whether it is that builder's current cache.

A builder's name is not its identity: two scripts may both define `shapes`. Each cache
records its builder's source (`builder_source` in `_metadata.json`: the script's resolved
path, or `module:qualname`), and every decision that deletes (`prune`, `rm`) goes by that
source, never by the name alone. Caches written before the source was recorded fall back to
the name, as they always did. A cache whose builder cannot be loaded any more is "unknown",
which nothing deletes.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

from stable_datasets.cache.folders import (  # noqa: F401  (map_caches_of, remove_empty_parents: named here before)
    is_map_cache,
    map_caches_of,
    remove_empty_parents,
)
from stable_datasets.cache.inventory import CacheEntry
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.features.base import feature_from_dict
from stable_datasets.identity.fingerprint import canonical_json, to_jsonable
from stable_datasets.registry import load_script, resolve_builder_class


def builder_class(source: str, name: str) -> type | None:
    """The builder class a recorded source names; with no source, the builder registered as `name`.

    None when it cannot be loaded (the script was deleted or moved, the module is gone).
    """

    try:
        if not source:
            return resolve_builder_class(name) if name else None
        if source.endswith(".py") and Path(source).is_absolute():
            return load_script(source) if Path(source).is_file() else None
        module_name, _, qualname = source.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj if isinstance(obj, type) else None
    except Exception:  # a script that no longer imports is no builder we can ask
        return None


def same_builder(entry: CacheEntry, cls: type) -> bool:
    """Whether `entry` was written by `cls` (by recorded source; by name for caches that record none)."""
    meta = entry.metadata
    if meta.builder_source:
        return meta.builder_source == cls.builder_source()
    return meta.builder_name == cls.builder_name()


def cache_status(entry: CacheEntry, memo: dict[Any, Any] | None = None) -> str:
    """"current" if its builder today would produce this fingerprint, "stale" if not, else "unknown"."""
    if is_map_cache(Path(str(entry.directory))) or not entry.metadata.fingerprint_inputs.get("builder"):
        return "unknown"
    current = builder_fingerprint_now(entry.metadata, memo)
    if current is None:
        return "unknown"
    return "current" if current == entry.metadata.fingerprint else "stale"


def builder_fingerprint_now(meta: CacheMetadata, memo: dict[Any, Any] | None = None) -> str | None:
    """The fingerprint the cache's builder gives today for the cache's config (its recorded absolute
    data-file paths when there are), or None when the builder cannot be loaded or asked. `memo` keeps
    builder classes and answers across calls, so a root of many caches imports each builder once."""

    memo = {} if memo is None else memo
    inputs = meta.fingerprint_inputs
    name = inputs.get("builder")
    if not name:
        return None
    spec = meta.made_by.get("spec") if isinstance(meta.made_by.get("spec"), dict) else {}
    config = spec.get("config") or inputs.get("config", {})
    storage_format = inputs.get("storage_format", "arrow")
    layout_options = dict(inputs.get("layout_options", {}))
    key = ("fingerprint", meta.builder_source, name, meta.config_name,
           canonical_json({"config": config, "format": storage_format, "options": layout_options}))
    if key in memo:
        return memo[key]
    class_key = ("class", meta.builder_source, name)
    if class_key not in memo:
        memo[class_key] = builder_class(meta.builder_source, name)
    cls = memo[class_key]
    answer = None
    if cls is not None and cls.builder_name() == name:
        try:
            try:
                builder = cls.create(meta.config_name or None)
                defaults = to_jsonable(builder.config)
            except Exception:  # a loader cannot be made without its data_files: its config class's defaults
                builder, defaults = None, _config_defaults(cls)
            overrides = {k: v for k, v in config.items() if k not in defaults or defaults[k] != v}
            if isinstance(overrides.get("features"), dict):  # recorded as the fingerprint records a Features
                overrides["features"] = feature_from_dict(overrides["features"])
            if overrides or builder is None:
                builder = cls.create(meta.config_name or None, **overrides)
            answer = builder.fingerprint(storage_format, layout_options)
        except Exception:
            answer = None
    memo[key] = answer
    return answer


def _config_defaults(cls: type) -> dict[str, Any]:
    """The default of every field of `cls`'s config class, as the fingerprint records fields (JSON values)."""
    config_class = getattr(cls, "BUILDER_CONFIG_CLASS", None)
    if config_class is None or not dataclasses.is_dataclass(config_class):
        return {}
    defaults: dict[str, Any] = {}
    for item in dataclasses.fields(config_class):
        if item.default is not dataclasses.MISSING:
            defaults[item.name] = to_jsonable(item.default)
        elif item.default_factory is not dataclasses.MISSING:
            defaults[item.name] = to_jsonable(item.default_factory())
    return defaults
