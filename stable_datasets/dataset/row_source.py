"""A `StableDataset` as streams, samplers, mixing and packing read it: its `streaming.source.RowSource`.

`StableDataset.__row_source__()` hands one out (`streaming.source.row_source(ds)` asks for it), so the
plumbing these readers need (stored rows as Arrow, block and shard bounds, the files read in place,
what to open before a fork) lives here, off the dataset's public surface, and nothing outside
`dataset/` reads the dataset's private state. It has every ability `streaming.source` declares, and the
rows as stored (nothing decoded) that sft's pack reader reads.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from stable_datasets.dataset.keyed_shuffle import KeyedShuffle
from stable_datasets.streaming.order import runs_of_blocks

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import Row, StableDataset
    from stable_datasets.layouts.base import LayoutBackend

#: where a backend over data files read in place lists them in its metadata's extra: [[name, size, version]...]
SOURCE_FILES_KEY = "source_files"


class DatasetRowSource:
    """The rows of one `StableDataset` view, in its format, with the abilities of `streaming.source`."""

    def __init__(self, dataset: StableDataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, positions: Any) -> list[Row]:
        return self.dataset.__getitems__(positions)

    @property
    def features(self) -> Any:
        return self.dataset.features

    @functools.cached_property
    def fingerprint(self) -> str:
        """The view's fingerprint (computed once: it hashes the view's row selection)."""
        return self.dataset.fingerprint

    def block_bounds(self) -> np.ndarray | None:
        """Positions where this view's blocks begin, then `len(view)`; None for a lazily shuffled view.

        A block is a maximal run of consecutive rows that lie in one stored block (a record batch,
        a row group, a slice of a Lance fragment): it is read with one sequential read. A view
        that keeps stored order (select of ranges, filter) keeps its blocks; a shuffled view has
        blocks of one row.
        """
        ds = self.dataset
        stored = np.concatenate([b.block_bounds()[:-1] + ds._starts[i] for i, b in enumerate(ds._backends)]
                                + [ds._starts[-1:]]).astype(np.int64)
        if ds._indices is None:
            return stored
        if isinstance(ds._indices, KeyedShuffle):
            return None  # no two neighbours share a stored block: a stream reads its rows one by one
        if not len(ds._indices):
            return np.zeros(1, np.int64)
        return runs_of_blocks(np.searchsorted(stored, ds._indices, side="right") - 1)

    def shard_bounds(self) -> np.ndarray | None:
        """Where the stored files begin, then `len(view)`, for a whole dataset whose every backend has them
        (the groups of a stream's shard window); None for views (their shards do not bound a window)."""
        ds = self.dataset
        if ds._indices is not None:
            return None
        counts: list[int] = []
        for backend in ds._backends:
            own = backend.shard_bounds()
            if own is None:
                return None
            counts.extend(np.diff(own).tolist())
        if sum(counts) != len(ds):
            return None
        return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)

    def open_before_fork(self) -> None:
        """Open now what forked DataLoader workers can share (see LayoutBackend.open_before_fork)."""
        for backend in self.dataset._backends:
            backend.open_before_fork()

    def read_block(self, start: int, stop: int) -> pa.Table:
        """Rows at positions [start, stop) as stored (Arrow, nothing decoded): one sequential read
        for a range inside one block."""
        ds = self.dataset
        if ds._indices is None:
            return ds._slice(start, stop)
        physical = ds._indices[start:stop]
        if len(physical) and int(physical[-1]) - int(physical[0]) == len(physical) - 1 and \
                np.all(np.diff(physical) == 1):  # a run of stored rows (a select of a range): a sequential read
            return ds._slice(int(physical[0]), int(physical[-1]) + 1)
        return ds._take(physical)

    def read_rows(self, positions: np.ndarray) -> pa.Table:
        """Rows at `positions` (any order) as stored (Arrow, nothing decoded)."""
        return self.dataset._take(self.dataset._physical_many(positions))

    def reads_rows_in_place(self) -> bool:
        """Any rows are gathered straight from mapped files (a stream needs to hold no blocks)."""
        return self.dataset._media is None and all(b.rows_in_place() for b in self.dataset._backends)

    def rows_from_arrow(self, table: pa.Table) -> list[Row]:
        """Stored rows (from `read_block`/`read_rows`) as this view's format gives rows."""
        return self.dataset._rows_of_table(table)

    def batch_from_arrow(self, table: pa.Table) -> Any:
        """Stored rows as one batch in this view's format (a dict of columns, or a table for "arrow")."""
        return self.dataset._format_table(table)

    def stored_row(self, index: int) -> dict[str, Any]:
        """Row `index` as stored (raw cells, nothing decoded), for code that reads its own columns."""
        return self.dataset._raw_row(self.dataset._physical(index))

    def stored_backend(self) -> LayoutBackend | None:
        """The backend whose row i is this view's row i, as stored (a whole single cache, no media folder to
        resolve), so a reader may read it directly (sft's pack reader does); None for any other view."""
        ds = self.dataset
        return ds._backends[0] if len(ds._backends) == 1 and ds._indices is None and ds._media is None else None

    def source_files(self) -> list[tuple[str, list[Any]]] | None:
        """(name, identity) of each data file behind rows read in place, not from a cache (a stream of data files:
        loaders.file_stream records them in its `_metadata`'s extra); None when every row comes from caches."""
        listed = [m.extra.get(SOURCE_FILES_KEY) for m in self.dataset.cache_metadata]
        if all(files is None for files in listed):
            return None
        return [(name, [size, version]) for files in listed for name, size, version in files or []]
