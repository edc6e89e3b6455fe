"""Data held in memory -> a published cache, through the one write path.

`StableDataset.from_dict / from_list / from_pandas / from_arrow / from_hf` encode their input
column by column (see features.columnar) and name the cache by its content: the sha256 of the
encoded columns serialized as Arrow IPC in fixed 65,536-row batches, with the features, storage
format and layout options. The same data gives the same cache, whatever object holds it;
changed data gives a new one. `from_generator` names its cache as Hugging Face does: by the
generator's code, the globals it reads and its `gen_kwargs` (see identity.code), so a
generator reading a file that changes must be given `fingerprint=` (or the file as a kwarg
whose value changes).

The result is opened from disk like any build: memory-mapped, picklable by path.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.cache.paths import cache_root, fingerprint_dir, split_folder_name
from stable_datasets.errors import EncodingError, ExampleError, StableDatasetsError
from stable_datasets.features.columnar import (
    Column,
    RowEncodingError,
    as_columns,
    encode_columns,
    is_date_or_time,
    table_columns,
)
from stable_datasets.features.encoder import DEFAULT_BATCH_ROWS
from stable_datasets.features.features import Features, infer_feature
from stable_datasets.features.value import Value
from stable_datasets.identity.code import UnhashableFunction, function_identity, value_identity
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint
from stable_datasets.layouts import layout_for, layout_module
from stable_datasets.write import ExampleSource, JobRunner, SplitJobs, WritePlan, build_once

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset

#: the builder name of in-memory caches: <root>/in_memory/<constructor>/<version>/<fingerprint>/<split>
BUILDER_NAME = "in_memory"
VERSION = "1.0.0"
HASH_BATCH_ROWS = 1 << 16
#: rows per record batch written from columns already in memory (slices of them: no copy)
COLUMNAR_BATCH_ROWS = 1 << 16


# -- features -------------------------------------------------------------------------------
def infer_column_feature(name: str, column: Column) -> Any:
    """The feature of an input column: from its Arrow type, or from the Arrow type of its values."""
    sample = next((v for v in column if v is not None), None) if isinstance(column, list) else None
    if isinstance(sample, np.ndarray) and sample.ndim > 1 and sample.dtype.kind in "biuf":
        arrow_type = pa.from_numpy_dtype(sample.dtype)  # nested lists, one level per dimension (as HF)
        for _ in range(sample.ndim):
            arrow_type = pa.list_(arrow_type)
    elif isinstance(column, list):
        try:
            arrow_type = pa.array(column).type
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"column {name!r}: cannot infer a feature from {type(column[0]).__name__} values "
                             f"({exc}); pass features=") from None
    else:
        arrow_type = column.type
    if pa.types.is_null(arrow_type):
        raise ValueError(f"column {name!r} holds only nulls, so its type cannot be inferred; pass features=")
    if is_date_or_time(arrow_type):  # as the file loaders store them: ISO text
        return Value("string")
    # pandas >= 3 strings arrive as large_string: stored as string (32-bit offsets per chunk), as by default
    arrow_type = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(arrow_type, arrow_type)
    try:
        return infer_feature(arrow_type)
    except ValueError as exc:
        raise ValueError(f"column {name!r}: {exc}; pass features= (or convert the column)") from None


def resolve_features(columns: Mapping[str, Column], features: Features | Mapping[str, Any] | None) -> Features:
    if features is not None:
        return features if isinstance(features, Features) else Features(features)
    return Features({name: infer_column_feature(name, column) for name, column in columns.items()})


# -- content identity -----------------------------------------------------------------------
def table_sha256(table: pa.Table) -> str:
    """The sha256 of `table` as Arrow IPC in fixed batches, so the chunking it came in does not matter."""
    digest = hashlib.sha256()

    class _Sink:
        closed = False

        def write(self, data: Any) -> int:
            digest.update(data)
            return len(memoryview(data))

        def flush(self) -> None:  # the IPC writer flushes its sink
            pass

    schema = pa.schema([pa.field(f.name, f.type) for f in table.schema])  # content only, not metadata
    table = table.replace_schema_metadata(None)
    with pa.ipc.new_stream(pa.PythonFile(_Sink(), mode="w"), schema) as writer:
        for start in range(0, table.num_rows, HASH_BATCH_ROWS):  # one batch each, whatever the chunks were
            writer.write_table(table.slice(start, HASH_BATCH_ROWS).combine_chunks())
    return digest.hexdigest()


# -- sources --------------------------------------------------------------------------------
class TableSource(ExampleSource):
    """An encoded in-memory table as the write path's source: one job, handed over in slices."""

    columnar = True
    keyed = False

    def __init__(self, table: pa.Table, desc: str):
        self.table, self.desc = table, desc

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        return SplitJobs([None])  # already in memory and encoded: one part writes it

    def examples(self, job: Any) -> Iterator[pa.RecordBatch]:
        yield from self.table.to_batches(max_chunksize=COLUMNAR_BATCH_ROWS)

    def expected_rows(self, job: Any) -> int:
        return self.table.num_rows

    def describe(self) -> str:
        return self.desc


