"""Hugging Face `Dataset` methods that are compositions of ours, with Hugging Face's results.

Code written for `datasets.Dataset` calls `take`, `skip`, `flatten_indices`, `cast`,
`add_item`, `to_parquet`, `to_csv` and `to_json`; each is a few of our own operations (select,
map, cast_column, concatenate, the export batches), so they live here, apart from the class
that serves rows. Values and files follow Hugging Face's: `take(n)` past the end is the whole
dataset, exports write the stored values `to_arrow` gives in batches of 1,000 rows, CSV without
the index, JSON as records one per line, and each returns what Hugging Face returns (the Arrow
bytes of the batches for Parquet, the bytes written for CSV and JSON).

Text exports (CSV, JSON) hold no bytes: a binary or image column is refused before anything is
written, naming it (Hugging Face's writer fails on them inside pandas, or writes Python's bytes
repr). Nested cells (lists, structs) are JSON in a CSV cell (`[1, 2]`, never numpy's `[1 2]`), and
JSON values in JSON. A file export is written beside its path and renamed once complete, so a failed
export leaves no file behind.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import itertools
import json
import lzma
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.types import is_list_type
from stable_datasets.dataset.combine import concatenate
from stable_datasets.dataset.formatting import formatted_like
from stable_datasets.dataset.in_memory import infer_column_feature
from stable_datasets.errors import ExampleError, StableDatasetsError
from stable_datasets.features import Features

EXPORT_BATCH_ROWS = 1000  # Hugging Face's default batch size for to_parquet/to_csv/to_json


def positions(indices: Any) -> np.ndarray:
    """Row positions from what Hugging Face's `select` takes: a list, a range, a numpy array, a pandas
    Series, or any iterable of ints (an iterator too)."""
    try:
        if isinstance(indices, range):
            return np.arange(indices.start, indices.stop, indices.step, dtype=np.int64)
        if isinstance(indices, np.ndarray) or hasattr(indices, "__array__"):
            return np.asarray(indices, dtype=np.int64).reshape(-1)
        if isinstance(indices, (list, tuple)):
            return np.asarray(indices, dtype=np.int64).reshape(-1)
        if isinstance(indices, Iterable) and not isinstance(indices, (str, bytes, Mapping)):
            return np.fromiter((int(i) for i in indices), dtype=np.int64)
    except OverflowError:  # an index past int64 is past any dataset
        raise IndexError("select: an index is out of range (past 2**63, no dataset has that many rows)") from None
    raise TypeError(f"select takes a list, range, numpy array, pandas Series or iterable of row indices, got "
                    f"{type(indices).__name__}")


def take(ds: Any, n: int) -> Any:
    """The first `n` rows (all of them when there are fewer), as Hugging Face's `take`."""
    return ds.select(range(min(int(n), len(ds))))


def skip(ds: Any, n: int) -> Any:
    """Every row after the first `n`, as Hugging Face's `skip`."""
    return ds.select(range(min(int(n), len(ds)), len(ds)))


def flatten_indices(ds: Any, num_proc: int | None = None) -> Any:
    """The rows of a view (select, shuffle, filter) written as a cache of their own, in view order, so reads
    are sequential again; a whole dataset is already flat and is returned as it is."""
    if ds._indices is None:  # a whole dataset: every stored row, in stored order
        return ds
    return ds.map(None, num_proc=num_proc, desc="flatten_indices")


def cast(ds: Any, features: Mapping[str, Any]) -> Any:
    """Every column cast to `features` (which must name exactly the dataset's columns), as Hugging Face's."""
    features = features if isinstance(features, Features) else Features(dict(features))
    if sorted(features) != sorted(ds.column_names):
        raise ValueError(f"The columns in features ({list(features)}) must be identical as the columns in the "
                         f"dataset: {ds.column_names}")
    out = ds
    for name, feature in features.items():
        if ds.features[name].to_dict() != feature.to_dict():
            out = out.cast_column(name, feature)
    return out.select_columns(list(features)) if list(out.features) != list(features) else out


def add_item(ds: Any, item: Mapping[str, Any]) -> Any:
    """The rows with `item` appended, as Hugging Face's `add_item`: a column the dataset lacks is added (its
    type inferred from the item's value, null in the rows before), a column the item lacks is null in the new
    row, and a value of another kind is cast to the column's feature as `cast_column` casts (`"2"` to an
    int64 column is 2). The new row is written as a one-row cache and the result is a view over both caches
    (new columns are written into a copy of the rows first), in the dataset's format."""
    new = [c for c in item if c not in ds.features]
    features = Features({**ds.features, **{c: infer_column_feature(c, [item[c]]) for c in new}})
    base = ds.with_format("python")
    for name in new:
        base = base.add_column(name, pa.nulls(len(ds), features[name].arrow_type()), features[name])
    both = concatenate([base, _item_row(ds, item, features)])
    return formatted_like(both, ds)


