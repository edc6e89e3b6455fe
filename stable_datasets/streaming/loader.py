"""`StreamingDataLoader`: a torch DataLoader that records how far the training loop got.

DataLoader workers are other processes and run ahead of the loop (prefetch), so neither the
stream nor a sampler can know what the loop has received. This loader counts the rows of the
batches it hands out: every batch holds `batch_size` rows except the last of the rank's share
(the stream deals rows to workers in whole batches, see streaming.iterable), so the count is
exact. After each batch it writes (epoch, global position) into the stream or the
`BlockShuffleSampler`, so their `state_dict()` is right at any step; the loader's own
`state_dict()`/`load_state_dict()` are the same thing, and load on any world size, number of
workers or batch size.

Workers are started afresh for every pass (`persistent_workers=True` is refused): they receive
the position the pass begins at when they start. A stream's pass begins where it was last loaded
(or at the start of its epoch, see `StreamingDataset.begin_pass`): a loop broken off and started
again serves that epoch from there, as a new `iter()` of the stream does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stable_datasets.errors import missing_extra
from stable_datasets.streaming.iterable import StreamingDataset
from stable_datasets.streaming.sampler import BlockShuffleSampler

try:
    from torch.utils.data import DataLoader
except ImportError as exc:  # pragma: no cover - torch is optional
    raise missing_extra("StreamingDataLoader", "PyTorch", "torch") from exc


def _forks(context: Any) -> bool:
    """Whether workers started with `context` (None: the default) are forked from this process."""
    import multiprocessing

    return (context or multiprocessing).get_start_method() == "fork"


class StreamingDataLoader(DataLoader):
    def __init__(self, dataset: Any, batch_size: int | None = 1, **kwargs: Any):
        if kwargs.get("persistent_workers"):
            raise ValueError("StreamingDataLoader starts its workers for every pass (they take the stream's epoch and "
                             "position when they start); persistent_workers=True would keep stale copies")
        sampler = kwargs.get("sampler")
        if isinstance(dataset, StreamingDataset):
            if dataset.batch_size is not None and batch_size is not None:
                raise ValueError(f"the stream already yields batches of {dataset.batch_size} rows (batch()); pass "
                                 "batch_size=None to the loader")
            if dataset.filtered and kwargs.get("num_workers", 0) > 0:
                raise ValueError("StreamingDataLoader counts rows received, and a filtered stream's workers read "
                                 "more rows than they return; with workers use torchdata's StatefulDataLoader (it "
                                 "asks each worker for its state), or num_workers=0")
            if dataset.batch_size is None:
                dataset.loader_batch_size = batch_size or 1  # rows are dealt to workers a whole batch at a time
            dataset.counted_by_loader = True
            self._holder: Any = dataset
            self._rows_per_batch = dataset.batch_size or batch_size or 1
        elif isinstance(sampler, BlockShuffleSampler):
            self._holder = sampler
            self._rows_per_batch = batch_size or 1
        else:
            raise TypeError("StreamingDataLoader reads a StreamingDataset, or a map-style dataset with "
                            f"sampler=BlockShuffleSampler(...); got {type(dataset).__name__} with sampler "
                            f"{type(sampler).__name__}")
        super().__init__(dataset, batch_size=batch_size, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        holder = self._holder
        if isinstance(holder, StreamingDataset):
            holder.begin_pass(counted_here=True)  # where the last load (or finished epoch) left it, not a broken pass
            holder.pass_lanes(self.num_workers)  # fixed here, so the workers read them and state_dict() names them
            if self.num_workers > 0 and _forks(self.multiprocessing_context):
                holder.open_before_fork()
        epoch, start, count = holder.epoch, holder.consumed, 0
        total = holder.rows_left()
        counts_itself = isinstance(holder, StreamingDataset) and holder.filtered  # (no workers: see __init__)
        for batch in super().__iter__():
            count = min(count + self._rows_per_batch, total)
            if not counts_itself:
                holder.epoch, holder.consumed = epoch, holder.position_after(start, count)
            yield batch
        if isinstance(holder, StreamingDataset):
            holder.end_pass(epoch)
        else:
            holder.epoch, holder.consumed = epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        return self._holder.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._holder.load_state_dict(state)
