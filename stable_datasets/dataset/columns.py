"""Column operations on a `StableDataset`, as Hugging Face `datasets` names them.

Where the stored data does not change, the result is a view of the same files: choosing,
removing and renaming columns (a `ColumnView`), sorting (an order of rows), `unique`.
Where it does (`cast_column` to another storage type, `class_encode_column`, `add_column`),
the new columns are written through the write path, column by column (see
features.columnar), into a fingerprinted cache beside the source, like `map`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.cache.builds import published_path
from stable_datasets.dataset.column_view import ColumnView
from stable_datasets.dataset.combine import with_backends
from stable_datasets.dataset.in_memory import (
    COLUMNAR_BATCH_ROWS,
    encoded_table,
    infer_column_feature,
    reopen,
    table_sha256,
)
from stable_datasets.errors import ColumnNotFoundError, EncodingError, ExampleError
from stable_datasets.features.base import as_feature
from stable_datasets.features.casting import value_kind
from stable_datasets.features.columnar import RowEncodingError, as_columns, cast_requested, encode_columns
from stable_datasets.features.features import Features
from stable_datasets.features.value import ClassLabel, Value
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint
from stable_datasets.layouts import arrow_shards
from stable_datasets.write import ExampleSource, JobRunner, SplitJobs, WritePlan, build_once

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


def _check_names(ds: StableDataset, names: Sequence[str], what: str) -> None:
    unknown = [n for n in names if n not in ds.features]
    if unknown:
        raise ColumnNotFoundError(f"{what}: no column(s) {unknown}; columns are {ds.column_names}")


def with_columns(ds: StableDataset, columns: dict[str, str]) -> StableDataset:
    """A view of `ds` showing `columns` (new name -> current name, in order); nothing is rewritten."""

    if not columns:
        raise ValueError("a dataset needs at least one column")
    features = Features({shown: ds.features[name] for shown, name in columns.items()})
    renamed = {name: shown for shown, name in columns.items()}
    return with_backends(ds, [ColumnView(b, columns) for b in ds.backends], features, renamed)


def select_columns(ds: StableDataset, column_names: str | Sequence[str]) -> StableDataset:
    names = [column_names] if isinstance(column_names, str) else list(column_names)
    _check_names(ds, names, "select_columns")
    if len(set(names)) != len(names):
        raise ValueError(f"select_columns: a column is named twice in {names}")
    return with_columns(ds, {n: n for n in names})


def remove_columns(ds: StableDataset, column_names: str | Sequence[str]) -> StableDataset:
    names = [column_names] if isinstance(column_names, str) else list(column_names)
    _check_names(ds, names, "remove_columns")
    kept = [n for n in ds.column_names if n not in names]
    if not kept:
        raise ValueError(f"remove_columns: removing {names} would leave no column")
    return with_columns(ds, {n: n for n in kept})


def rename_columns(ds: StableDataset, column_mapping: dict[str, str]) -> StableDataset:
    _check_names(ds, list(column_mapping), "rename_columns")
    shown = [column_mapping.get(n, n) for n in ds.column_names]
    for new in column_mapping.values():
        if not isinstance(new, str) or not new:
            raise ValueError(f"rename_columns: new column names must be non-empty strings, got {new!r}")
    if len(set(shown)) != len(shown):
        twice = sorted({n for n in shown if shown.count(n) > 1})
        raise ValueError(f"rename_columns: the columns would not be unique: {twice} named twice")
    return with_columns(ds, {column_mapping.get(n, n): n for n in ds.column_names})


# -- reading whole columns ------------------------------------------------------------------
def arrow_column(ds: StableDataset, name: str) -> pa.ChunkedArray:
    """One column of the view's rows, as stored, in the view's order."""
    _check_names(ds, [name], "column")
    return select_columns(ds.with_format("python"), [name]).to_arrow().column(0)


def unique(ds: StableDataset, column: str) -> list[Any]:
    """The distinct values of `column`, in order of first appearance (as Hugging Face returns them)."""
    values = arrow_column(ds, column)
    try:
        return pc.unique(values).to_pylist()
    except pa.ArrowNotImplementedError:  # lists and structs: Arrow has no kernel, compare them in Python
        seen: dict[Any, Any] = {}
        for value in values.to_pylist():
            seen.setdefault(_hashable(value), value)
        return list(seen.values())


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return ("list", tuple(_hashable(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _hashable(v)) for k, v in value.items()))
    return value


def sort(ds: StableDataset, column_names: str | Sequence[str], reverse: bool | Sequence[bool] = False,
         null_placement: str = "at_end") -> StableDataset:
    """The rows ordered by `column_names` (a stable sort), as a view: no data is rewritten."""
    names = [column_names] if isinstance(column_names, str) else list(column_names)
    _check_names(ds, names, "sort")
    reverse = [reverse] * len(names) if isinstance(reverse, bool) else list(reverse)
    if len(reverse) != len(names):
        raise ValueError(f"sort: {len(reverse)} reverse flags for {len(names)} columns")
    if null_placement not in ("at_start", "at_end", "first", "last"):
        raise ValueError(f"sort: null_placement must be 'at_start' or 'at_end', got {null_placement!r}")
    placement = {"first": "at_start", "last": "at_end"}.get(null_placement, null_placement)
    table = select_columns(ds.with_format("python"), names).to_arrow()
    keys = [(n, "descending" if r else "ascending") for n, r in zip(names, reverse)]
    try:  # pyarrow >= 20 takes the null placement per key (and deprecates the global one)
        order = pc.sort_indices(table, sort_keys=[(*k, placement) for k in keys])
    except (TypeError, ValueError, pa.ArrowInvalid):
        order = pc.sort_indices(table, sort_keys=keys, null_placement=placement)
    order = order.to_numpy()
    return ds.select(order)


# -- rewrites through the write path --------------------------------------------------------
class ColumnsSource(ExampleSource):
    """The rows of a dataset view, in order, with some columns computed by `change` (a function of
    an Arrow table returning new columns by name), handed to the write path a table at a time."""

    columnar = True
    keyed = False

    def __init__(self, ds: StableDataset, change: Callable[[pa.Table], dict[str, Any]], features: Features,
                 desc: str):
        self.ds, self.change, self.features, self.desc = ds.with_format("arrow"), change, features, desc

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        return SplitJobs([None])

    def expected_rows(self, job: Any) -> int:
        return len(self.ds)

    def examples(self, job: Any) -> Iterator[pa.RecordBatch]:
        done = 0
        for table in self.ds._iter_arrow(COLUMNAR_BATCH_ROWS):
            columns: dict[str, Any] = {n: table.column(n) for n in table.column_names}
            try:
                columns.update(self.change(table))
                encoded = encode_columns(self.features, columns)
            except EncodingError as exc:
                row = done + exc.row if isinstance(exc, RowEncodingError) else None
                raise ExampleError(self.desc, str(self.ds.split), row, exc.field, exc.message) from None
            yield from encoded.to_batches(max_chunksize=COLUMNAR_BATCH_ROWS)
            done += table.num_rows

    def describe(self) -> str:
        return self.desc


def rewrite(ds: StableDataset, operation: dict[str, Any], features: Features,
            change: Callable[[pa.Table], dict[str, Any]]) -> StableDataset:
    """`ds` with columns changed by `change`, written once into a cache named by the source view
    and `operation` (which must say everything `change` does), beside the source's cache."""
    from stable_datasets.dataset.open import open_cache  # local: a cycle through StableDataset

    inputs = {"source": ds.fingerprint, "operation": operation, "features": features.to_dict(),
              "cache_format_version": CACHE_FORMAT_VERSION}
    fp = fingerprint(inputs)
    first = published_path(ds.cache_dirs[0])
    target = first.parent / map_folder_name(first.name, fp)
    fmt = ds.format

    def formatted(out: StableDataset) -> StableDataset:
        kept = [c for c in fmt["columns"] or [] if c in out.features] or None
        return out.with_format(fmt["type"], kept, fmt["decode"])

    base = ds.cache_metadata[0]
    plan = WritePlan(target=target, layout=arrow_shards.NAME,
                     options={**arrow_shards.DEFAULT_OPTIONS, "batch_rows": COLUMNAR_BATCH_ROWS},
                     fingerprint=fp, fingerprint_inputs=inputs, builder_name=base.builder_name,
                     config_name=base.config_name, version=base.version,
                     split=f"{ds.split}.map" if ds.split else "map", info=ds.info.to_dict(), features=features,
                     made_by={"kind": "column_op", "parent": str(first), "parent_fingerprint": ds.fingerprint,
                              "operation": operation["op"]},
                     expected_bytes=sum(m.num_bytes for m in ds.cache_metadata))  # an estimate
    existing = build_once(plan, ColumnsSource(ds, change, features, operation["op"]),
                          reuse=functools.partial(reopen, target))
    return formatted(existing or open_cache(target))