def _item_row(ds: Any, item: Mapping[str, Any], features: Features) -> Any:
    """`item` as a one-row dataset of `features`: encoded as it is, else built with its values' own types and
    each column cast to its feature (a missing or None value is a null)."""
    split = ds.split or "train"
    try:
        return type(ds).from_list([{name: item.get(name) for name in features}], features=features, split=split)
    except ExampleError:
        row = type(ds).from_list([{k: v for k, v in item.items() if v is not None}], split=split)
    for name, feature in features.items():
        if name not in row.features:
            row = row.add_column(name, [None], feature)
        elif row.features[name] != feature:
            row = row.cast_column(name, feature)
    return row.select_columns(list(features))


class ExportError(StableDatasetsError, ValueError):
    """A column an export format cannot hold (bytes in CSV or JSON); the message names it and what to do."""


@contextlib.contextmanager
def _sink(path_or_buf: Any, storage_options: dict[str, Any] | None, mode: str) -> Iterator[IO[Any]]:
    """An open file for a path (local, or a URL through fsspec with `storage_options`) or the buffer given. A
    local file is written beside its path and renamed into place once complete; a failed export removes what
    it wrote (nothing half-written, no empty file, is left where the export was asked for)."""
    if hasattr(path_or_buf, "write"):
        yield path_or_buf
        return
    path = os.fspath(path_or_buf)
    if "://" in path:
        import fsspec

        opened = fsspec.open(path, mode, **(storage_options or {}))
        try:
            with opened as fh:
                yield fh
        except BaseException:
            with contextlib.suppress(Exception):
                opened.fs.rm(opened.path)
            raise
        return
    folder, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        with open(temporary, mode) as fh:
            yield fh
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)


