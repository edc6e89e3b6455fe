"""Transforms that run user code over a dataset: filter, map (cached), splits, concatenation."""

from __future__ import annotations

import dataclasses
import itertools
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from loguru import logger

from stable_datasets.cache.builds import published_path
from stable_datasets.dataset.columns import map_folder_name, stratified_split, stratify_labels
from stable_datasets.dataset.dataset_dict import DatasetDict
from stable_datasets.dataset.hf_names import check_concatenable
from stable_datasets.errors import ColumnNotFoundError, StableDatasetsError, add_note
from stable_datasets.features.encoder import DEFAULT_BATCH_ROWS
from stable_datasets.features.features import Features, infer_feature
from stable_datasets.identity.code import UnhashableFunction, function_identity, value_identity
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint
from stable_datasets.layouts import arrow_shards
from stable_datasets.progress import progress
from stable_datasets.roots import ObjectStoreRoot
from stable_datasets.storage.remote_cache import RemoteOrigin
from stable_datasets.storage.root import RemoteRoot
from stable_datasets.urls import ObjectURL
from stable_datasets.write import ExampleSource, JobRunner, SplitJobs, WritePlan, build_once
from stable_datasets.write.engines import user_modules
from stable_datasets.write.seeding import seed_block

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset  # local: stable_dataset imports this module


# -- batches of user input ----------------------------------------------------------------
def _input_view(ds, input_columns: Sequence[str] | None):
    fmt = ds.format
    return ds.with_format(fmt["type"] if fmt["type"] != "arrow" else "python", input_columns, fmt["decode"])


def _batches(view, batch_size: int):
    """(start position, dict of columns) over the view, in order."""
    start = 0
    for columns in view.iter(batch_size):
        n = len(next(iter(columns.values()))) if columns else 0
        yield start, columns
        start += n


