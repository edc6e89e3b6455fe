"""`map`: user code over a dataset's rows, its result written as a fingerprinted cache beside the source through
the write path (`MapSource`), with Hugging Face's rules for the output's features (`_output_features`) and for a
function that returns None (`_CallRecord`)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.cache.builds import published_path
from stable_datasets.dataset.columns import map_folder_name
from stable_datasets.dataset.formatting import formatted_like
from stable_datasets.dataset.transforms import batches, call_function, input_view
from stable_datasets.dataset.whole_floats import as_column_type, narrow_rows
from stable_datasets.errors import ColumnNotFoundError, EncodingError, StableDatasetsError
from stable_datasets.features.encoder import DEFAULT_BATCH_ROWS
from stable_datasets.features.features import Features, infer_feature
from stable_datasets.features.image import Image
from stable_datasets.features.value import ClassLabel
from stable_datasets.features.video import Video
from stable_datasets.identity.code import UnhashableFunction, function_identity, value_identity
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint
from stable_datasets.layouts import arrow_shards
from stable_datasets.roots import ObjectStoreRoot
from stable_datasets.storage.remote_cache import RemoteOrigin
from stable_datasets.storage.root import RemoteRoot
from stable_datasets.urls import ObjectURL
from stable_datasets.write import ExampleSource, JobRunner, SplitJobs, WritePlan, build_once
from stable_datasets.write.engines import user_modules
from stable_datasets.write.seeding import seed_block

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset  # local: stable_dataset imports this module


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
    rows are the same with any `num_proc`.

    A function returning None for every row runs for its effects: the dataset comes back as it is (its
    fingerprint too; only `remove_columns` are removed) and nothing is written, as in Hugging Face; None for some
    rows and a dict for others is an error (`_CallRecord`)."""
    unchanged = ds
    if batched and drop_last_batch and len(ds) % batch_size:
        ds = ds.select(range(len(ds) - len(ds) % batch_size))
    from stable_datasets.dataset.open import open_cache  # local: a cycle through StableDataset

    runner = JobRunner(engine=engine, num_proc=num_proc)
    function = function or _unchanged
    input_columns = [input_columns] if isinstance(input_columns, str) else input_columns
    remove = [remove_columns] if isinstance(remove_columns, str) else list(remove_columns or [])
    unknown = [c for c in remove if c not in ds.features]
    if unknown:
        raise ColumnNotFoundError(f"remove_columns: no column(s) {unknown}; columns are {ds.column_names}")
    fn_kwargs = dict(fn_kwargs or {})
    given_features = Features(features) if features is not None else None
    inputs = _map_inputs(ds, function, fn_kwargs, new_fingerprint, cache_fingerprint, seed, batched=batched,
                         batch_size=batch_size, with_indices=with_indices, input_columns=list(input_columns or []),
                         remove_columns=remove, features=given_features.to_dict() if given_features else None)
    fp = fingerprint(inputs)
    first = published_path(ds.cache_dirs[0])  # the split's link, not one build of it
    target = first.parent / map_folder_name(first.name, fp)

    def reuse() -> StableDataset | None:
        if not (load_from_cache_file and target.is_dir()):
            return None
        try:
            return formatted_like(open_cache(target), ds, keep_transform=False)
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
    calls = tempfile.mkdtemp(prefix="sds-map-calls-") if runner.engine != "ray" else None
    source = MapSource(ds, function, batched=batched, batch_size=batch_size, with_indices=with_indices,
                       input_columns=input_columns, remove=remove, given_features=given_features,
                       fn_kwargs=fn_kwargs, desc=desc or "map", seed=seed, calls_folder=calls)
    origin = _store_origin(ds)
    try:
        if origin is not None and runner.engine == "ray":  # nodes may share no disk: published to the store
            url = _map_to_store(origin, fp, plan, source, runner, force=not load_from_cache_file)
            return formatted_like(open_cache(url), ds, keep_transform=False)
        reused = build_once(plan, source, runner, reuse=reuse if load_from_cache_file else None)
    except _ReturnedNone:  # run for its effects, as Hugging Face's: the same dataset, the same fingerprint
        return unchanged.remove_columns(remove) if remove else unchanged
    finally:
        if calls is not None:
            shutil.rmtree(calls, ignore_errors=True)
    return reused if reused is not None else formatted_like(open_cache(target), ds, keep_transform=False)


def _unchanged(row: dict[str, Any]) -> dict[str, Any]:
    """`map(None)`: every row as it is (Hugging Face's identity function), so the rows are written anew."""
    return row