def _holds_bytes(kind: pa.DataType) -> bool:
    """Whether a stored type holds bytes anywhere (a binary column, an image, a list or struct of them)."""
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return True
    if is_list_type(kind):
        return _holds_bytes(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_holds_bytes(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _is_nested(kind: pa.DataType) -> bool:
    return is_list_type(kind) or pa.types.is_struct(kind) or pa.types.is_map(kind)


def _refuse_bytes(ds: Any, schema: pa.Schema, method: str) -> None:
    """A text export of a column holding bytes is refused before anything is written, naming the column."""
    for field in schema:
        if _holds_bytes(field.type):
            feature = ds.features.get(field.name) if hasattr(ds.features, "get") else None
            raise ExportError(f"{method}: column {field.name!r} holds bytes ({feature!r}); {method[3:].upper()} has "
                              "no bytes type: export it with to_parquet, or remove_columns/cast it first")


def to_parquet(ds: Any, path_or_buf: Any, batch_size: int | None = None, storage_options: dict[str, Any] | None = None,
               **parquet_writer_kwargs: Any) -> int:
    """The stored values as one Parquet file, written in batches; returns the Arrow bytes of the batches
    written (what Hugging Face returns)."""
    import pyarrow.parquet as pq

    written = 0
    batches = ds._export_batches(batch_size or EXPORT_BATCH_ROWS)
    first = next(batches, None)
    schema = first.schema if first is not None else ds.to_arrow().schema
    with _sink(path_or_buf, storage_options, "wb") as fh, pq.ParquetWriter(fh, schema, **parquet_writer_kwargs) as out:
        for table in itertools.chain([first] if first is not None else [], batches):
            out.write_table(table)
            written += table.nbytes
    return written


def _plain(value: Any) -> Any:
    """numpy values inside a pandas cell as JSON's (json.dumps' `default`)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json_cells(column: Any) -> list[Any]:
    """A nested column's cells as JSON text (null stays null): what a CSV cell holds instead of numpy's repr."""
    return [None if value is None else json.dumps(value, default=_plain) for value in column.tolist()]


def check_num_proc(num_proc: int | None) -> None:
    """Hugging Face's check (its words too): `num_proc` is None or a positive int."""
    if num_proc is not None and (isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc <= 0):
        raise ValueError(f"num_proc {num_proc} must be an integer > 0.")


#: pandas' compression names by file suffix (`compression="infer"`), and how each is written
COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}


def compression_method(path_or_buf: Any, compression: Any) -> str | None:
    """The compression to write with, as pandas resolves it: a name, `{"method": name}`, None, or "infer" (from
    a path's suffix; a buffer is written plain). Names pandas knows that a stream cannot take are refused."""
    if isinstance(compression, Mapping):
        compression = compression.get("method")
    if compression == "infer":
        if hasattr(path_or_buf, "write"):
            return None
        return COMPRESSION_SUFFIXES.get(os.path.splitext(os.fspath(path_or_buf))[1].lower())
    if compression is None or compression in COMPRESSION_SUFFIXES.values():
        return compression
    raise ValueError(f"compression {compression!r} is not supported for a text export; use one of "
                     f"{sorted(COMPRESSION_SUFFIXES.values())}, 'infer' (from the file suffix) or None")


@contextlib.contextmanager
def _compressed(fh: IO[bytes], method: str | None) -> Iterator[IO[bytes]]:
    """`fh` written through `method`'s compressor (closed, so its trailer is written, before `fh` is)."""
    if method is None:
        yield fh
        return
    if method == "gzip":
        stream: Any = gzip.GzipFile(fileobj=fh, mode="wb", mtime=0)  # mtime 0: the same rows give the same file
    elif method == "bz2":
        stream = bz2.BZ2File(fh, "wb")
    elif method == "xz":
        stream = lzma.LZMAFile(fh, "wb")  # noqa: SIM115 (closed by the with below)
    else:
        try:
            import zstandard
        except ImportError:
            raise ImportError("compression='zstd' needs the zstandard package (pip install zstandard), as pandas' "
                              "does") from None
        stream = zstandard.ZstdCompressor().stream_writer(fh, closefd=False)
    with stream:
        yield stream


def _text_frames(ds: Any, batch_size: int | None) -> Iterator[Any]:
    """DataFrames of the stored values, a batch at a time, with an int column holding nulls kept as Python ints
    (pandas would make it float64, and 2**53 + 1 would be written as 9007199254740992.0: Hugging Face's
    exporters pass `integer_object_nulls=True` for this), and a fixed-size list column's null cells as None."""
    try:
        import pandas  # noqa: F401  (pyarrow's own error would not say which extra installs it)
    except ImportError:
        return ds.to_pandas(batch_size=batch_size or EXPORT_BATCH_ROWS, batched=True)  # its error names the extra
    return (_frame(table) for table in ds._export_batches(batch_size or EXPORT_BATCH_ROWS))


def _frame(table: pa.Table) -> Any:
    frame = table.to_pandas(integer_object_nulls=True)
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_fixed_size_list(field.type) and column.null_count:
            frame[field.name] = column.to_pylist()
    return frame


def _text_export(ds: Any, path_or_buf: Any, batch_size: int | None, storage_options: dict[str, Any] | None,
                 render: Any, encoding: str, method: str, compression: Any = "infer") -> int:
    """Batches of DataFrames rendered to text and written; a text buffer (io.StringIO) gets str, anything
    else bytes in `encoding`, compressed as `compression` says (pandas' names and suffixes). Returns what was
    written before compression (characters or bytes, as Hugging Face counts). Columns holding bytes are
    refused first; for CSV, nested cells become JSON text (module docstring)."""
    schema = ds.features.arrow_schema
    _refuse_bytes(ds, schema, method)
    nested = [f.name for f in schema if _is_nested(f.type)] if method == "to_csv" else []
    written = 0
    as_text = isinstance(path_or_buf, io.TextIOBase)
    codec = compression_method(path_or_buf, compression)
    if as_text and codec is not None:
        raise ValueError(f"{method}: compression={codec!r} writes bytes; give a path or a binary buffer, not a "
                         "text buffer")
    with _sink(path_or_buf, storage_options, "wb") as raw, _compressed(raw, codec) as fh:
        for offset, frame in enumerate(_text_frames(ds, batch_size)):
            for name in nested:
                frame[name] = _json_cells(frame[name])
            text = render(frame, offset == 0)
            data = text if as_text else text.encode(encoding)
            fh.write(data)
            written += len(data)
    return written


def to_csv(ds: Any, path_or_buf: Any, batch_size: int | None = None, num_proc: int | None = None,
           storage_options: dict[str, Any] | None = None, **to_csv_kwargs: Any) -> int:
    """The stored values as CSV (pandas' `to_csv`, header once, no index unless asked), in batches;
    returns the bytes written. `num_proc` is checked as Hugging Face checks it (one writer here);
    `compression=` as pandas takes it ("infer" from the suffix by default: `out.csv.gz` is gzip)."""
    check_num_proc(num_proc)
    compression = to_csv_kwargs.pop("compression", "infer")
    header = to_csv_kwargs.pop("header", True)
    kwargs = {"index": False, **to_csv_kwargs}
    encoding = kwargs.pop("encoding", "utf-8")
    return _text_export(ds, path_or_buf, batch_size, storage_options,
                        lambda frame, first: frame.to_csv(None, header=header if first else False, **kwargs),
                        encoding, "to_csv", compression)


def to_json(ds: Any, path_or_buf: Any, batch_size: int | None = None, num_proc: int | None = None,
            storage_options: dict[str, Any] | None = None, **to_json_kwargs: Any) -> int:
    """The stored values as JSON (pandas' `to_json`; by default one record per line), in batches;
    returns the bytes written. `num_proc` is checked as Hugging Face checks it (one writer here);
    `compression=` as pandas takes it ("infer" from the suffix by default: `out.jsonl.gz` is gzip)."""
    check_num_proc(num_proc)
    compression = to_json_kwargs.pop("compression", "infer")
    orient = to_json_kwargs.pop("orient", "records")
    lines = to_json_kwargs.pop("lines", orient == "records")
    if not lines and batch_size is None:
        batch_size = max(len(ds), 1)  # a whole JSON document is one batch, or the file would not be JSON
    encoding = to_json_kwargs.pop("encoding", "utf-8")
    if "index" not in to_json_kwargs and orient in ("split", "table"):
        to_json_kwargs["index"] = False

    def render(frame: Any, first: bool) -> str:
        text = frame.to_json(None, orient=orient, lines=lines, **to_json_kwargs)
        return text if text.endswith("\n") else text + "\n"

    return _text_export(ds, path_or_buf, batch_size, storage_options, render, encoding, "to_json", compression)
