"""`interleave_datasets`: Hugging Face's mixing of sources, for datasets (a view) and streams (resumable).

Map-style `StableDataset`s give a `StableDataset` view: the sources concatenated (no copy) and the
mix's positions selected (`streaming.mix.MixPlan` says which row is drawn when, as HF does).
Streams (`StreamingDataset`) give a stream over the mix: each source keeps its own order and
shuffle, and the mixed stream has one global order, so it splits across ranks and workers and
resumes exactly, on another cluster size too (`streaming.iterable`). Sources may use different
layouts; their features must agree (the error names the column that differs).

Where users want epoch sizes, mosaicml-streaming's spelling: one list per keyword, an entry per source
(None to leave it unset): `proportion=` (with optional `epoch_size=`), `repeat=` or `choose=`
(`streaming.sized_mix`), or `epoch_size=` alone (split across the sources by their rows, as mosaic
does). The epoch then takes exactly those per-source counts, shuffled together by
the seed; a source asked for more than its rows is read in several freshly shuffled passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stable_datasets.dataset.combine import concatenate
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.streaming.seeds import check_seed, fresh_seed


def _streaming() -> Any:
    """The streaming modules, imported on first use: the package imports torch when it is installed, which
    `import stable_datasets` must not."""
    from stable_datasets.streaming import iterable, mix, sized_mix  # local: the streaming package imports torch

    return iterable, mix, sized_mix


def _check_features(features: list[Any]) -> None:
    column_difference = _streaming()[1].column_difference
    for i, other in enumerate(features[1:], 1):
        if features[0] is not None and other is not None:
            difference = column_difference(features[0], other)
            if difference is not None:
                raise ValueError(f"cannot interleave datasets with different features: dataset {i}'s {difference}")


def _plan(lengths: list[int], probabilities: Any, seed: int | None, stopping_strategy: str,
          sizes: dict[str, Any], stream: bool = False) -> Any:
    _, mix, sized_mix = _streaming()
    if all(v is None for v in sizes.values()):
        return mix.MixPlan(lengths, probabilities, seed, stopping_strategy, stream=stream)
    if probabilities is not None:
        raise ValueError("give either probabilities= (Hugging Face's draws) or proportion=/repeat=/choose= "
                         "(exact epoch sizes), not both")
    if stopping_strategy != "first_exhausted":
        raise ValueError("stopping_strategy does not apply with proportion=/repeat=/choose=: the epoch size "
                         "follows from them")
    seed = fresh_seed() if seed is None else check_seed(seed, "interleave_datasets")  # the counts use it too
    return sized_mix.SizedMixPlan(lengths, sized_mix.epoch_counts(lengths, **sizes, seed=seed), seed)


def interleave_datasets(datasets: Sequence[Any], probabilities: Sequence[float] | None = None,
                        seed: int | None = None, stopping_strategy: str = "first_exhausted", *,
                        proportion: Sequence[float | None] | None = None,
                        repeat: Sequence[float | None] | None = None,
                        choose: Sequence[int | None] | None = None, epoch_size: int | None = None) -> Any:
    """Mix `datasets` as Hugging Face's `interleave_datasets` does (see the module docstring).

    No `probabilities`: one row from each source in turn (datasets: HF's map-style count of rounds; streams: HF's
    IterableDataset count, which stops right after the row that exhausts a source). With them: a seeded draw
    per row.
    `stopping_strategy="first_exhausted"` stops when a source runs out; `"all_exhausted"` oversamples
    the others until every source was read once. Pass `seed=` to make a mixed stream resumable in
    another process (with None the draws, like HF's, differ each time).

    `proportion=`/`repeat=`/`choose=` (one entry per dataset, None to skip; at most one per dataset;
    proportions and repeat/choose not together) fix each source's number of rows per epoch, as
    mosaicml-streaming's `Stream` does; `epoch_size=` goes with `proportion`, or alone (each source's share
    by its rows, mosaic's rounding)."""
    StreamingDataset = _streaming()[0].StreamingDataset
    datasets = list(datasets)
    sizes = {"proportion": proportion, "repeat": repeat, "choose": choose, "epoch_size": epoch_size}
    if not datasets:
        raise ValueError("interleave_datasets needs at least one dataset")
    if all(isinstance(d, StableDataset) for d in datasets):
        _check_features([d.features for d in datasets])
        plan = _plan([len(d) for d in datasets], probabilities, seed, stopping_strategy, sizes)
        offsets, total = [], 0
        for d in datasets:
            offsets.append(total)
            total += len(d)
        return concatenate(datasets).select(plan.indices(offsets))
    if all(isinstance(d, StreamingDataset) for d in datasets):
        return _interleave_streams(datasets, probabilities, seed, stopping_strategy, sizes)
    kinds = sorted({type(d).__name__ for d in datasets})
    raise TypeError(f"interleave_datasets mixes StableDatasets or streams (StreamingDataset), not a mixture of "
                    f"{', '.join(kinds)}; call to_iterable() on the datasets to mix them with streams")


def _interleave_streams(streams: list[Any], probabilities: Any, seed: int | None, stopping_strategy: str,
                        sizes: dict[str, Any]) -> Any:
    iterable, mix, _ = _streaming()
    StreamingDataset, MixedSource = iterable.StreamingDataset, mix.MixedSource
    for i, stream in enumerate(streams):
        if stream.batch_size is not None:
            raise ValueError(f"stream {i} yields batches (batch()); interleave streams of rows, then batch() the mix")
    _check_features([s.features for s in streams])
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
    plan = _plan([s.length for s in streams], probabilities, seed, stopping_strategy, sizes, stream=True)
    lanes = any(s.uses_lanes for s in streams)  # a lane of the mix is a contiguous stretch of each source's order
    return StreamingDataset(MixedSource(streams, plan), rank=rank, world_size=world_size, drop_last=drop_last,
                            lanes=lanes)
