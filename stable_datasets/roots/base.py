"""`CacheRoot`: what callers do with a cache root, whatever holds it (a local folder, an object store).

A root is where caches are published under `<name>/<config>/<version>/<fingerprint>/<split>`. The
builder, the command line, `load_dataset` and `open_cache` hold one and call these methods; which kind
it is (roots.local: a folder, fsync and one rename, file locks; roots.remote: an object store, the
commit protocol without rename of storage.publish, leases) is known here and in `storage/` only.

Addresses: a published split is a `Path` on a local root and a URL (`str`) on an object-store root;
`local_dir` is this node's folder for the root (the root itself, or where builds for an object-store
root stage their work and keep their downloads), and builders compute folders under it, which
`address` turns into the published address.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.errors import ConfigurationError
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.write import ExampleSource, JobRunner, WritePlan

#: what `publish` calls when the split must be built: the plan and source of a build into the folder given
WriteFor = Callable[[Path], tuple[WritePlan, ExampleSource]]
#: where a cache is published: a folder, or an object-store URL
Address = Path | str


class CacheRoot(ABC):
    """One cache root: lock, is-published, publish, open, entries, remove, verify, evict (see the module)."""

    #: this node's folder for the root (see the module docstring)
    local_dir: Path
    #: how the root's caches are opened (an object store's endpoint and credentials); None for a local root
    storage_options: dict[str, Any] | None = None
    #: whether readers of its caches on any node are visible here (local pins are flocks on the shared
    #: filesystem; readers of an object store pin their copies on their own nodes): `prune` keeps caches in use
    sees_readers: bool = True

    # -- where -----------------------------------------------------------------------------------
    @abstractmethod
    def address(self, directory: Path) -> Address:
        """The published address of `directory`, a folder under `local_dir`."""

    def input_options(self, storage_options: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
        """Storage options of object-store inputs (data files, downloads) by scheme, from the `storage_options`
        given with the root: on a local root they serve every scheme ("*", download.inputs.options_for)."""
        return {"*": dict(storage_options)} if storage_options else None

    @abstractmethod
    def builder_folder(self, builder_folder: str) -> str:
        """The address prefix of every cache of the builder whose folder name is `builder_folder` (text)."""

    # -- building ----------------------------------------------------------------------------------
    @abstractmethod
    def is_published(self, directory: Path, fingerprint: str) -> bool:
        """A valid cache of `fingerprint` is published for `directory`."""

    @abstractmethod
    def lock(self, directory: Path, *, timeout: float | None = None, soft: bool | None = None
             ) -> contextlib.AbstractContextManager[Any]:
        """Held while one builder builds `directory` (a file lock beside it, or a lease on the store)."""

    @abstractmethod
    def publish(self, directory: Path, fingerprint: str, write_for: WriteFor, runner: JobRunner, *, force: bool,
                lock_timeout: float | None = None, soft_lock: bool | None = None) -> Address:
        """Make sure `directory` holds a published cache of `fingerprint` (built by `write_for`'s plan and
        source when it does not, or when `force`); its address. Builders of one split build it once."""

    def read_note(self, path: Path) -> str | None:
        """A small file a builder keeps under `local_dir` (the split names of a fingerprint), from this node
        or, for an object-store root, from the store (so other nodes learn it without the builder's inputs)."""
        return path.read_text() if path.is_file() else None

    def write_note(self, path: Path, text: str) -> None:
        """Share a note a builder wrote at `path` where `read_note` of other nodes finds it (nothing to do on a
        local root: every node reads the same folder)."""
        return None

    # -- reading -----------------------------------------------------------------------------------
    @abstractmethod
    def open(self, address: Address, read_options: dict[str, Any] | None = None
             ) -> tuple[LayoutBackend, CacheMetadata]:
        """The backend of the published cache at `address`, and its checked metadata."""

    def open_stream(self, address: Address, rows: Any = None) -> tuple[LayoutBackend, CacheMetadata] | None:
        """A backend read a shard at a time as a stream reaches it, or None when the cache is best opened
        whole (`open`). `rows(num_rows)`: (start, stop) of a partial split."""
        return None

    # -- what is there -----------------------------------------------------------------------------
    @abstractmethod
    def entries(self, unreadable: list[tuple[Any, str]] | None = None) -> list[Any]:
        """Every published cache (entries with `location`, `metadata`, `size`, `age_seconds`), sorted; those
        whose metadata cannot be read go to `unreadable` as (address, problem) when it is given."""

    def note_listed(self, entries: list[Any]) -> None:
        """`entries` were just listed whole: a local root's index (cache.index) is written anew from them."""
        return None

    @abstractmethod
    def remove(self, entries: list[Any], *, dry_run: bool = False) -> list[Address]:
        """Unpublish `entries` (and what derives from them: their map caches); the addresses removed."""

    @abstractmethod
    def verify(self, address: Address) -> list[str]:
        """Recompute every checksum and size of the cache at `address` and count its rows: the problems."""

    @abstractmethod
    def entry(self, address: Address) -> Any:
        """The entry of the one cache at `address` (CacheError when none is readable there)."""

    @abstractmethod
    def prune(self, planned: list[tuple[str, Any]], *, dry_run: bool, max_age_seconds: float,
              also: list[tuple[str, Path]] = (), entries: list[Any] = ()
              ) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        """Remove the caches `planned` as (why, entry) (of `entries`, all the root holds), with the work builds
        left behind that nobody can need (staging, superseded builds, attempts older than `max_age_seconds` or
        whose builder is gone) and this node's files `also`: (removed as (why, address), kept as (why, address))."""

    @abstractmethod
    def evict(self) -> list[Path]:
        """Bring this node's copies within their limit: a local root's least recently used caches past
        $STABLE_DATASETS_CACHE_LIMIT, or an object-store root's local shard cache; the folders removed."""

    def local_path(self, what: str) -> Path:
        """The root as a local folder, for commands that serve one (`what`); an error for an object store."""
        raise ConfigurationError(f"{what} serves a local cache root; an object-store root is not supported yet")
