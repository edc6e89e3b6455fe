"""What a command's target names: a cache's folder or URL, a folder of caches, or the caches of a builder (by
its recorded source, not its name alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stable_datasets.cache.inventory import CacheEntry
from stable_datasets.cli.common import UsageError
from stable_datasets.errors import BuilderNotFoundError
from stable_datasets.manage.inventory import dataset_name
from stable_datasets.manage.ownership import same_builder
from stable_datasets.registry import resolve_builder_class
from stable_datasets.roots import CacheRoot, locate, root_for


def entries_named(target: str, root: CacheRoot) -> list[Any]:
    """The caches a command names: a cache's folder or URL, a folder of caches, or every cache of a builder under
    the root (by its recorded source: a name, a script path or a folder holding one)."""
    found = locate(target, root)
    if found is not None:
        return [root_for(address, root).entry(address) for address in found]
    return caches_of_builder(target, root.entries())


def caches_named(name: str, entries: list[Any]) -> list[Any]:
    """`ls NAME`: the caches of a builder or loader (as `build` names it), or of a dataset name as `ls` shows it."""
    named = [e for e in entries if name in (e.metadata.builder_name, dataset_name(e.metadata))]
    if named and not is_script_target(name):
        return named
    return caches_of_builder(name, entries)


def is_script_target(target: str) -> bool:
    path = Path(target).expanduser()
    return path.suffix == ".py" or path.is_dir()


def builder_class(target: str) -> type | None:
    """The builder a target names as `build` resolves it; None for a name no builder has any more."""
    try:
        return resolve_builder_class(target)
    except BuilderNotFoundError as exc:
        if is_script_target(target):
            raise UsageError(str(exc)) from None
        return None


def builder_name(target: str) -> str:
    cls = builder_class(target)
    return cls.builder_name() if cls is not None else target


def caches_of_builder(target: str, entries: list[CacheEntry]) -> list[CacheEntry]:
    """The caches of the builder `target` names: by the builder's recorded source, not by its name alone
    (two scripts may both define `shapes`). A name no builder answers to any more matches the caches of
    that name if they come from one source; from several it is a usage error naming them."""
    cls = builder_class(target)
    if cls is not None:
        return [e for e in entries if same_builder(e, cls)]
    named = [e for e in entries if e.metadata.builder_name == target]
    sources = sorted({e.metadata.builder_source for e in named})
    if len(sources) > 1:
        raise UsageError(f"caches of several builders are named {target!r} (from {', '.join(map(repr, sources))}); "
                         "name the builder's script path, or a cache folder")
    return named
