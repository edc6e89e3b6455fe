"""Reading the rows of an epoch order, a block at a time.

`BlockReader` serves a StableDataset (any layout): it reads each block it needs once, with the
dataset's `read_block` (an Arrow slice of a mapped record batch, one decoded Parquet row group,
one Lance range scan), keeps the blocks of the current window, and gathers the requested rows
from them with one `take` per block. Blocks of windows the order has left are dropped, so
memory holds at most two windows of blocks. A remote cache plugs in below `read_block`.

`ItemReader` serves any other map-style dataset (PackedSFTDataset, your own) through
`__getitems__` or `__getitem__`; its own caches (Parquet row groups) give the locality.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.tables import ordered_gather


class BlockReader:
    def __init__(self, dataset: Any, bounds: np.ndarray | None, block_window: np.ndarray | None):
        self.dataset = dataset
        self.bounds = bounds
        self.block_window = block_window  # None: rows are gathered straight from the dataset (full permutation)
        self._held: dict[int, pa.Table] = {}
        self.blocks_read = 0

    def held_rows(self) -> int:
        """Rows of the blocks held now (what bounds this reader's memory)."""
        return sum(t.num_rows for t in self._held.values())

    def table(self, positions: np.ndarray) -> pa.Table:
        """Stored rows at `positions`, in that order (nothing decoded)."""
        if self.block_window is None or self.bounds is None:
            return self.dataset.read_rows(positions)
        blocks = np.searchsorted(self.bounds, positions, side="right") - 1
        oldest = int(self.block_window[blocks].min())
        for block in [b for b in self._held if self.block_window[b] < oldest]:
            del self._held[block]  # the order has left this block's window
        return ordered_gather(positions, self.bounds[:-1], self._fetch, None)

    def _fetch(self, block: int, local: np.ndarray) -> pa.Table:
        table = self._held.get(block)
        if table is None:
            table = self.dataset.read_block(int(self.bounds[block]), int(self.bounds[block + 1]))
            if any(column.num_chunks > 1 for column in table.columns):
                table = table.combine_chunks()  # a take over many binary chunks concatenates them each time
            self._held[block] = table
            self.blocks_read += 1
        if len(local) and local[-1] - local[0] == len(local) - 1 and np.all(np.diff(local) == 1):
            return table.slice(int(local[0]), len(local))
        return table.take(pa.array(local))

    def rows(self, positions: np.ndarray) -> list[Any]:
        return self.dataset.rows_from_arrow(self.table(positions))

    def batch(self, positions: np.ndarray) -> Any:
        return self.dataset.batch_from_arrow(self.table(positions))


class ItemReader:
    def __init__(self, dataset: Any):
        self.dataset = dataset
        self.blocks_read = 0

    def held_rows(self) -> int:
        return 0

    def rows(self, positions: np.ndarray) -> list[Any]:
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return list(getitems(positions.tolist()))
        return [self.dataset[i] for i in positions.tolist()]

    def batch(self, positions: np.ndarray) -> Any:
        return self.rows(positions)


def make_reader(dataset: Any, bounds: np.ndarray | None, block_window: np.ndarray | None) -> Any:
    if hasattr(dataset, "read_block") and hasattr(dataset, "rows_from_arrow"):
        return BlockReader(dataset, bounds, block_window)
    return ItemReader(dataset)
