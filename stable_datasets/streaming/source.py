"""What streams, samplers, mixing and packing read: the `RowSource` protocol and its optional abilities.

A row source is map-style: `len(source)` rows, and `source.__getitems__(positions)` returns them
(torch's DataLoader name for a batch read). Everything else a reader may use is an ability, one small
Protocol each, checked with `isinstance` where it is used (never found by probing attributes), so a
reader says in its type what it can do without:

- `BlockReads`: stored rows as Arrow (`read_block` for a sequential range, `read_rows` for any) and
  the source's own rows or batches made from such tables; the block reader of `streaming.reader`.
- `Blocks` / `Shards`: where stored blocks (record batches, row groups) and stored files begin, for
  the block shuffle and its shard windows.
- `Identified`: a `fingerprint` naming the rows, so a stream's state names them without opening a cache.
- `ReadsFilesInPlace`: the data files a stream of files reads (a saved state names them).
- `OpensBeforeFork`: what forked DataLoader workers can share, opened once in the parent.

`row_source(data)` is the one door: an object that hands out its own source (`__row_source__`, what a
`StableDataset` does, so that this plumbing stays off its public surface) gives that; a row source is
itself; any other map-style dataset (`__len__`/`__getitem__`) is wrapped in `MapStyleSource`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa


@runtime_checkable
class RowSource(Protocol):
    """Rows by position: what every reader of a stream needs."""

    def __len__(self) -> int: ...

    def __getitems__(self, positions: Sequence[int]) -> list[Any]: ...


@runtime_checkable
class MapStyle(Protocol):
    """A map-style dataset (a list, a torch Dataset, a PackedSFTDataset): what `row_source` adapts."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any) -> Any: ...


@runtime_checkable
class ProvidesRowSource(Protocol):
    """An object that hands out the row source of its rows (a StableDataset: dataset/row_source.py)."""

    def __row_source__(self) -> RowSource: ...


@runtime_checkable
class BlockReads(Protocol):
    """Stored rows as Arrow tables, and this source's rows (or one batch) made from such a table."""

    def read_block(self, start: int, stop: int) -> pa.Table: ...

    def read_rows(self, positions: np.ndarray) -> pa.Table: ...

    def rows_from_arrow(self, table: pa.Table) -> list[Any]: ...

    def batch_from_arrow(self, table: pa.Table) -> Any: ...

    def reads_rows_in_place(self) -> bool: ...


@runtime_checkable
class Blocks(Protocol):
    def block_bounds(self) -> np.ndarray | None: ...


@runtime_checkable
class Shards(Protocol):
    def shard_bounds(self) -> np.ndarray | None: ...


@runtime_checkable
class Identified(Protocol):
    fingerprint: str | None


@runtime_checkable
class ReadsFilesInPlace(Protocol):
    def source_files(self) -> list[tuple[str, list[Any]]] | None: ...


@runtime_checkable
class OpensBeforeFork(Protocol):
    def open_before_fork(self) -> None: ...


@runtime_checkable
class Described(Protocol):
    """A dataset with features (None or absent for a plain map-style dataset)."""

    features: Any


@runtime_checkable
class Formatted(Protocol):
    """A dataset with output formats (a StableDataset; a Hugging Face Dataset)."""

    format: Any

    def with_format(self, type: str | None = None, **kwargs: Any) -> Any: ...


@runtime_checkable
class Selectable(Protocol):
    def select(self, indices: Any) -> Any: ...


class MapStyleSource:
    """Any map-style dataset as a row source: rows one `__getitem__` at a time, and the dataset's own block
    bounds, shard bounds and fingerprint when it has them."""

    def __init__(self, data: MapStyle):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitems__(self, positions: Sequence[int]) -> list[Any]:
        return [self.data[i] for i in positions]

    def block_bounds(self) -> np.ndarray | None:
        return self.data.block_bounds() if isinstance(self.data, Blocks) else None

    def shard_bounds(self) -> np.ndarray | None:
        return self.data.shard_bounds() if isinstance(self.data, Shards) else None

    @property
    def fingerprint(self) -> str | None:
        return self.data.fingerprint if isinstance(self.data, Identified) else None


def row_source(data: Any) -> RowSource:
    """The row source of `data` (see the module docstring)."""
    if isinstance(data, ProvidesRowSource):
        return data.__row_source__()
    if isinstance(data, RowSource):
        return data
    if isinstance(data, MapStyle):
        return MapStyleSource(data)
    raise TypeError(f"a stream reads a map-style dataset (with __len__ and __getitem__), got {type(data).__name__}")


def block_bounds_of(data: Any) -> np.ndarray | None:
    """Where the stored blocks of `data`'s rows begin, then its length; None when it has none (or its rows share
    no stored block, as a lazily shuffled view's)."""
    source = row_source(data)
    bounds = source.block_bounds() if isinstance(source, Blocks) else None
    return None if bounds is None else np.asarray(bounds, dtype=np.int64)


def shard_bounds_of(data: Any) -> np.ndarray | None:
    """Where the stored shards of `data`'s rows begin, then its length; None when it has none or they do not bound
    a window (views)."""
    source = row_source(data)
    bounds = source.shard_bounds() if isinstance(source, Shards) else None
    return None if bounds is None else np.asarray(bounds, dtype=np.int64)


def features_of(data: Any) -> Any:
    """A dataset's features, or None when it has none."""
    return data.features if isinstance(data, Described) else None
