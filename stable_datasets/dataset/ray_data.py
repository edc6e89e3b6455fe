"""`StableDataset.to_ray()`: a cache handed to Ray Data for distributed preprocessing.

Whole Parquet and Lance caches go through Ray Data's own readers (`read_parquet`,
`read_lance`), so Ray plans the reads (not a remote Parquet cache: its local copy is on the
driver's disk only); anything else (Arrow IPC shards, a selection or a shuffle, several
caches) through a datasource whose read tasks each take a contiguous range of rows: the
dataset travels to the task as paths and indices and the task opens the files itself (those
of a remote cache come from the store into that node's own shard cache). Columns are the
stored Arrow columns (images as their encoded bytes). Imported only when Ray is installed
(see `StableDataset.to_ray`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from ray.data import Datasource, ReadTask
from ray.data.block import BlockMetadata

from stable_datasets.write.engines import ensure_ray

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset

READ_BATCH_ROWS = 8192


def to_ray(ds: StableDataset, *, ray_address: str | None = None, override_num_blocks: int | None = None) -> Any:
    ray = ensure_ray(ray_address)
    if ds._indices is None and len(ds.backends) == 1:  # the format's own Ray reader, where the layout has one
        native = ds.backends[0].ray_dataset(ray, override_num_blocks)
        if native is not None:
            return native
    return ray.data.read_datasource(RowRanges(ds), override_num_blocks=override_num_blocks)


def _reader(ds: StableDataset, lo: int, hi: int) -> Callable[[], Iterator[pa.Table]]:
    def read() -> Iterator[pa.Table]:
        yield from ds.select(range(lo, hi))._iter_arrow(READ_BATCH_ROWS)

    return read


class RowRanges(Datasource):
    """Read tasks over contiguous row ranges of a dataset."""

    def __init__(self, ds: StableDataset):
        self.dataset = ds

    def estimate_inmemory_data_size(self) -> int | None:
        """The stored bytes of the rows read: without an estimate Ray plans 200 read tasks, even for 300 rows."""
        caches = self.dataset.cache_metadata
        stored_rows = sum(m.num_rows for m in caches)
        if not stored_rows:
            return None
        return max(1, sum(m.num_bytes for m in caches) * len(self.dataset) // stored_rows)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        n = len(self.dataset)
        parts = max(1, min(parallelism, n))
        bounds = [round(i * n / parts) for i in range(parts + 1)]
        size = self.estimate_inmemory_data_size()
        return [ReadTask(_reader(self.dataset, lo, hi),
                         BlockMetadata(num_rows=hi - lo, size_bytes=None if size is None else size * (hi - lo) // n,
                                       exec_stats=None, input_files=None))
                for lo, hi in itertools.pairwise(bounds) if hi > lo]
