"""The one internal contract of a layout, stated as Protocols: what a layout module provides, and what
every backend (the layouts' own, and views and remote readers built on them) answers.

`layouts.base.LayoutBackend` implements `Backend` with the defaults a layout overrides where it can do
more; a new format is a module that satisfies `LayoutModule` (tests/layouts/test_contract.py checks every
registered layout). Callers ask abilities through these methods, never with `getattr` probes, and never
compare layout names: outside `layouts/` no code names a layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.features.features import Features

if TYPE_CHECKING:
    from stable_datasets.layouts.base import LayoutWriter, StreamUnits
    from stable_datasets.layouts.part_files import PartFiles
    from stable_datasets.write.parts import PartResult


@runtime_checkable
class Backend(Protocol):
    """Serves the rows of one published cache (or a view of one)."""

    directory: Path
    metadata: CacheMetadata
    batched_reads: bool

    @property
    def num_rows(self) -> int: ...
    @property
    def schema(self) -> pa.Schema: ...

    # reads
    def row(self, index: int) -> dict[str, Any]: ...
    def rows(self, indices: list[int]) -> list[dict[str, Any]]: ...
    def take(self, indices: np.ndarray) -> pa.Table: ...
    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]: ...
    def slice(self, start: int, stop: int) -> pa.Table: ...
    def block_bounds(self) -> np.ndarray: ...
    def stored_row_counts(self) -> tuple[int, int]: ...
    def dataset_features(self, stored: Features) -> Features: ...
    def ensure_open(self) -> None: ...
    def release_pin(self) -> None: ...

    # abilities (defaults in layouts.base.LayoutBackend)
    def rows_in_place(self) -> bool: ...
    def shard_bounds(self) -> np.ndarray | None: ...
    def open_before_fork(self) -> None: ...
    def parquet_row_groups(self) -> Any | None: ...
    def ray_dataset(self, ray: Any, override_num_blocks: int | None) -> Any | None: ...
    def view_identity(self) -> Any | None: ...
    def stored_column_order(self) -> list[str] | None: ...
    def serve_unit(self, unit: ShardInfo) -> None: ...
    def read_in_place(self, uri: str, storage_options: dict[str, str]) -> None: ...
    def mirror_of(self, origin: Any) -> None: ...
    @classmethod
    def in_place_files(cls, metadata: CacheMetadata) -> list[ShardInfo]: ...
    @classmethod
    def stream_units(cls, metadata: CacheMetadata) -> StreamUnits | None: ...
    @classmethod
    def metadata_problem(cls, metadata: CacheMetadata) -> str | None: ...


class LayoutModule(Protocol):
    """A module under `layouts/` that owns one physical format, both directions."""

    NAME: str  # the layout's name, recorded in `_metadata.json`
    DEFAULT_OPTIONS: dict[str, Any]  # write-time options with their defaults (fingerprinted)
    Writer: type[LayoutWriter]
    Backend: type[Backend]

    def check_options(self, options: dict[str, Any]) -> None:
        """Refuse bad write options before anything is built."""

    def merge_parts(self, staging: Path, parts: list[PartResult],
                    files: PartFiles = ...) -> tuple[list[ShardInfo], dict[str, Any]]:
        """Join the parts of a parallel build into one cache in `staging`: (its files, extra metadata). `files`
        says where the parts' files are (layouts.part_files: on this disk by default; on an object store, where
        the merge reads only part records and a few small files, and leaves the data where it is)."""

    def seal_part(self, folder: Path, part: PartResult) -> PartResult:
        """The part (written in `folder`) with what a merge that cannot read its data files needs, computed on
        the node that wrote it before it goes to the store (a Ray build on an object-store root)."""