def cast_column(ds: StableDataset, column: str, feature: Any) -> StableDataset:
    """`column` stored as `feature`. Only the description changes when the stored type stays the
    same (e.g. ClassLabel names over int64, Value("int64") over a ClassLabel): a view. Otherwise
    the column is rewritten, every value checked (an overflow names its row)."""
    _check_names(ds, [column], "cast_column")
    feature = as_feature(feature)
    features = Features({n: (feature if n == column else f) for n, f in ds.features.items()})
    old = ds.features[column]
    if feature.arrow_type() == old.arrow_type() and _same_values(old, feature):
        return relabel(ds, features)
    if isinstance(old, ClassLabel) and isinstance(feature, Value) and value_kind(feature.arrow_type()) == "string":
        names = pa.array(old.names, feature.arrow_type())  # class names, not the ids as text

        def change(table: pa.Table) -> dict[str, Any]:
            return {column: pc.take(names, table.column(column))}
    elif isinstance(old, (Value, ClassLabel)) and type(feature) is Value:
        def change(table: pa.Table) -> dict[str, Any]:
            return {column: cast_requested(table.column(column), feature, column)}
    else:
        def change(table: pa.Table) -> dict[str, Any]:
            return {}
    return rewrite(ds, {"op": "cast_column", "column": column, "rule": 2}, features, change)