class GeneratorSource(ExampleSource):
    """Examples from a user's generator function, numbered in order (keys are not needed)."""

    keyed = False
    encoding_hint = "; pass features= to describe the examples"

    def __init__(self, generator: Callable[..., Any], gen_kwargs: dict[str, Any], given: Features | None):
        self.generator, self.gen_kwargs, self.given = generator, gen_kwargs, given

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        return SplitJobs([None])

    def examples(self, job: Any) -> Iterator[tuple[int, Any]]:
        yield from enumerate(self.generator(**self.gen_kwargs))

    def infer_features(self, examples: list[dict[str, Any]]) -> Features:
        if not isinstance(examples[0], Mapping):
            raise StableDatasetsError(f"from_generator: the generator must yield dicts, got "
                                      f"{type(examples[0]).__name__}")
        names = list(examples[0])
        return resolve_features(as_columns({n: [e.get(n) for e in examples] for n in names}), None)

    def empty_features(self) -> Features:
        raise StableDatasetsError("from_generator: the generator yielded no examples, so the features cannot be "
                                  "inferred; pass features=")

    def describe(self) -> str:
        return f"from_generator({getattr(self.generator, '__qualname__', 'generator')})"


# -- publishing -----------------------------------------------------------------------------
def _storage(features: Features, storage_format: str, columnar: bool) -> tuple[str, dict[str, Any]]:
    layout = layout_for(features, storage_format)
    rows = COLUMNAR_BATCH_ROWS if columnar else DEFAULT_BATCH_ROWS
    return layout, {**layout_module(layout).DEFAULT_OPTIONS, "batch_rows": rows}


def publish(kind: str, source: ExampleSource, identity: dict[str, Any], features: Features | None, *,
            storage_format: str, cache_dir: str | os.PathLike | None, split: str, info: dict[str, Any] | None = None,
            reuse: bool = True) -> StableDataset:
    """Write `source` once into the cache its identity names, and open it (reused when it exists)."""
    from stable_datasets.dataset.open import open_cache  # local: a cycle through StableDataset

    layout, options = _storage(features or Features(), storage_format, source.columnar)
    inputs = {"constructor": kind, **identity, "features": features.to_dict() if features is not None else None,
              "storage_format": storage_format, "layout": layout, "layout_options": options,
              "cache_format_version": CACHE_FORMAT_VERSION}
    fp = fingerprint(inputs)
    base = fingerprint_dir(cache_root(cache_dir), BUILDER_NAME, kind, VERSION, fp)
    target = base / split_folder_name(split)
    plan = WritePlan(target=target, layout=layout, options=options, fingerprint=fp, fingerprint_inputs=inputs,
                     builder_name=BUILDER_NAME, config_name=kind, version=VERSION, split=split,
                     info=info or {}, features=features, media_root=base,
                     made_by=in_memory_made_by(kind, source, identity),
                     expected_bytes=source.table.nbytes if isinstance(source, TableSource) else None)
    existing = build_once(plan, source, reuse=functools.partial(reopen, target) if reuse else None)
    return existing or open_cache(target)