def _map_inputs(ds, function: Callable, fn_kwargs: dict[str, Any], new_fingerprint: str | None,
                cache_fingerprint: str | None, seed: int | None, **options: Any) -> dict[str, Any]:
    """What names a map's result: the source's fingerprint, the function (by its identity, or the name given
    as `new_fingerprint`), the options, the input format and the seed. A function that cannot be hashed gets a
    random identity (one warning): its result is never reused."""
    if new_fingerprint is not None and cache_fingerprint is not None and new_fingerprint != cache_fingerprint:
        raise ValueError(f"map: new_fingerprint={new_fingerprint!r} and cache_fingerprint={cache_fingerprint!r} "
                         "differ; give one")
    given = new_fingerprint if new_fingerprint is not None else cache_fingerprint
    if given is not None and (not isinstance(given, str) or not given):
        raise ValueError(f"map: new_fingerprint must be a non-empty string, got {given!r}")
    if given is None:
        try:
            fn_id: Any = {"function": function_identity(function),
                          "fn_kwargs": {k: value_identity(v, 0) for k, v in fn_kwargs.items()}}
        except UnhashableFunction as exc:
            _warn_unhashable(function, exc)
            fn_id = {"random": uuid.uuid4().hex}
    else:
        fn_id = {"given": given}
    fmt = ds.format
    inputs = {"source": ds.fingerprint, "map": fn_id, **options, "format": [fmt["type"], fmt["decode"]],
              "cache_format_version": CACHE_FORMAT_VERSION}
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"map: seed must be a non-negative int or None, got {seed!r}")
        inputs["seed"] = int(seed)
    return inputs


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
                 fn_kwargs: dict[str, Any], desc: str, seed: int | None = None, calls_folder: str | None = None):
        self.view = input_view(ds, None)
        self.calls_folder, self.num_jobs = calls_folder, 0  # see _CallRecord
        self.seed = None if seed is None else int(seed)
        self.source_features = ds.features
        self.function, self.batched, self.batch_size = function, batched, batch_size
        self.with_indices, self.input_columns, self.remove = with_indices, input_columns, remove
        self.given_features, self.fn_kwargs, self.desc = given_features, fn_kwargs, desc
        self.narrowed: dict[str, pa.DataType] = {}  # set by infer_features in the process writing the part

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        batches = max(1, math.ceil(len(self.view) / self.batch_size))
        num_jobs = max(1, min(num_jobs, batches))
        bounds = [min(len(self.view), round(i * batches / num_jobs) * self.batch_size) for i in range(num_jobs + 1)]
        self.num_jobs = num_jobs
        return SplitJobs([(lo, hi) for lo, hi in itertools.pairwise(bounds)])

    def describe(self) -> str:
        return self.desc

    def expected_rows(self, job: tuple[int, int]) -> int | None:
        return None if self.batched else job[1] - job[0]  # a batched function may change the row count

    def code_modules(self) -> list[ModuleType]:
        return user_modules(self.function)

    def infer_features(self, examples: list[dict[str, Any]]) -> Features:
        """The output's features (`_output_features`); the rows held for it, and every later row (`examples`),
        get whole floats as ints in the columns that keep an integer feature."""
        features, self.narrowed = _output_features(self.source_features, examples, self.given_features)
        narrow_rows(examples, self.narrowed)
        return features

    def empty_features(self) -> Features:
        return self.given_features or Features({k: v for k, v in self.source_features.items()
                                                if k not in self.remove})

    def examples(self, job: tuple[int, int]) -> Iterator[tuple[int, dict[str, Any]]]:
        lo, hi = job
        view = self.view.select(range(lo, hi))
        function, input_columns, remove, fn_kwargs = self.function, self.input_columns, self.remove, self.fn_kwargs
        position = lo  # output rows are numbered in order
        record = _CallRecord(self.calls_folder, lo)
        for offset, columns in batches(view, self.batch_size):
            start = lo + offset
            if self.seed is not None:  # jobs are ranges of whole batches: the same blocks in one process and in N
                seed_block(self.seed, start // self.batch_size)
            names = list(columns)
            n_in = len(columns[names[0]]) if names else 0
            in_rows = [dict(zip(names, cells)) for cells in zip(*columns.values())]
            if self.batched:
                payload = columns if not input_columns else {c: columns[c] for c in input_columns}
                args = [list(range(start, start + n_in))] if self.with_indices else []
                output = _without_removed(call_function(function, args, input_columns, payload, fn_kwargs, "map",
                                                (start, start + n_in - 1)), payload, remove)
                if record.skips(output, f"rows {start}..{start + n_in - 1}"):
                    continue
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
                    output = _without_removed(call_function(function, args, input_columns, row, fn_kwargs,
                                                    "map", (start + i, start + i)), row, remove)
                    if record.skips(output, f"row {start + i}"):
                        continue
                    out_rows.extend(_rows_from_output(output, 1, False, f"for row {start + i}"))
            narrowed = None
            for j, (r, o) in enumerate(zip(in_rows, out_rows)):
                if self.narrowed and narrowed is not self.narrowed:  # (set by infer_features, maybe mid-batch)
                    narrowed = self.narrowed
                    narrow_rows(out_rows[j:], narrowed)  # the rest of the batch's output, a column at a time
                # an input column keeps its place, also one removed that the function returns anew
                kept = {k: v for k, v in r.items() if k not in remove or k in o}
                yield position, {**kept, **o}
                position += 1
        record.close()

    def check_before_publish(self, num_rows: int) -> None:
        """Every job's function returned None: the map ran for its effects, and nothing is published."""
        if self.calls_folder is None:
            return
        nones = [p.suffix for p in Path(self.calls_folder).iterdir()].count(".none")
        if nones and nones == self.num_jobs:
            raise _ReturnedNone("map: the function returned None for every row")
        if nones:
            raise StableDatasetsError(_MIXED.format(where=f"{nones} of {self.num_jobs} parts returned None"))


_MIXED = ("map: the function returned None for some rows and a dict for others ({where}); return a dict for every "
          "row, or None for every row to run it for its effects only")


class _ReturnedNone(StableDatasetsError):
    """Raised before publishing when a map's function returned None for every row: the dataset is unchanged."""


class _CallRecord:
    """What one job's function calls returned, written as `<lo>.none` or `<lo>.rows` in `folder` (read by
    `check_before_publish`); None for every call means nothing is written. Without a folder (Ray's workers may
    share no disk with the caller), a call returning None keeps its row as it is."""

    def __init__(self, folder: str | None, lo: int):
        self.folder, self.lo, self.none, self.rows = folder, lo, False, False

    def skips(self, output: Any, where: str) -> bool:
        """True when `output` is None and nothing is to be written for it."""
        if self.folder is None:
            return False
        self.none, self.rows = self.none or output is None, self.rows or output is not None
        if self.none and self.rows:
            raise StableDatasetsError(_MIXED.format(where=f"at {where}"))
        return output is None

    def close(self) -> None:
        if self.folder is not None:
            (Path(self.folder) / f"{self.lo}.{'none' if self.none else 'rows'}").touch()


def _without_removed(output: Any, given: dict[str, Any], remove: list[str]) -> Any:
    """As Hugging Face does: when the function hands back the dict it was given (changed in place),
    the columns to remove go too; a dict of its own keeps every column it names."""
    if not remove or output is not given:
        return output
    return {k: v for k, v in output.items() if k not in remove}


def _output_features(source: Features, rows: list[dict[str, Any]],
                     given: Features | None) -> tuple[Features, list[str]]:
    """The features of a map's output, from its first rows, as Hugging Face decides them: a column named in
    `given` has that feature; a column of the source keeps its feature when the new values fit it (encode as
    it encodes them; whole floats fit an integer column or a ClassLabel, as Arrow's safe cast takes them) and
    is inferred from the values otherwise (a changed struct, a removed column returned anew with another type,
    fractions in an int column); a new column is inferred. Also the columns whose floats become ints."""
    out, narrowed = Features(), {}
    for name in rows[0]:
        values = [r.get(name) for r in rows]
        if given is not None and name in given:
            out[name] = given[name]
        elif name in source and _fits(source[name], values, name):
            out[name] = source[name]
        elif name in source and _fits_as_whole_numbers(source, name, values):
            out[name] = source[name]
            narrowed[name] = source.arrow_schema.field(name).type
        elif name in source:  # values of mixed kinds have no type of their own: the encoder names the bad row
            out[name] = _inferred_or(name, rows, source[name])
        else:
            out[name] = _inferred(name, rows)
    return out, narrowed


def _inferred_or(name: str, rows: list[dict[str, Any]], feature: Any) -> Any:
    try:
        return _inferred(name, rows)
    except StableDatasetsError:
        return feature


def _fits(feature: Any, values: list[Any], name: str) -> bool:
    """Every value encodes as `feature` (an image or video column is kept: its encoder judges each value)."""
    if isinstance(feature, (Image, Video)):
        return True
    try:
        for value in values:
            feature.encode(value, name)
    except EncodingError:
        return False
    return True


def _fits_as_whole_numbers(source: Features, name: str, values: list[Any]) -> bool:
    """Whole floats where column `name` holds ints, at any depth (`1.0`, `[1.0, 2.0]`, `{"a": [1.0]}`), which it
    takes once they are cast (`dataset.whole_floats`); a ClassLabel is kept for any ints (an id out of its range is
    an error, as in Hugging Face)."""
    feature = source[name]
    cast = as_column_type(values, source.arrow_schema.field(name).type)
    return cast is not None and (isinstance(feature, ClassLabel) or _fits(feature, cast, name))


def _inferred(name: str, rows: list[dict[str, Any]]) -> Any:
    """A column's feature inferred from its values in `rows` (the same columns in every row, not all None)."""
    lacking = next((i for i, r in enumerate(rows) if name not in r), None)
    if lacking is not None:
        raise StableDatasetsError(f"map: the function returned column {name!r} for some rows and not for "
                                  f"others (one returned {list(rows[lacking])}); return the same columns "
                                  "for every row")
    if all(r[name] is None for r in rows):
        raise StableDatasetsError(f"map: new column {name!r} is None in all of the first {len(rows)} rows, so "
                                  "its type cannot be inferred; pass features= naming its type")
    try:
        return infer_feature(pa.array([r[name] for r in rows]).type)
    except (pa.ArrowException, ValueError) as exc:
        raise StableDatasetsError(f"map: cannot infer the type of new column {name!r} ({exc}); "
                                  "pass features=") from None
