"""`interleave_datasets`: Hugging Face's mixing of sources, for datasets (a view) and streams (resumable).

Map-style `StableDataset`s give a `StableDataset` view: the sources concatenated (no copy) and the
mix's positions selected (`streaming.mix.MixPlan` says which row is drawn when, as HF does).
Streams (`StreamingDataset`) give a stream over the mix: each source keeps its own order and
shuffle, and the mixed stream has one global order, so it splits across ranks and workers and
resumes exactly, on another cluster size too (`streaming.iterable`). Sources may use different
layouts; their features must agree (the error names the column that differs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stable_datasets.dataset.stable_dataset import StableDataset


def _check_features(features: list[Any]) -> None:
    from stable_datasets.streaming.mix import column_difference

    for i, other in enumerate(features[1:], 1):
        if features[0] is not None and other is not None:
            difference = column_difference(features[0], other)
            if difference is not None:
                raise ValueError(f"cannot interleave datasets with different features: dataset {i}'s {difference}")


def interleave_datasets(datasets: Sequence[Any], probabilities: Sequence[float] | None = None,
                        seed: int | None = None, stopping_strategy: str = "first_exhausted") -> Any:
    """Mix `datasets` as Hugging Face's `interleave_datasets` does (see the module docstring).

    No `probabilities`: one row from each source in turn. With them: a seeded draw per row.
    `stopping_strategy="first_exhausted"` stops when a source runs out; `"all_exhausted"` oversamples
    the others until every source was read once. Pass `seed=` to make a mixed stream resumable in
    another process (with None the draws, like HF's, differ each time)."""
    # the streaming package imports torch when it is installed: on first use, not with `import stable_datasets`
    from stable_datasets.streaming.iterable import StreamingDataset
    from stable_datasets.streaming.mix import MixPlan

    datasets = list(datasets)
    if not datasets:
        raise ValueError("interleave_datasets needs at least one dataset")
    if all(isinstance(d, StableDataset) for d in datasets):
        _check_features([d.features for d in datasets])
        plan = MixPlan([len(d) for d in datasets], probabilities, seed, stopping_strategy)
        offsets, total = [], 0
        for d in datasets:
            offsets.append(total)
            total += len(d)
        return StableDataset.concatenate(datasets).select(plan.indices(offsets))
    if all(isinstance(d, StreamingDataset) for d in datasets):
        return _interleave_streams(datasets, probabilities, seed, stopping_strategy)
    kinds = sorted({type(d).__name__ for d in datasets})
    raise TypeError(f"interleave_datasets mixes StableDatasets or streams (StreamingDataset), not a mixture of "
                    f"{', '.join(kinds)}; call to_iterable() on the datasets to mix them with streams")


def _interleave_streams(streams: list[Any], probabilities: Any, seed: int | None, stopping_strategy: str) -> Any:
    from stable_datasets.streaming.iterable import StreamingDataset
    from stable_datasets.streaming.mix import MixedSource, MixPlan

    for i, stream in enumerate(streams):
        if stream.batch_size is not None:
            raise ValueError(f"stream {i} yields batches (batch()); interleave streams of rows, then batch() the mix")
    _check_features([getattr(s.dataset, "features", None) for s in streams])
    placements = {s.placement() for s in streams}
    if len(placements) > 1:
        described = sorted(map(str, placements))
        raise ValueError(f"the streams to interleave are split across ranks differently ({described}); give them the "
                         "same rank=, world_size= and drop_last=")
    rank, world_size, drop_last = placements.pop()
    for i, stream in enumerate(streams):
        if stream.filtered:
            raise ValueError(f"stream {i} filters rows; a mix draws its sources' rows by position, so filter the "
                             "mixed stream instead")
    plan = MixPlan([s.length for s in streams], probabilities, seed, stopping_strategy)
    return StreamingDataset(MixedSource(streams, plan), rank=rank, world_size=world_size, drop_last=drop_last)
