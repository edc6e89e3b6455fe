"""Transforms of a dataset's rows: filter (user code over batches, in parallel ranges), splits, concatenation;
the batches user code is given (`input_view`, `batches`, `call_function`), which `map` (dataset/mapping.py)
shares."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stable_datasets.dataset.columns import stratified_split, stratify_labels
from stable_datasets.dataset.combine import concatenate, with_split_name
from stable_datasets.dataset.dataset_dict import DatasetDict
from stable_datasets.dataset.formatting import formatted_like
from stable_datasets.dataset.hf_names import check_concatenable
from stable_datasets.errors import StableDatasetsError, add_note
from stable_datasets.features.features import Features
from stable_datasets.features.info import DatasetInfo
from stable_datasets.progress import progress
from stable_datasets.write import JobRunner
from stable_datasets.write.engines import user_modules

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset  # local: stable_dataset imports this module


# -- batches of user input ----------------------------------------------------------------
def input_view(ds, input_columns: Sequence[str] | None):
    fmt = ds.format
    return ds.with_format(fmt["type"] if fmt["type"] != "arrow" else "python", input_columns, fmt["decode"])


def batches(view, batch_size: int):
    """(start position, dict of columns) over the view, in order."""
    start = 0
    for columns in view.iter(batch_size):
        n = len(next(iter(columns.values()))) if columns else 0
        yield start, columns
        start += n


def call_function(function: Callable, args: list[Any], input_columns: Sequence[str] | None, payload: Any,
                  fn_kwargs: dict[str, Any], what: str, rows: tuple[int, int]) -> Any:
    """`function` on one row or batch; an exception it raises keeps its type and gains a note
    saying which row (or batch of rows) it was given, which a traceback shows."""
    try:
        if input_columns:
            return function(*[payload[c] for c in input_columns], *args, **fn_kwargs)
        return function(payload, *args, **fn_kwargs)
    except Exception as exc:
        first, last = rows
        where = f"on row {first}" if first == last else f"on the batch of rows {first}..{last}"
        add_note(exc, f"raised by {getattr(function, '__qualname__', 'the function')} in {what}, {where}")
        raise



# -- filter -------------------------------------------------------------------------------
def filter_positions(ds, function: Callable, *, batched: bool, batch_size: int, with_indices: bool,
                     input_columns: Sequence[str] | None, fn_kwargs: dict[str, Any] | None = None,
                     num_proc: int | None = None, engine: str = "process") -> np.ndarray:
    """Positions of the rows `function` keeps, computed in up to `num_proc` ranges of whole batches."""
    input_columns = [input_columns] if isinstance(input_columns, str) else input_columns
    runner = JobRunner(engine=engine, num_proc=num_proc)
    n = len(ds)
    batches = max(1, math.ceil(n / batch_size))
    jobs = max(1, min(runner.parallelism, batches))
    bounds = [min(n, round(i * batches / jobs) * batch_size) for i in range(jobs + 1)]
    runner.modules = user_modules(function)
    calls = [(ds, function, lo, hi, batched, batch_size, with_indices, input_columns, dict(fn_kwargs or {}))
             for lo, hi in itertools.pairwise(bounds)]
    kept = runner(_filter_range, calls, desc="filter range")
    return np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)


def _filter_range(ds, function: Callable, lo: int, hi: int, batched: bool, batch_size: int, with_indices: bool,
                  input_columns: Sequence[str] | None, fn_kwargs: dict[str, Any]) -> np.ndarray:
    keep: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    view = input_view(ds.select(range(lo, hi)), input_columns)
    for offset, columns in progress(batches(view, batch_size), desc="filter", unit=" batches",
                                    total=math.ceil((hi - lo) / batch_size)):
        start = lo + offset
        n = len(next(iter(columns.values())))
        indices = list(range(start, start + n))
        if batched:
            mask = np.asarray(call_function(function, [indices] if with_indices else [], input_columns, columns,
                                            fn_kwargs, "filter", (start, start + n - 1)), dtype=bool)
            if mask.shape != (n,):
                raise StableDatasetsError(f"filter function returned {mask.shape} values for a batch of {n}")
        else:
            names = list(columns)
            mask = np.fromiter(
                (bool(call_function(function, [i] if with_indices else [], input_columns, dict(zip(names, cells)),
                            fn_kwargs, "filter", (i, i)))
                 for i, cells in zip(indices, zip(*columns.values()))), dtype=bool, count=n)
        keep.append(np.flatnonzero(mask) + start)
    return np.concatenate(keep)


# -- splitting and joining ------------------------------------------------------------------
def train_test_split(ds, *, test_size: float | int | None, train_size: float | int | None, shuffle: bool,
                     seed: int | None, stratify_by_column: str | None = None):
    """Hugging Face's split: without shuffling, train is the first rows and test the next; with
    shuffling, test is the start of one permutation and train what follows. `stratify_by_column`
    (a ClassLabel) gives each class its share of both sides."""

    n = len(ds)

    def count(size: float | int, name: str, rounding: Callable[[float], float]) -> int:
        if isinstance(size, float):
            if not 0.0 < size < 1.0:
                raise ValueError(f"{name}={size} must be in (0, 1) as a fraction")
            return int(rounding(size * n))
        if not 0 < size < n:
            raise ValueError(f"{name}={size} must be in (0, {n}) as a row count")
        return int(size)

    if test_size is None and train_size is None:
        test_size = 0.25
    n_test = count(test_size, "test_size", math.ceil) if test_size is not None else None
    n_train = count(train_size, "train_size", math.floor) if train_size is not None else None
    n_test = n - n_train if n_test is None else n_test
    n_train = n - n_test if n_train is None else n_train
    if n_train <= 0 or n_test <= 0 or n_train + n_test > n:
        raise ValueError(f"train_size={n_train} and test_size={n_test} do not fit a dataset of {n} rows")
    if stratify_by_column is not None:
        if not shuffle:
            raise ValueError("train_test_split: stratify_by_column needs shuffle=True (as in Hugging Face)")
        train, test = stratified_split(stratify_labels(ds, stratify_by_column), n_train, n_test, seed)
        return DatasetDict({"train": ds.select(train), "test": ds.select(test)})
    if not shuffle:
        return DatasetDict({"train": ds.select(np.arange(n_train)),
                            "test": ds.select(np.arange(n_train, n_train + n_test))})
    order = np.random.default_rng(seed).permutation(n)
    return DatasetDict({"train": ds.select(order[n_test:n_test + n_train]), "test": ds.select(order[:n_test])})


def concatenate_datasets(datasets: Sequence[StableDataset], info: DatasetInfo | None = None,
                         split: str | None = None) -> StableDataset:
    """Rows of each dataset in turn; all must have the same features. As Hugging Face's: datasets without rows
    are left out of the rules below (when some have rows); the format (and transform) is kept when every
    dataset has the same one, else reset to Python rows; the info is `info`, or the datasets' own when they are
    all equal, else one whose descriptive fields join each distinct value with a blank line."""
    from stable_datasets.dataset.stable_dataset import StableDataset  # local: stable_dataset imports this module

    check_concatenable(datasets, StableDataset)
    joined = concatenate(datasets)
    counted = [ds for ds in datasets if len(ds)] or list(datasets)
    first = counted[0]
    same_format = all(ds._format == first._format and ds._transform == first._transform for ds in counted)
    joined = formatted_like(joined, first if same_format else None)
    joined._info = info if info is not None else merged_info([ds.info for ds in counted], joined.features)
    return joined if split is None else with_split_name(joined, split)


def merged_info(infos: Sequence[DatasetInfo], features: Features) -> DatasetInfo:
    """Hugging Face's `DatasetInfo.from_merge`: the first when all are equal; else description, citation, homepage
    and license each the distinct values in order joined by a blank line, and no supervised keys."""
    if all(i == infos[0] for i in infos):
        return infos[0]

    def joined(field: str) -> str:
        return "\n\n".join(dict.fromkeys(getattr(i, field) for i in infos)).strip()

    return DatasetInfo(features=features, description=joined("description"), citation=joined("citation"),
                       homepage=joined("homepage"), license=joined("license"))