def _same_values(old: Any, new: Any) -> bool:
    """True when every stored value of `old` is a valid value of `new` without a check (same storage)."""
    if isinstance(new, ClassLabel):
        return isinstance(old, ClassLabel) and old.num_classes <= new.num_classes
    return isinstance(new, Value)


def relabel(ds: StableDataset, features: Features) -> StableDataset:
    """The same rows and storage, described by `features` (same names and Arrow types)."""
    return with_backends(ds, ds.backends, features)


def class_encode_column(ds: StableDataset, column: str, include_nulls: bool = False,
                        names: list[str] | None = None) -> StableDataset:
    """A column of strings (or other values) turned into a ClassLabel whose names are its distinct
    values, sorted as Hugging Face sorts them; values are rewritten as class ids."""
    _check_names(ds, [column], "class_encode_column")
    if isinstance(ds.features[column], ClassLabel):
        raise ValueError(f"class_encode_column: column {column!r} is already a ClassLabel")
    if not isinstance(ds.features[column], Value):
        raise ValueError(f"class_encode_column: column {column!r} is a {type(ds.features[column]).__name__}; "
                         "only Value columns can be encoded")
    values = pc.unique(arrow_column(ds, column))  # each distinct stored value once
    if not include_nulls:
        values = values.drop_null()
    texts = [str(v) for v in values.to_pylist()]  # as Hugging Face names them: str(value), sorted
    names = names if names is not None else sorted(set(texts))  # given: the names of every split of a dict
    label = ClassLabel(names=names)
    features = Features({n: (label if n == column else f) for n, f in ds.features.items()})
    ids = pa.array([names.index(t) for t in texts], pa.int64())  # position in `values` -> class id
    null_id = names.index("None") if include_nulls and values.null_count else None

    def change(table: pa.Table) -> dict[str, Any]:
        found = pc.index_in(table.column(column), value_set=values, skip_nulls=null_id is None)
        return {column: pc.take(ids, found)}

    return rewrite(ds, {"op": "class_encode_column", "column": column, "include_nulls": include_nulls,
                        "names": names}, features, change)


