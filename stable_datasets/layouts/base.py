"""What every layout module provides: a Writer (record batches -> shards) and a Backend
(shards -> rows). Shared pieces live here so a new format is one new module."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import table_rows
from stable_datasets.cache.builds import BuildPin
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.features.features import Features
from stable_datasets.layouts import metadata_problem


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


@dataclass(frozen=True)
class StreamUnits:
    """How a stream of a remote cache downloads it: `units` one at a time in row order, each with the
    `shared` files beside it, cut into blocks of `block_rows` rows (see storage.remote_stream)."""

    units: Sequence[ShardInfo]  # a cache's ShardList itself when every shard is a unit
    shared: list[ShardInfo]
    block_rows: int


class LayoutBackend(ABC):
    """Serves rows of one published cache. Handles are opened lazily, once per process.

    The contract every backend keeps (layouts.contract.Backend states it as a Protocol): reads
    (`row`, `rows`, `take`, `iter_batches`, `slice`), what it is (`num_rows`, `schema`, `directory`,
    `metadata`), and abilities with defaults here, which a layout overrides where it can do more
    (`shard_bounds`, `open_before_fork`, `parquet_row_groups`, `ray_dataset`, `stream_units`,
    `in_place_files`). Callers ask the backend; they never probe it with `getattr` or compare layout names.
    """

    #: True when a batch of rows is best read as one table (one `take`) and decoded column-wise.
    batched_reads = False
    #: read-time options the layout accepts, with their defaults; `read_options_name` names them in errors.
    READ_OPTIONS: dict[str, Any] = {}
    read_options_name = "read"
    #: where this cache's folder was copied from, for a cache on an object store (storage.remote_cache's
    #: RemoteOrigin, kept opaque here): `origin.localize(metadata)` fetches the files into this machine's
    #: shard cache and returns the folder. None for a local cache.
    origin: Any = None

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
        recorded = int(metadata.shard_rows().sum())
        if recorded != metadata.num_rows:
            return f"num_rows is {metadata.num_rows} but the shards record {recorded} rows"
        return None

    def check_rows(self, path: Path, found: int, recorded: int, unit: str = "rows") -> None:
        """Refuse stored data holding another number of rows than `_metadata.json` records for it."""
        if found != recorded:
            raise CacheError(f"{path}: holds {found} {unit} but {METADATA_FILE} records {recorded}; the cache is "
                             "corrupt (rebuild it with download_mode='force_rebuild')")

    def __getstate__(self) -> dict[str, Any]:
        # a cache of many shards pickles the name of its `_shards.arrow`, not the list (cache.shard_list)
        return {"directory": str(self.directory), "metadata": self.metadata.to_dict(), "options": self.options,
                "origin": self.origin}

    def __setstate__(self, state: dict[str, Any]) -> None:
        metadata = CacheMetadata.from_dict(state["metadata"])
        directory, origin = state["directory"], state.get("origin")
        if origin is not None and not (Path(directory) / METADATA_FILE).is_file():
            # unpickled on another machine (a Ray task, a remote worker): its own shard cache, filled from the store
            directory = str(origin.localize(metadata))
        else:
            metadata.attach_shard_list(Path(directory), metadata_problem)
        self.__init__(directory, metadata, **state.get("options", {}))  # type: ignore[misc]
        self.origin = origin

    def mirror_of(self, origin: Any) -> None:
        """This cache's folder is the local copy of a remote cache (`origin`, see the attribute): a copy of the
        backend unpickled where that folder is missing fetches the files into that machine's own shard cache."""
        self.origin = origin

    # -- abilities: defaults for a layout that cannot do more ------------------------------------
    @classmethod
    def in_place_files(cls, metadata: CacheMetadata) -> list[ShardInfo]:
        """Files of a cache on an object store that are read where they lie, not downloaded (Lance data)."""
        return []

    def read_in_place(self, uri: str, storage_options: dict[str, str]) -> None:
        """Read `in_place_files` at `uri` (the cache folder on its store) instead of on disk."""
        raise CacheError(f"{self.directory}: the {self.metadata.layout} layout reads no files in place")

    @classmethod
    def stream_units(cls, metadata: CacheMetadata) -> StreamUnits | None:
        """How a stream downloads a remote cache of this layout a file at a time; None: it cannot (the cache
        is then opened whole)."""
        return None

    def serve_unit(self, unit: ShardInfo) -> None:
        """Serve only the rows of `unit` (one of `stream_units`), the one file a stream downloaded; by default
        the metadata the backend was opened with already names only that file."""
        return None

    def shard_bounds(self) -> np.ndarray | None:
        """Row offsets where the stored files begin, then `num_rows` (the groups of a stream's shard window);
        None when the files do not cut the rows into runs."""
        return None

    def open_before_fork(self) -> None:
        """Open now what forked DataLoader workers can share; by default nothing (each opens its own)."""
        return None

    def parquet_row_groups(self) -> Any | None:
        """The Parquet row groups behind the rows (layouts.parquet_shards.ParquetRowGroups), or None."""
        return None

    def ray_dataset(self, ray: Any, override_num_blocks: int | None) -> Any | None:
        """A Ray Data dataset of every row, read by Ray's own reader for this format; None: none fits."""
        return None

    def stored_column_order(self) -> list[str] | None:
        """The declared column order as the stored files keep it (older `_metadata.json` files sorted their
        features); None when the files store other columns than the features name."""
        return list(self.schema.names)

    def view_identity(self) -> Any | None:
        """What a view backend changes about the rows it serves (part of a dataset's fingerprint); None."""
        return None

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
