"""What every layout module provides: a Writer (record batches -> shards) and a Backend
(shards -> rows). Shared pieces live here so a new format is one new module."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import table_rows
from stable_datasets.cache.builds import BuildPin
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.features.features import Features
from stable_datasets.layouts.lance_access import open_lance


def require_positive_ints(options: dict[str, Any], *names: str) -> None:
    """Reject bad layout option values when the options are resolved, before anything is built."""
    for name in names:
        value = options[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"layout option {name} must be a positive int, got {value!r}")


def require_choice(options: dict[str, Any], name: str, choices: tuple[Any, ...]) -> None:
    if options[name] not in choices:
        raise ValueError(f"layout option {name} must be one of {list(choices)}, got {options[name]!r}")


class LayoutWriter(ABC):
    """Streams record batches into files under a staging directory."""

    #: True when the writer can journal finished shards and continue after them (see cache.journal).
    supports_resume = False

    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        self.directory = Path(directory)
        self.schema = schema
        self.options = options

    @abstractmethod
    def write(self, batch: pa.RecordBatch) -> None: ...

    @abstractmethod
    def close(self) -> list[ShardInfo]:
        """Finish every file and return their descriptions (sizes, checksums, rows)."""

    @abstractmethod
    def abort(self) -> None:
        """Release files and threads after a failed build (the staging dir is removed after)."""

    def extra_metadata(self) -> dict[str, Any]:
        return {}


_fork_generation = 0  # bumped in every forked child: handles opened before a fork are stale


def _after_fork() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class LayoutBackend(ABC):
    """Serves rows of one published cache. Handles are opened lazily, once per process."""

    #: True when a batch of rows is best read as one table (one `take`) and decoded column-wise.
    batched_reads = False
    #: read-time options the layout accepts, with their defaults; `read_options_name` names them in errors.
    READ_OPTIONS: dict[str, Any] = {}
    read_options_name = "read"
    #: (URI, storage options) of the cache folder on an object store, where Lance data is read in place
    lance_base: tuple[str, dict[str, str]] | None = None
    #: {"url", "storage_options"} of the remote split this cache's local copy mirrors (storage.remote_cache)
    origin: dict[str, Any] | None = None

    def __init__(self, directory: str | os.PathLike, metadata: CacheMetadata, **options: Any):
        unknown = sorted(set(options) - set(self.READ_OPTIONS))
        if unknown:
            raise ValueError(f"unknown {self.read_options_name} option(s) {unknown}; "
                             f"options are {sorted(self.READ_OPTIONS)}")
        self.directory = Path(directory)
        self.metadata = metadata
        self.options = {**self.READ_OPTIONS, **options}  # read-time options (never part of a fingerprint)
        self._generation = -1  # the fork generation the handles were opened in; -1: not opened
        self._pin = BuildPin.hold(self.directory)  # the build stays on disk while we may read it (cache.builds)

    def rows_in_place(self) -> bool:
        """True when any rows are read where they lie (a mapped file): a stream then gathers its rows
        directly instead of holding the blocks of a window."""
        return False

    def release_pin(self) -> None:
        """Stop holding this build on disk (a remote stream's shard: its open map keeps serving it)."""
        if self._pin is not None:
            self._pin.release()
            self._pin = None

    @classmethod
    def metadata_problem(cls, metadata: CacheMetadata) -> str | None:
        """What in a `_metadata.json` of this layout contradicts itself, else None (checked on every read).

        By default `num_rows` must equal the rows the shard entries record.
        """
        recorded = sum(s.num_rows for s in metadata.shards)
        if recorded != metadata.num_rows:
            return f"num_rows is {metadata.num_rows} but the shards record {recorded} rows"
        return None

    def check_rows(self, path: Path, found: int, recorded: int, unit: str = "rows") -> None:
        """Refuse stored data holding another number of rows than `_metadata.json` records for it."""
        if found != recorded:
            raise CacheError(f"{path}: holds {found} {unit} but {METADATA_FILE} records {recorded}; the cache is "
                             "corrupt (rebuild it with download_mode='force_rebuild')")

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "metadata": self.metadata.to_dict(), "options": self.options,
                "lance_base": self.lance_base, "origin": self.origin}

    def __setstate__(self, state: dict[str, Any]) -> None:
        metadata = CacheMetadata.from_dict(state["metadata"])
        directory, origin = state["directory"], state.get("origin")
        if origin and not (Path(directory) / METADATA_FILE).is_file():
            # unpickled on another machine (a Ray task, a remote worker): its own shard cache, filled from the store
            from stable_datasets.storage.remote_cache import localize

            directory = str(localize(origin, metadata, lance_in_place=bool(state.get("lance_base"))))
        self.__init__(directory, metadata, **state.get("options", {}))  # type: ignore[misc]
        if state.get("lance_base"):
            self.read_lance_from(*state["lance_base"])
        if origin:
            self.mirror_of(origin["url"], origin.get("storage_options"))

    def mirror_of(self, url: str, storage_options: dict[str, Any] | None) -> None:
        """This cache's folder is the local copy of the remote split at `url`: a copy of the backend unpickled
        where that folder is missing fetches the files into that machine's own shard cache."""
        self.origin = {"url": url, "storage_options": storage_options}

    def read_lance_from(self, uri: str, storage_options: dict[str, str]) -> None:
        """Read this cache's Lance data in place on an object store (see storage.remote_cache)."""
        self.lance_base = (uri.rstrip("/"), dict(storage_options))

    def lance_dataset(self, relative: str) -> Any:
        """The Lance dataset at `relative` inside the cache: on disk, or on its object store."""
        if self.lance_base is None:
            return open_lance(str(self.directory / relative))
        uri, storage_options = self.lance_base
        return open_lance(f"{uri}/{relative}", storage_options)

    def dataset_features(self, stored: Features) -> Features:
        """The features of the rows this backend serves (a layout may serve other rows than it stores)."""
        return stored

    def ensure_open(self) -> None:
        """Open handles on first use, and again in a new process (a fork, or an unpickled copy)."""
        if self._generation != _fork_generation:
            self._open()
            self._generation = _fork_generation

    @abstractmethod
    def _open(self) -> None: ...

    @property
    def num_rows(self) -> int:
        return self.metadata.num_rows

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows served; `_open` sets `_schema`."""
        self.ensure_open()
        return self._schema

    @abstractmethod
    def row(self, index: int) -> dict[str, Any]:
        """Raw cells of one row (see arrow.cells), for the single-row hot path."""

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        """Raw cells of many rows (a layout may do this in one batched read)."""
        return [self.row(i) for i in indices]

    @abstractmethod
    def take(self, indices: np.ndarray) -> pa.Table:
        """Rows at `indices`, in that order, as a table whose columns are single-chunk."""

    @abstractmethod
    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        """Stream rows [start, stop) in record batches of at most `batch_rows`."""

    def block_bounds(self) -> np.ndarray:
        """Row offsets where the stored blocks begin, then `num_rows`: rows in one block are read
        together (a record batch, a row group, a slice of a fragment). By default one block."""
        return np.asarray([0, self.num_rows] if self.num_rows else [0], dtype=np.int64)

    @abstractmethod
    def stored_row_counts(self) -> tuple[int, int]:
        """(rows the stored files hold, whatever `_metadata.json` says; rows it records), for verify."""

    def slice(self, start: int, stop: int) -> pa.Table:
        batches = list(self.iter_batches(start, stop, max(stop - start, 1)))
        return pa.Table.from_batches(batches, schema=self.schema)


class TableBackend(LayoutBackend):
    """A layout whose rows, single or many, come from one batched `take` (Lance: a random row
    costs a Rust call whatever the batch size, so a row is a batch of one)."""

    batched_reads = True

    def row(self, index: int) -> dict[str, Any]:
        return self.rows([index])[0]

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        return table_rows(self.take(np.asarray(indices, dtype=np.int64)))