def add_column(ds: StableDataset, name: str, column: Any, feature: Any = None) -> StableDataset:
    """`ds` with one more column (values in the view's row order), written with the view's rows."""
    if name in ds.features:
        raise ValueError(f"add_column: the dataset already has a column {name!r}")
    values = as_columns({name: column})[name]
    if len(values) != len(ds):
        raise ValueError(f"add_column: {len(values)} values for a dataset of {len(ds)} rows")
    if feature is None:
        feature = infer_column_feature(name, values)
    features = Features({**ds.features, name: as_feature(feature)})

    encoded = encoded_table({name: values}, Features({name: features[name]}), "add_column", str(ds.split))
    position = [0]

    def change(table: pa.Table) -> dict[str, Any]:
        start = position[0]
        position[0] += table.num_rows
        return {name: encoded.column(0).slice(start, table.num_rows)}

    return rewrite(ds, {"op": "add_column", "name": name, "values_sha256": table_sha256(encoded)}, features,
                   change)


# -- splits ---------------------------------------------------------------------------------
def stratified_split(labels: np.ndarray, n_train: int, n_test: int, seed: int | None) -> tuple[np.ndarray, ...]:
    """Row positions (train, test): each class gets its share of the test rows (largest remainders
    go first), rows drawn at random within a class, and both sides shuffled."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    n = len(labels)
    if n_test < len(classes) or n_train < len(classes):
        raise ValueError(f"train_test_split: with stratify_by_column, test ({n_test}) and train ({n_train}) must "
                         f"each be at least the number of classes ({len(classes)})")
    if counts.min() < 2:
        raise ValueError(f"train_test_split: class {classes[counts.argmin()]!r} has only one row; each class "
                         "needs at least 2 rows to be stratified")
    share = counts * n_test / n
    test_counts = np.floor(share).astype(np.int64)
    remainder = n_test - test_counts.sum()
    order = np.lexsort((rng.random(len(classes)), -(share - test_counts)))
    test_counts[order[:remainder]] += 1
    train_counts = np.minimum(counts - test_counts, np.floor(counts * n_train / n).astype(np.int64))
    missing = n_train - train_counts.sum()
    room = counts - test_counts - train_counts
    for index in np.argsort(-room, kind="stable"):
        take = min(missing, room[index])
        train_counts[index] += take
        missing -= take
    train, test = [], []
    for cls, n_cls_test, n_cls_train in zip(classes, test_counts, train_counts):
        rows = rng.permutation(np.flatnonzero(labels == cls))
        test.append(rows[:n_cls_test])
        train.append(rows[n_cls_test:n_cls_test + n_cls_train])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def stratify_labels(ds: StableDataset, column: str) -> np.ndarray:
    _check_names(ds, [column], "train_test_split")
    if not isinstance(ds.features[column], ClassLabel):
        raise ValueError(f"train_test_split: stratify_by_column={column!r} must be a ClassLabel column, got "
                         f"{ds.features[column]!r} (class_encode_column turns a column into one)")
    return arrow_column(ds, column).to_numpy()


def map_folder_name(name: str, fp: str) -> str:
    """`<split>.map-<fingerprint>`: where a map of the split folder `name` (itself a split or a map of one) is
    published, beside its source split (maps of maps do not nest their names)."""
    return f"{name.split('.map-')[0]}.map-{fp}"