def _call(function: Callable, args: list[Any], input_columns: Sequence[str] | None, payload: Any,
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
    view = _input_view(ds.select(range(lo, hi)), input_columns)
    for offset, columns in progress(_batches(view, batch_size), desc="filter", unit=" batches",
                                    total=math.ceil((hi - lo) / batch_size)):
        start = lo + offset
        n = len(next(iter(columns.values())))
        indices = list(range(start, start + n))
        if batched:
            mask = np.asarray(_call(function, [indices] if with_indices else [], input_columns, columns, fn_kwargs,
                                    "filter", (start, start + n - 1)), dtype=bool)
            if mask.shape != (n,):
                raise StableDatasetsError(f"filter function returned {mask.shape} values for a batch of {n}")
        else:
            names = list(columns)
            mask = np.fromiter(
                (bool(_call(function, [i] if with_indices else [], input_columns, dict(zip(names, cells)),
                            fn_kwargs, "filter", (i, i)))
                 for i, cells in zip(indices, zip(*columns.values()))), dtype=bool, count=n)
        keep.append(np.flatnonzero(mask) + start)
    return np.concatenate(keep)


# -- map ------------------------------------------------------------------------------------
def _rows_from_output(output: Any, n_in: int, batched: bool, what: str) -> list[dict[str, Any]]:
    if output is None:
        return [{} for _ in range(n_in)] if batched else [{}]
    if not isinstance(output, dict):
        raise StableDatasetsError(f"map function must return a dict (or None), got {type(output).__name__} {what}")
    if not batched:
        return [output]
    lengths = {k: len(v) for k, v in output.items()}
    if len(set(lengths.values())) > 1:
        raise StableDatasetsError(f"map function returned columns of different lengths {lengths} {what}")
    n_out = next(iter(lengths.values())) if lengths else n_in
    names = list(output)
    return [dict(zip(names, cells)) for cells in zip(*output.values())] if names else [{} for _ in range(n_out)]


def map_dataset(ds, function: Callable | None = None, *, batched: bool = False, batch_size: int = 1000,
                with_indices: bool = False, input_columns: Sequence[str] | None = None,
                remove_columns: Sequence[str] | str | None = None, features: Features | dict | None = None,
                fn_kwargs: dict[str, Any] | None = None, cache_fingerprint: str | None = None,
                load_from_cache_file: bool = True, desc: str | None = None, num_proc: int | None = None,
                engine: str = "process", drop_last_batch: bool = False, new_fingerprint: str | None = None,
                seed: int | None = None):
    """Apply `function` and write the result as a fingerprinted Arrow cache beside the source,
    through the same write path as a build (`num_proc` parts, in processes or Ray tasks).
    `drop_last_batch` (batched only, as in Hugging Face) leaves out a last batch shorter than
    `batch_size`.

    The function's identity covers what it reads (see identity.code); a function reading
    something that cannot be hashed is run again every time (one warning), unless `new_fingerprint`
    (Hugging Face's name; `cache_fingerprint` is the same) names its result.

    Parallel parts get distinct random states (write.seeding). With `seed`, Python's, numpy's and torch's
    global generators are seeded from (seed, block) before each block of `batch_size` input rows, so the
    rows are the same with any `num_proc`."""
    if batched and drop_last_batch and len(ds) % batch_size:
        ds = ds.select(range(len(ds) - len(ds) % batch_size))
    from stable_datasets.dataset.open import open_cache  # local: a cycle through StableDataset

    runner = JobRunner(engine=engine, num_proc=num_proc)
    function = function or (lambda x: None)
    input_columns = [input_columns] if isinstance(input_columns, str) else input_columns
    remove = [remove_columns] if isinstance(remove_columns, str) else list(remove_columns or [])
    unknown = [c for c in remove if c not in ds.features]
    if unknown:
        raise ColumnNotFoundError(f"remove_columns: no column(s) {unknown}; columns are {ds.column_names}")
    fn_kwargs = dict(fn_kwargs or {})
    given_features = Features(features) if features is not None else None

    if new_fingerprint is not None and cache_fingerprint is not None and new_fingerprint != cache_fingerprint:
        raise ValueError(f"map: new_fingerprint={new_fingerprint!r} and cache_fingerprint={cache_fingerprint!r} "
                         "differ; give one")
    given = new_fingerprint if new_fingerprint is not None else cache_fingerprint
    if given is not None and (not isinstance(given, str) or not given):
        raise ValueError(f"map: new_fingerprint must be a non-empty string, got {given!r}")
    if given is None:
        try:
            fn_id: Any = function_identity(function)
            fn_id = {"function": fn_id, "fn_kwargs": {k: value_identity(v, 0) for k, v in fn_kwargs.items()}}
        except UnhashableFunction as exc:
            _warn_unhashable(function, exc)
            fn_id = {"random": uuid.uuid4().hex}
    else:
        fn_id = {"given": given}
    fmt = ds.format
    inputs = {
        "source": ds.fingerprint,
        "map": fn_id, "batched": batched, "batch_size": batch_size, "with_indices": with_indices,
        "input_columns": list(input_columns or []), "remove_columns": remove,
        "features": given_features.to_dict() if given_features else None,
        "format": [fmt["type"], fmt["decode"]], "cache_format_version": CACHE_FORMAT_VERSION,
    }
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"map: seed must be a non-negative int or None, got {seed!r}")
        inputs["seed"] = int(seed)
    fp = fingerprint(inputs)
    first = published_path(ds.cache_dirs[0])  # the split's link, not one build of it
    target = first.parent / map_folder_name(first.name, fp)

    def reopen():
        out = open_cache(target)
        cols = [c for c in (fmt["columns"] or []) if c in out.features] or None
        return out.with_format(fmt["type"], cols, fmt["decode"])

    def reuse() -> StableDataset | None:
        if not (load_from_cache_file and target.is_dir()):
            return None
        try:
            return reopen()
        except StableDatasetsError as exc:  # damaged or invalid: rebuilt below, like a builder's cache
            logger.warning("rebuilding map cache {}: {}", target, exc)
            return None

    base = ds.cache_metadata[0]
    plan = WritePlan(target=target, layout=arrow_shards.NAME,
                     options={**arrow_shards.DEFAULT_OPTIONS, "batch_rows": DEFAULT_BATCH_ROWS}, fingerprint=fp,
                     fingerprint_inputs=inputs, builder_name=base.builder_name,
                     builder_source=base.builder_source, config_name=base.config_name,
                     version=base.version, split=f"{ds.split}.map" if ds.split else "map", info=ds.info.to_dict(),
                     made_by=map_made_by(first, ds.fingerprint, function, inputs))
    source = MapSource(ds, function, batched=batched, batch_size=batch_size, with_indices=with_indices,
                       input_columns=input_columns, remove=remove, given_features=given_features,
                       fn_kwargs=fn_kwargs, desc=desc or "map", seed=seed)
    origin = _store_origin(ds)
    if origin is not None and runner.engine == "ray":  # nodes may share no disk: published to the store
        url = _map_to_store(origin, fp, plan, source, runner, force=not load_from_cache_file)
        out = open_cache(url)
        cols = [c for c in (fmt["columns"] or []) if c in out.features] or None
        return out.with_format(fmt["type"], cols, fmt["decode"])
    reused = build_once(plan, source, runner, reuse=reuse if load_from_cache_file else None)
    return reused if reused is not None else reopen()