def in_memory_made_by(kind: str, source: ExampleSource, identity: dict[str, Any]) -> dict[str, Any]:
    """What made an in-memory dataset's cache: the constructor, the script that ran it, its content
    digest. No "spec": a dataset made from memory has no inputs a newer cache could share."""
    import sys

    record: dict[str, Any] = {"kind": "in_memory", "constructor": kind, "source": source.describe()}
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    if script and os.path.isfile(script):
        record["script"] = os.path.abspath(script)
    if "content_sha256" in identity:
        record["content_sha256"] = identity["content_sha256"]
    return record


def reopen(target: Path) -> StableDataset | None:
    """The published cache at `target`, or None when there is none or it cannot be trusted (rebuilt then)."""
    from stable_datasets.dataset.open import open_cache  # local: a cycle through StableDataset

    if not target.is_dir():
        return None
    try:
        ds = open_cache(target)
        for backend in ds.backends:  # maps and checks the stored files' structure (cheap: no full read)
            backend.ensure_open()
        return ds
    except StableDatasetsError as exc:
        logger.warning("rebuilding {}: {}", target, exc)
        return None


def encoded_table(columns: Mapping[str, Column], features: Features, what: str, split: str) -> pa.Table:
    """The input encoded as `features` store it; a bad value names the constructor, row and column."""
    try:
        return encode_columns(features, columns)
    except EncodingError as exc:
        row = exc.row if isinstance(exc, RowEncodingError) else None
        message = exc.message
        if message.startswith(("expected a str, got", "expected an integer for", "expected a number for",
                               "expected a bool, got")):
            # Hugging Face converts here (3 -> "3", True -> 1): we do not convert between kinds silently
            message += ("; values are not converted between kinds (numbers, text, bools) on the way in: pass "
                        "values of the feature's kind, or build with their own type and cast_column after")
        raise ExampleError(what, split, row, exc.field, message) from None


def from_columns(columns: Mapping[str, Column], kind: str, *, features: Features | Mapping[str, Any] | None,
                 storage_format: str, cache_dir: str | os.PathLike | None, split: str,
                 info: dict[str, Any] | None = None) -> StableDataset:
    resolved = resolve_features(columns, features)
    table = encoded_table(columns, resolved, kind, split)
    identity = {"content_sha256": table_sha256(table), "num_rows": table.num_rows}
    return publish(kind, TableSource(table, kind), identity, resolved, storage_format=storage_format,
                   cache_dir=cache_dir, split=split, info=info)


def columns_of_rows(rows: list[Mapping[str, Any]]) -> dict[str, Column]:
    """Rows (dicts) as columns; the columns are the keys of the rows in first-seen order."""
    names: dict[str, None] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"from_list: row {i} is a {type(row).__name__}, not a dict")
        names.update(dict.fromkeys(row))
    return as_columns({name: [row.get(name) for row in rows] for name in names})


def pandas_columns(df: Any, preserve_index: bool | None) -> dict[str, Column]:
    """A DataFrame's columns as Arrow (pyarrow's pandas conversion), object columns it cannot
    convert (PIL images, arrays) as lists."""
    names = [str(name) for name in df.columns]
    if len(set(names)) != len(names):
        repeated = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"column '{repeated}' appears more than once in the DataFrame")
    try:
        table = pa.Table.from_pandas(df, preserve_index=preserve_index)
    except (pa.ArrowException, ValueError, TypeError):
        table = None
    if table is not None:
        return dict(table_columns(table))
    columns: dict[str, Column] = {}
    for name in df.columns:
        try:
            array = pa.Array.from_pandas(df[name])
            columns[str(name)] = pa.chunked_array([array], type=array.type)
        except (pa.ArrowException, ValueError, TypeError):
            columns[str(name)] = list(df[name])
    return columns


def generator_identity(generator: Callable[..., Any], gen_kwargs: dict[str, Any],
                       given: str | None) -> dict[str, Any]:
    if given is not None:
        return {"given": given}
    try:
        return {"generator": function_identity(generator),
                "gen_kwargs": {k: value_identity(v) for k, v in sorted(gen_kwargs.items())}}
    except UnhashableFunction as exc:
        logger.warning("from_generator: cannot fingerprint the generator ({}); it is rebuilt every time", exc)
        return {"random": uuid.uuid4().hex}