def _store_origin(ds) -> RemoteOrigin | None:
    """Where the one cache behind `ds` lives on an object store, or None (a local cache, or several)."""
    backends = ds.backends
    origin = backends[0].origin if len(backends) == 1 else None
    return origin if isinstance(origin, RemoteOrigin) else None


def _map_to_store(origin: RemoteOrigin, fp: str, plan: WritePlan, source: MapSource, runner: JobRunner,
                  force: bool) -> str:
    """A map of a cache on an object store with engine="ray": its parts run on the cluster's nodes, read the
    source there (each node's own shard cache) and travel through the store, and the result is published beside
    the source (`<split>.map-<fingerprint>`) as a build is (roots.remote); its URL. A result published
    already is reused unless `force`."""
    store = origin.store
    source_split = origin.split_prefix
    folder, _, name = source_split.rpartition("/")
    relative = f"{folder}/{map_folder_name(name, fp)}" if folder else map_folder_name(name, fp)
    root = ObjectStoreRoot(RemoteRoot(ObjectURL(store.scheme, store.bucket, ""), store, dict(store.storage_options)))
    made_by = map_made_by(store.url(source_split), plan.fingerprint_inputs["source"], source.function,
                          plan.fingerprint_inputs)

    def write_for(local: Path) -> tuple[WritePlan, ExampleSource]:
        return dataclasses.replace(plan, target=local, made_by=made_by), source

    return root.publish(root.local_dir / relative, fp, write_for, runner, force=force)