# -- the constructors (bound as StableDataset classmethods; `cls` is StableDataset) ----------
def _info_dict(info: Any) -> dict[str, Any] | None:
    return info.to_dict() if info is not None and hasattr(info, "to_dict") else info


def from_dict(cls: Any, mapping: Mapping[str, Any], features: Features | Mapping[str, Any] | None = None,
              info: Any = None, split: str = "train", *, storage_format: str = "arrow",
              cache_dir: str | os.PathLike | None = None) -> StableDataset:
    """A dataset from a dict of columns (lists, numpy arrays, Arrow arrays), cached by content.

    Features are inferred from the Arrow types when not given."""
    return from_columns(as_columns(mapping), "from_dict", features=features, storage_format=storage_format,
                        cache_dir=cache_dir, split=split, info=_info_dict(info))


def from_list(cls: Any, mapping: list[Mapping[str, Any]], features: Features | Mapping[str, Any] | None = None,
              info: Any = None, split: str = "train", *, storage_format: str = "arrow",
              cache_dir: str | os.PathLike | None = None) -> StableDataset:
    """A dataset from a list of rows (dicts); a key missing from a row is a null there."""
    return from_columns(columns_of_rows(list(mapping)), "from_list", features=features,
                        storage_format=storage_format, cache_dir=cache_dir, split=split, info=_info_dict(info))


def from_pandas(cls: Any, df: Any, features: Features | Mapping[str, Any] | None = None, info: Any = None,
                split: str = "train", preserve_index: bool | None = None, *, storage_format: str = "arrow",
                cache_dir: str | os.PathLike | None = None) -> StableDataset:
    """A dataset from a pandas DataFrame, converted by pyarrow column by column. `preserve_index`
    as pyarrow takes it: None keeps an index that is not a plain range as a column."""
    return from_columns(pandas_columns(df, preserve_index), "from_pandas", features=features,
                        storage_format=storage_format, cache_dir=cache_dir, split=split, info=_info_dict(info))


def from_arrow(cls: Any, data: pa.Table | pa.RecordBatch | pa.RecordBatchReader,
               features: Features | Mapping[str, Any] | None = None, info: Any = None, split: str = "train", *,
               storage_format: str = "arrow", cache_dir: str | os.PathLike | None = None) -> StableDataset:
    """A dataset from an Arrow Table, RecordBatch or RecordBatchReader. Without `features=`, a
    schema written by this library gives its features back, else they come from the Arrow types.
    A reader is read once into memory (its content is what names the cache)."""
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise TypeError(f"from_arrow takes a pyarrow Table, RecordBatch or RecordBatchReader, got "
                        f"{type(data).__name__}")
    if features is None and data.schema.metadata and b"stable_datasets.features" in data.schema.metadata:
        stored = Features.from_arrow_schema(data.schema)
        if list(stored) == data.schema.names:
            features = stored
    return from_columns(table_columns(data), "from_arrow", features=features, storage_format=storage_format,
                        cache_dir=cache_dir, split=split, info=_info_dict(info))


def from_generator(cls: Any, generator: Callable[..., Any], features: Features | Mapping[str, Any] | None = None,
                   cache_dir: str | os.PathLike | None = None, gen_kwargs: dict[str, Any] | None = None,
                   num_proc: int | None = None, split: str = "train", fingerprint: str | None = None, *,
                   storage_format: str = "arrow", info: Any = None) -> StableDataset:
    """A dataset of the dicts `generator(**gen_kwargs)` yields, written as they come (bounded memory).

    The cache is named by the generator's code, the globals it reads and `gen_kwargs` (as
    Hugging Face does), or by `fingerprint=` when given; data the generator reads from
    elsewhere is not part of the name."""
    del num_proc  # one generator is one stream: it is written by one part
    gen_kwargs = dict(gen_kwargs or {})
    given = None if features is None else (features if isinstance(features, Features) else Features(features))
    identity = generator_identity(generator, gen_kwargs, fingerprint)
    return publish("from_generator", GeneratorSource(generator, gen_kwargs, given), identity, given,
                   storage_format=storage_format, cache_dir=cache_dir, split=split, info=_info_dict(info),
                   reuse="random" not in identity)