def map_made_by(parent: Path | str, parent_fingerprint: str, function: Callable,
                inputs: dict[str, Any]) -> dict[str, Any]:
    """What made a map's cache: its parent cache and the function by name and place. The "spec" (parent,
    function by module, name and first line, and the map's options) is what a newer map result of the same
    call shares, so that `prune` can tell the older result is superseded."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    qualname = getattr(function, "__qualname__", type(function).__qualname__)
    name = f"{getattr(function, '__module__', None) or ''}.{qualname}"
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    options = {k: inputs[k] for k in ("batched", "batch_size", "with_indices", "input_columns", "remove_columns",
                                      "features", "format")}
    fn_kwargs = inputs["map"].get("fn_kwargs") if isinstance(inputs["map"], dict) else None
    return {"kind": "map", "parent": str(parent), "parent_fingerprint": parent_fingerprint, "function": name,
            "defined_at": where, "spec": {"parent": str(parent), "function": name, "defined_at": where,
                                          "options": options, "fn_kwargs": fn_kwargs}}


_WARNED: set[str] = set()


def _warn_unhashable(function: Callable, exc: UnhashableFunction) -> None:
    """Once per function and process: its result is not reused, and how to name it so it is."""
    name = getattr(function, "__qualname__", type(function).__qualname__)
    if name in _WARNED:
        return
    _WARNED.add(name)
    logger.warning("map: cannot fingerprint {} ({}); its result will not be reused (pass new_fingerprint= to "
                   "name it yourself)", name, exc)


class MapSource(ExampleSource):
    """A map's output rows as the write path's source: jobs are ranges of whole input batches, so
    every call of a batched function sees the batch it would see in one process."""

    keyed = False  # rows are numbered by position
    encoding_hint = "; pass features= to describe changed or new columns"

    def __init__(self, ds, function: Callable, *, batched: bool, batch_size: int, with_indices: bool,
                 input_columns: Sequence[str] | None, remove: list[str], given_features: Features | None,
                 fn_kwargs: dict[str, Any], desc: str, seed: int | None = None):
        self.view = _input_view(ds, None)
        self.seed = None if seed is None else int(seed)
        self.source_features = ds.features
        self.function, self.batched, self.batch_size = function, batched, batch_size
        self.with_indices, self.input_columns, self.remove = with_indices, input_columns, remove
        self.given_features, self.fn_kwargs, self.desc = given_features, fn_kwargs, desc

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        batches = max(1, math.ceil(len(self.view) / self.batch_size))
        num_jobs = max(1, min(num_jobs, batches))
        bounds = [min(len(self.view), round(i * batches / num_jobs) * self.batch_size) for i in range(num_jobs + 1)]
        return SplitJobs([(lo, hi) for lo, hi in itertools.pairwise(bounds)])

    def describe(self) -> str:
        return self.desc

    def expected_rows(self, job: tuple[int, int]) -> int | None:
        return None if self.batched else job[1] - job[0]  # a batched function may change the row count

    def code_modules(self) -> list[ModuleType]:
        return user_modules(self.function)

    def infer_features(self, examples: list[dict[str, Any]]) -> Features:
        return _output_features(self.source_features, examples, self.given_features)

    def empty_features(self) -> Features:
        return self.given_features or Features({k: v for k, v in self.source_features.items()
                                                if k not in self.remove})

    def examples(self, job: tuple[int, int]) -> Iterator[tuple[int, dict[str, Any]]]:
        lo, hi = job
        view = self.view.select(range(lo, hi))
        function, input_columns, remove, fn_kwargs = self.function, self.input_columns, self.remove, self.fn_kwargs
        position = lo  # output rows are numbered in order
        for offset, columns in _batches(view, self.batch_size):
            start = lo + offset
            if self.seed is not None:  # jobs are ranges of whole batches: the same blocks in one process and in N
                seed_block(self.seed, start // self.batch_size)
            names = list(columns)
            n_in = len(columns[names[0]]) if names else 0
            in_rows = [dict(zip(names, cells)) for cells in zip(*columns.values())]
            if self.batched:
                payload = columns if not input_columns else {c: columns[c] for c in input_columns}
                args = [list(range(start, start + n_in))] if self.with_indices else []
                output = _without_removed(_call(function, args, input_columns, payload, fn_kwargs, "map",
                                                (start, start + n_in - 1)), payload, remove)
                out_rows = _rows_from_output(output, n_in, True, f"for rows {start}..{start + n_in - 1}")
                if len(out_rows) != n_in:
                    kept = [c for c in names if c not in remove and c not in (out_rows[0] if out_rows else {})]
                    if kept:
                        raise StableDatasetsError(
                            f"map function returned {len(out_rows)} rows for a batch of {n_in}; input columns "
                            f"{kept} cannot be kept, pass remove_columns={kept}")
                    in_rows = [{} for _ in out_rows]
            else:
                out_rows = []
                for i, row in enumerate(in_rows):
                    args = [start + i] if self.with_indices else []
                    output = _without_removed(_call(function, args, input_columns, row, fn_kwargs,
                                                    "map", (start + i, start + i)), row, remove)
                    out_rows.extend(_rows_from_output(output, 1, False, f"for row {start + i}"))
            for r, o in zip(in_rows, out_rows):
                # an input column keeps its place, also one removed that the function returns anew
                kept = {k: v for k, v in r.items() if k not in remove or k in o}
                yield position, {**kept, **o}
                position += 1


def _without_removed(output: Any, given: dict[str, Any], remove: list[str]) -> Any:
    """As Hugging Face does: when the function hands back the dict it was given (changed in place),
    the columns to remove go too; a dict of its own keeps every column it names."""
    if not remove or output is not given:
        return output
    return {k: v for k, v in output.items() if k not in remove}


def _output_features(source: Features, rows: list[dict[str, Any]], given: Features | None) -> Features:
    import pyarrow as pa

    out = Features()
    for name in rows[0]:
        if given is not None and name in given:
            out[name] = given[name]
        elif name in source:
            out[name] = source[name]
        else:
            lacking = next((i for i, r in enumerate(rows) if name not in r), None)
            if lacking is not None:
                raise StableDatasetsError(f"map: the function returned column {name!r} for some rows and not for "
                                          f"others (one returned {list(rows[lacking])}); return the same columns "
                                          "for every row")
            if all(r[name] is None for r in rows):
                raise StableDatasetsError(f"map: new column {name!r} is None in all of the first {len(rows)} rows, so "
                                          "its type cannot be inferred; pass features= naming its type")
            try:
                out[name] = infer_feature(pa.array([r[name] for r in rows]).type)
            except (pa.ArrowException, ValueError) as exc:
                raise StableDatasetsError(f"map: cannot infer the type of new column {name!r} ({exc}); "
                                          "pass features=") from None
    return out


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


def concatenate_datasets(datasets: Sequence[StableDataset]) -> StableDataset:
    """Rows of each dataset in turn; all must have the same features."""
    from stable_datasets.dataset.stable_dataset import StableDataset  # local: stable_dataset imports this module

    check_concatenable(datasets, StableDataset)
    return StableDataset.concatenate(datasets)
