"""`StableDataset`: one split of one or more published caches, with formats and transforms.

Rows live in layout backends (memory-mapped Arrow, Lance, ...); a dataset adds an
optional indices mapping (select/shuffle/filter/splits) and an output format. Pickling
carries paths and indices only; each process reopens its own handles.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.tables import ordered_gather
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.dataset import display, formatting, hf_interop, hf_methods, in_memory, summary
from stable_datasets.dataset.column_methods import ColumnMethods
from stable_datasets.dataset.display import DisplayRow
from stable_datasets.dataset.exports import Exports
from stable_datasets.dataset.formatting import TABLE_FORMATS, Format, format_of, table_output, to_torch
from stable_datasets.dataset.hf_surface import HuggingFaceNames
from stable_datasets.dataset.keyed_shuffle import LAZY_SHUFFLE_ROWS, KeyedShuffle, indices_digest, shuffle_key
from stable_datasets.dataset.mapping import map_dataset
from stable_datasets.dataset.row_source import DatasetRowSource
from stable_datasets.dataset.transform_view import (
    check_transform,
    rest_as_python,
    transformed_item,
    transformed_iter,
    transformed_rows,
)
from stable_datasets.dataset.transforms import filter_positions, train_test_split
from stable_datasets.dataset.video_views import VideoViews
from stable_datasets.errors import ColumnNotFoundError
from stable_datasets.features.features import Features
from stable_datasets.features.image import Image
from stable_datasets.features.info import DatasetInfo
from stable_datasets.features.value import ClassLabel, Value
from stable_datasets.features.video import (
    bind_videos,
    has_path_videos,
    resolve_media_paths,
    resolve_media_row,
)
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.streaming.seeds import check_seed

if TYPE_CHECKING:
    from stable_datasets.dataset.dataset_dict import DatasetDict

ITER_BATCH_ROWS = 1000
#: rows per batch of `to_dict` / `to_pandas` / `to_polars(batched=True)` without a batch_size (as Hugging Face)
EXPORT_BATCH_ROWS = 1000
#: A row: column name -> value (decoded per the format; "arrow" format gives one-row tables instead).
Row = dict[str, Any]


class StableDataset(ColumnMethods, HuggingFaceNames, VideoViews, Exports):
    """Rows of published caches as a view: index arithmetic, decoding, access, formats and row selections live
    here; column operations, Hugging Face's composite names, video views and exports are mixins, one module each
    (dataset/column_methods.py, hf_surface.py, video_views.py, exports.py)."""

    def __init__(self, backends: Sequence[LayoutBackend], *, features: Features, info: DatasetInfo | None = None,
                 split: str | None = None, indices: np.ndarray | KeyedShuffle | None = None,
                 format: Format | None = None):
        if not backends:
            raise ValueError("a dataset needs at least one cache backend")
        self._backends = list(backends)
        self._features = features
        self._info = info or DatasetInfo(features=features)
        self._split = split
        #: the view's rows as stored positions: None (every row, stored order), an array, or a lazy KeyedShuffle
        self._indices: np.ndarray | KeyedShuffle | None = None if indices is None else (
            indices if isinstance(indices, KeyedShuffle) else np.asarray(indices, dtype=np.int64))
        sizes = [b.num_rows for b in self._backends]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._starts_list = self._starts.tolist()
        self._format = format or Format()
        self._read_features = bind_videos(features, self._format.video_decode)
        # path-stored videos live in each cache's own media folder, resolved per cache as rows are read
        self._media = [b.directory.parent for b in self._backends] if has_path_videos(features) else None
        self._plan = self._decode_plan()
        self._raw_final = self._raw_rows_are_final
        self._transform: tuple[Callable[[dict[str, Any]], Any], tuple[str, ...] | None, bool] | None = None
        self._row_type: type[DisplayRow] | None = None  # made on the first `ds[i]`

    # -- construction helpers ------------------------------------------------------------
    def _derive(self, *, indices: np.ndarray | KeyedShuffle | str | None = "keep", format: Format | None = None,
                keep_transform: bool = True) -> StableDataset:
        view = StableDataset(self._backends, features=self._features, info=self._info, split=self._split,
                             indices=self._indices if isinstance(indices, str) else indices,
                             format=format or self._format)
        view._transform = self._transform if keep_transform else None
        return view

    def _decode_plan(self) -> list[tuple[str, Callable[[Any], Any] | None]]:
        """Per selected column, the decode function, or None where raw values are final."""
        fmt = self._format
        names = fmt.columns or tuple(self._features)
        plan = []
        for name in names:
            feature = self._read_features[name]
            identity = fmt.type == "python" and (isinstance(feature, (Value, ClassLabel)) or (
                isinstance(feature, Image) and not fmt.decode))
            plan.append((name, None if identity else
                         (lambda raw, f=feature: f.decode(raw, numpy=fmt.numpy, decode=fmt.decode))))
        return plan

    @property
    def _raw_rows_are_final(self) -> bool:
        """True when backend rows can be returned as they are (no decode, no column subset)."""
        return self._format.type == "python" and self._format.columns is None and all(
            fn is None for _, fn in self._plan)

    # -- descriptive ---------------------------------------------------------------------
    @property
    def features(self) -> Features:
        return self._features

    @property
    def info(self) -> DatasetInfo:
        return self._info

    @property
    def split(self) -> str | None:
        return self._split

    @property
    def column_names(self) -> list[str]:
        return list(self._features)

    @property
    def num_rows(self) -> int:
        return len(self)

    @property
    def format(self) -> dict[str, Any]:
        return {"type": self._format.type, "columns": self._format.columns, "decode": self._format.decode,
                "output_all_columns": self._format.output_all_columns}

    @property
    def cache_files(self) -> list[dict[str, Any]]:
        """Each file behind the dataset, with the rows it stores; a view (`select`, `shuffle`, `filter`, a
        split of `train_test_split`) serves fewer or other rows than its files hold, so `view` says
        whether it is one: `open_cache` of its folder serves the whole source, `save_to_disk` the view."""
        view = self._indices is not None
        return [{"filename": str(b.directory / s.path), "num_rows": s.num_rows, "view": view}
                for b in self._backends for s in b.metadata.shards]

    @property
    def cache_dirs(self) -> list[Path]:
        return [b.directory for b in self._backends]

    @property
    def cache_metadata(self) -> list[CacheMetadata]:
        """The `_metadata.json` of each cache behind this dataset (fingerprint, layout, shards, and
        what the layout records, such as each video's record in a frames cache)."""
        return [b.metadata for b in self._backends]

    @property
    def fingerprint(self) -> str:
        """What rows this view serves: its caches (fingerprint, folder, rows) and its row selection.
        Transforms hash it (with their own inputs) to name their caches."""
        caches = [(m.fingerprint, published_path(b.directory).name, m.num_rows,
                   *([identity] if (identity := b.view_identity()) is not None else []))  # e.g. a ColumnView's
                  for b, m in zip(self._backends, self.cache_metadata)]
        selection = None if self._indices is None else indices_digest(self._indices)
        return hashlib.sha256(json.dumps([caches, selection]).encode()).hexdigest()[:16]

    def __len__(self) -> int:
        return int(len(self._indices) if self._indices is not None else self._starts_list[-1])

    def __repr__(self) -> str:
        return (f"StableDataset(split={self._split!r}, num_rows={len(self)}, "
                f"features={list(self._features)}, format={self._format.type!r})")

    def _repr_html_(self) -> str:
        """A notebook's view: rows, size, features and the first rows with thumbnails."""
        rows = list(self.with_format("python").head(display.HTML_ROWS)) if self._transform is None else []
        size = sum(m.num_bytes for m in self.cache_metadata) if self._indices is None else None
        return display.dataset_html(f"StableDataset split={self._split!r}", len(self), size, self._features, rows)

    def head(self, n: int = 5) -> display.RowsPreview:
        """The first `n` rows (fewer in a smaller dataset), printed as a table; in a notebook, with thumbnails."""
        if n < 0:
            raise ValueError(f"head(n) needs n >= 0, got {n}")
        count = min(n, len(self))
        rows = self.__getitems__(np.arange(count)) if count else []
        features = {k: self._features[k] for k in (self._format.columns or self._features)}
        return display.RowsPreview(rows, features)

    def describe(self, sample_size: int = summary.DEFAULT_SAMPLE_SIZE) -> summary.DatasetSummary:
        """Column statistics (nulls, histograms, label counts, lengths) from at most `sample_size` rows,
        evenly spread, so describing a huge dataset reads a bounded amount; the result says what it saw."""
        positions = summary.sample_positions(len(self), sample_size)
        table = self._take(self._physical_many(positions)) if len(positions) else \
            self._backends[0].schema.empty_table()
        return summary.summarize(table, self._features, len(self))

    # -- pickling: paths and indices, never open handles --------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = {"backends": self._backends, "features": self._features.to_dict(), "info": self._info.to_dict(),
                 "split": self._split, "indices": self._indices, "format": self._format}
        if self._transform is not None:
            state["transform"] = self._transform  # pickled by reference: a module-level function
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        features = Features.from_dict(state["features"])
        self.__init__(state["backends"], features=features,  # type: ignore[misc]
                      info=DatasetInfo.from_metadata(features, state["info"]), split=state["split"],
                      indices=state["indices"], format=state["format"])
        self._transform = state.get("transform")

    # -- index arithmetic ----------------------------------------------------------------
    def _physical(self, index: int) -> int:
        n = len(self)
        position = index + n if index < 0 else index
        if not 0 <= position < n:
            raise IndexError(f"index {index} is out of range for a dataset of {n} rows")
        return int(self._indices[position]) if self._indices is not None else position

    def _physical_many(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions)
        if positions.dtype == bool:
            if len(positions) != len(self):
                raise IndexError(f"boolean mask of length {len(positions)} for a dataset of {len(self)} rows")
            positions = np.flatnonzero(positions)
        if positions.size and positions.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {positions.dtype}")
        positions = positions.astype(np.int64, copy=False)
        n = len(self)
        if positions.size and (positions.min() < -n or positions.max() >= n):
            bad = positions[(positions < -n) | (positions >= n)][0]
            raise IndexError(f"index {bad} is out of range for a dataset of {n} rows")
        positions = np.where(positions < 0, positions + n, positions)
        return self._indices[positions] if self._indices is not None else positions

    def _raw_row(self, physical: int) -> dict[str, Any]:
        part = 0 if len(self._backends) == 1 else bisect.bisect_right(self._starts_list, physical) - 1
        row = self._backends[part].row(physical - self._starts_list[part])
        return row if self._media is None else resolve_media_row(row, self._features, self._media[part])

    def _backend_take(self, part: int, local: np.ndarray) -> pa.Table:
        table = self._backends[part].take(local)
        return table if self._media is None else resolve_media_paths(table, self._features, self._media[part])

    def _take(self, physical: np.ndarray) -> pa.Table:
        if len(self._backends) == 1:
            return self._backend_take(0, physical)
        return ordered_gather(physical, self._starts[:-1], self._backend_take, self._backends[0].schema)

    # -- formatting ----------------------------------------------------------------------
    def _format_row(self, raw: dict[str, Any]) -> dict[str, Any]:
        if self._raw_final:
            return raw
        row = {name: raw[name] if fn is None else fn(raw[name]) for name, fn in self._plan}
        if self._format.type == "numpy":
            return formatting.numpy_row(row)
        return to_torch(row, self._format.torch_dtype) if self._format.type == "torch" else row

    def _format_table(self, table: pa.Table) -> Any:
        """A table -> dict of columns (list or ndarray), or the table itself for "arrow"."""
        fmt = self._format
        names = list(fmt.columns or self._features)
        if fmt.type in TABLE_FORMATS:
            return table_output(table.select(names), fmt.type)
        columns = {}
        for name in names:
            feature = self._read_features[name]
            chunks = [feature.decode_array(chunk, numpy=fmt.numpy, decode=fmt.decode)
                      for chunk in table.column(name).chunks] or [feature.decode_array(
                          pa.array([], type=feature.arrow_type()), numpy=fmt.numpy, decode=fmt.decode)]
            if len(chunks) == 1:
                columns[name] = chunks[0]
            elif all(isinstance(c, np.ndarray) for c in chunks):
                columns[name] = np.concatenate(chunks)
            else:
                columns[name] = [v for c in chunks for v in c]
        if fmt.type == "torch":
            return {k: to_torch(v, fmt.torch_dtype) for k, v in columns.items()}
        return formatting.numpy_batch(columns) if fmt.type == "numpy" else columns

    def _rows_of_table(self, table: pa.Table) -> list[dict[str, Any]]:
        if self._format.type in TABLE_FORMATS:
            names = list(self._format.columns or self._features)
            return [table_output(table.slice(i, 1).select(names), self._format.type) for i in range(table.num_rows)]
        if self._raw_final:  # Python rows with nothing to decode: pyarrow's C++ conversion is the fastest
            return table.to_pylist()
        fmt = self._format
        names = list(fmt.columns or self._features)
        columns = []
        for name in names:
            feature = self._read_features[name]
            values = []
            for chunk in table.column(name).chunks:
                decoded = feature.decode_array(chunk, numpy=fmt.numpy, decode=fmt.decode)
                values.extend(decoded if not isinstance(decoded, np.ndarray) else list(decoded))
            columns.append(values)
        rows = [dict(zip(names, cells)) for cells in zip(*columns)]
        if fmt.type == "torch":
            return [to_torch(r, fmt.torch_dtype) for r in rows]
        return [formatting.numpy_row(r) for r in rows] if fmt.type == "numpy" else rows

    # -- access --------------------------------------------------------------------------
    @overload
    def __getitem__(self, key: int | np.integer) -> Row: ...

    @overload
    def __getitem__(self, key: str) -> list[Any] | np.ndarray: ...

    @overload
    def __getitem__(self, key: slice | Sequence[int] | range | np.ndarray) -> dict[str, Any]: ...

    def __getitem__(self, key: Any) -> Any:
        """A row for an int, a column for a name, a dict of columns for a slice or indices."""
        if self._transform is not None:
            return transformed_item(self, key)
        if type(key) is int and self._indices is None and 0 <= key < self._starts_list[-1] and \
                len(self._backends) == 1 and self._format.type not in TABLE_FORMATS and self._media is None:
            row = self._format_row(self._backends[0].row(key))  # the hot path, checked first
            return self._row_type(row) if self._row_type is not None else self._shown(row)
        if isinstance(key, (bool, np.bool_)):  # an int subclass: ds[True] would be row 1
            raise TypeError("cannot index a dataset with a bool; use an int, or a boolean mask as a list or array")
        if isinstance(key, (int, np.integer)):
            physical = self._physical(int(key))
            if self._format.type in TABLE_FORMATS:  # a one-row table (or DataFrame), as Hugging Face gives
                return self._format_table(self._take(np.array([physical])))
            return self._shown(self._format_row(self._raw_row(physical)))
        if isinstance(key, str):
            return self._column(key)
        if isinstance(key, slice):
            positions = range(len(self))[key]  # lazy: a slice of a 100M-row dataset allocates nothing per row
            if self._indices is None and positions.step == 1 and len(positions):
                return self._format_table(self._slice(positions[0], positions[-1] + 1))
            return self._format_table(self._take(self._physical_many(
                np.arange(positions.start, positions.stop, positions.step, dtype=np.int64))))
        if isinstance(key, (list, tuple, range, np.ndarray)) or (hasattr(key, "__array__") and hasattr(key, "__len__")):
            return self._format_table(self._take(self._physical_many(np.asarray(key))))  # a pandas Series too
        raise TypeError(f"cannot index a dataset with {type(key).__name__}")

    def _shown(self, row: Row) -> Row:
        """A row as `ds[i]` gives it: a dict that prints its images as `Image(32x32 RGB)` (see display)."""
        if self._format.type == "torch":
            return row
        if self._row_type is None:
            self._row_type = DisplayRow.for_features(self._features)
        return self._row_type(row)

    def __getitems__(self, keys: Sequence[int] | np.ndarray) -> list[Row]:
        """A list of rows, as torch's DataLoader asks for a batch of indices."""
        if self._transform is not None:
            return transformed_rows(self, keys)
        if self._format.type in TABLE_FORMATS:
            return [self[int(k)] for k in keys]
        physical = self._physical_many(np.asarray(keys, dtype=np.int64))
        if all(b.batched_reads for b in self._backends):  # one take, decoded column by column
            return self._rows_of_table(self._take(physical))
        physical = physical.tolist()
        if len(self._backends) == 1 and self._media is None:
            raw_rows = self._backends[0].rows(physical)
        else:
            raw_rows = [self._raw_row(p) for p in physical]
        if self._raw_final:
            return raw_rows
        return [self._format_row(r) for r in raw_rows]

    def _slice(self, start: int, stop: int) -> pa.Table:
        batches = [b for b in self._iter_physical_range(start, stop, max(stop - start, 1))]
        return pa.Table.from_batches(batches, schema=self._backends[0].schema)

    def _iter_physical_range(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        for part, backend in enumerate(self._backends):
            lo, hi = self._starts_list[part], self._starts_list[part + 1]
            if hi <= start or lo >= stop:
                continue
            for batch in backend.iter_batches(max(start, lo) - lo, min(stop, hi) - lo, batch_rows):
                if self._media is not None:
                    table = resolve_media_paths(pa.Table.from_batches([batch]), self._features, self._media[part])
                    batch = table.combine_chunks().to_batches()[0] if table.num_rows else batch
                yield batch

    # -- what streams, samplers, mixing and packing read (dataset/row_source.py) -------------
    def __row_source__(self) -> DatasetRowSource:
        """This view as `streaming.source.row_source` reads it: stored rows as Arrow, block and shard bounds,
        the files read in place (the `streaming.source` abilities), off the public surface."""
        return DatasetRowSource(self)

    def to_iterable(self, *, shuffle: bool = False, seed: int = 0, window_blocks: int = 8,
                    window_shards: int | None = None, max_block_rows: int | None = 8192, rank: int | None = None,
                    world_size: int | None = None, drop_last: bool = False, loader_batch_size: int | None = None,
                    rows: tuple[int, int] | None = None, lanes: bool = False) -> Any:
        """An iterable over these rows for training (streaming.StreamingDataset, whose options and defaults these are):
        bounded memory, seeded block shuffle, DDP ranks, workers, resume (docs/object-storage-and-streaming.md)."""
        from stable_datasets.streaming.iterable import StreamingDataset  # local: it imports torch

        return StreamingDataset(self, shuffle=shuffle, seed=seed, window_blocks=window_blocks,
                                window_shards=window_shards, max_block_rows=max_block_rows, rank=rank,
                                world_size=world_size, drop_last=drop_last, loader_batch_size=loader_batch_size,
                                rows=rows, lanes=lanes)

    def _column(self, name: str) -> Any:
        if name not in self._features:
            raise ColumnNotFoundError(f"no column {name!r}; columns are {list(self._features)}")
        return self.select_columns([name])._format_table(self._all_rows_table())[name]

    def _all_rows_table(self) -> pa.Table:
        if self._indices is None:
            return self._slice(0, len(self))
        return self._take(np.asarray(self._indices))

    def _iter_arrow(self, batch_size: int = ITER_BATCH_ROWS) -> Iterator[pa.Table]:
        """Stream the rows in order as Arrow tables of exactly `batch_size` rows (the last may be short)."""
        if self._indices is None:
            pending: list[pa.RecordBatch] = []
            held = 0
            for batch in self._iter_physical_range(0, len(self), batch_size):
                pending.append(batch)
                held += batch.num_rows
                if held >= batch_size:  # storage batches need not line up with the requested size
                    table = pa.Table.from_batches(pending)
                    for lo in range(0, held - held % batch_size, batch_size):
                        yield table.slice(lo, batch_size)
                    rest = held % batch_size
                    pending = table.slice(held - rest).to_batches() if rest else []
                    held = rest
            if held:
                yield pa.Table.from_batches(pending)
            return
        for lo in range(0, len(self._indices), batch_size):
            chunk = self._indices[lo:lo + batch_size]
            first, last = int(chunk[0]), int(chunk[-1])
            if last - first == len(chunk) - 1 and np.all(np.diff(chunk) == 1):
                yield self._slice(first, last + 1)
            else:
                yield self._take(chunk)

    def iter(self, batch_size: int, drop_last_batch: bool = False) -> Iterator[dict[str, Any]]:
        """Batches as dicts of columns (or Arrow tables in "arrow" format)."""
        for table in self._iter_arrow(batch_size):
            if drop_last_batch and table.num_rows < batch_size:
                return
            yield self._format_table(table)

    def __iter__(self) -> Iterator[Row]:
        if self._transform is not None:
            yield from transformed_iter(self)
            return
        if self._indices is not None and self._format.type not in TABLE_FORMATS and \
                not all(b.batched_reads for b in self._backends):
            # scattered rows (after shuffle or select) read fastest a batch at a time, as __getitems__ does
            for lo in range(0, len(self), ITER_BATCH_ROWS):
                yield from self.__getitems__(np.arange(lo, min(lo + ITER_BATCH_ROWS, len(self))))
            return
        for table in self._iter_arrow(ITER_BATCH_ROWS):
            yield from self._rows_of_table(table)

    # -- formats -------------------------------------------------------------------------
    def with_format(self, type: str | None = None, columns: Sequence[str] | None = None,
                    decode: bool = True, output_all_columns: bool = False, **format_kwargs: Any) -> StableDataset:
        """A view with another output format; `decode=False` returns stored bytes for images;
        `output_all_columns`/`dtype=` as Hugging Face's (see dataset.formatting)."""
        columns = formatting.format_columns(columns, self._features)
        fmt = format_of(type, columns, decode, self._format.video_decode, output_all_columns, format_kwargs)
        view = self._derive(format=fmt, keep_transform=False)
        view._transform = rest_as_python(fmt)
        return view

    def set_format(self, type: str | None = None, columns: Sequence[str] | None = None, decode: bool = True,
                   output_all_columns: bool = False, **format_kwargs: Any) -> None:
        self._adopt_format(self.with_format(type, columns, decode, output_all_columns, **format_kwargs))

    def _adopt_format(self, other: StableDataset) -> None:
        """In-place formatting: take the format and everything derived from it from `other`."""
        self._format, self._read_features = other._format, other._read_features
        self._plan, self._raw_final = other._plan, other._raw_final
        self._transform = other._transform

    def reset_format(self) -> None:
        """In place, as Hugging Face's: python rows of every column again (and no transform)."""
        self.set_format("python")

    def with_transform(self, transform: Callable[[dict[str, Any]], Any] | None, columns: Sequence[str] | None = None,
                       output_all_columns: bool = False) -> StableDataset:
        """A view whose rows and batches go through `transform` (a dict of columns -> a dict of
        columns) as they are read, as in Hugging Face; a row is a batch of one. `columns`: the
        columns it receives; `output_all_columns`: the other columns are returned too."""
        view = self._derive()
        view._transform = check_transform(self, transform, columns, output_all_columns)
        return view

    def set_transform(self, transform: Callable[[dict[str, Any]], Any] | None, columns: Sequence[str] | None = None,
                      output_all_columns: bool = False) -> None:
        self._adopt_format(self.with_transform(transform, columns, output_all_columns))

    # -- column operations (dataset/columns.py): views where the stored data does not change ----
    @property
    def backends(self) -> list[LayoutBackend]:
        """The layout backends serving this dataset's rows, one per cache (or column view of one)."""
        return list(self._backends)

    # -- transforms (the heavier ones live in dataset/transforms.py and mapping.py) -------
    def select(self, indices: Iterable[int] | np.ndarray | range) -> StableDataset:
        """Rows at `indices` (in that order), as a new view; any iterable of ints, a numpy array or a
        pandas Series, as in Hugging Face."""
        positions = hf_methods.positions(indices)
        if positions.size and (positions.min() < 0 or positions.max() >= len(self)):
            raise IndexError(f"select: indices must be in [0, {len(self)}), got range "
                             f"[{positions.min()}, {positions.max()}]")
        physical = self._indices[positions] if self._indices is not None else positions
        return self._derive(indices=physical)

    def shuffle(self, seed: int | None = None, generator: np.random.Generator | None = None, *,
                lazy: bool | None = None) -> StableDataset:
        """The rows in a seeded random order, as a view (no copy).

        Up to `LAZY_SHUFFLE_ROWS` rows (16.7M) the order is Hugging Face's, `np.random.default_rng(seed).permutation`,
        so a seed gives the rows HF gives. Above (or with `lazy=True`) it is a keyed bijection evaluated on demand
        (`dataset.keyed_shuffle`): the view holds a few numbers instead of 8 bytes a row, in every process it is
        pickled to, and a stream over it starts at once. `lazy=False` forces the permutation array. Seeds follow
        one rule for every shuffle (`streaming.seeds.check_seed`: an int in [0, 2**63), else a SeedError)."""
        n = len(self)
        if seed is not None:
            seed = check_seed(seed, "shuffle")  # one rule for the eager, lazy and stream shuffles
        if lazy is None:
            lazy = n > LAZY_SHUFFLE_ROWS
        if not lazy:
            rng = generator if generator is not None else np.random.default_rng(seed)
            return self.select(rng.permutation(n))
        return self._derive(indices=KeyedShuffle(n, shuffle_key(seed, generator), self._indices))

    def shard(self, num_shards: int, index: int, contiguous: bool = True) -> StableDataset:
        if not 0 <= index < num_shards:
            raise ValueError(f"shard index {index} is not in [0, {num_shards})")
        n = len(self)
        if contiguous:
            div, mod = divmod(n, num_shards)
            start = div * index + min(index, mod)
            return self.select(range(start, start + div + (1 if index < mod else 0)))
        return self.select(range(index, n, num_shards))

    def filter(self, function: Callable[..., Any], *, batched: bool = False, batch_size: int = 1000,
               with_indices: bool = False, input_columns: Sequence[str] | None = None,
               fn_kwargs: dict[str, Any] | None = None, num_proc: int | None = None,
               engine: str = "process") -> StableDataset:
        """Rows for which `function` is true, as a view; `num_proc` runs it in parallel ranges."""
        return self.select(filter_positions(self, function, batched=batched, batch_size=batch_size,
                                            with_indices=with_indices, input_columns=input_columns,
                                            fn_kwargs=fn_kwargs, num_proc=num_proc, engine=engine))

    def map(self, function: Callable[..., Any] | None = None, **kwargs: Any) -> StableDataset:
        return map_dataset(self, function, **kwargs)

    def train_test_split(self, test_size: float | int | None = None, train_size: float | int | None = None,
                         shuffle: bool = True, stratify_by_column: str | None = None,
                         seed: int | np.random.Generator | None = None,
                         generator: np.random.Generator | None = None) -> DatasetDict:
        """Hugging Face's split (its arguments, in its order); `generator=` (or a Generator as `seed`)
        draws the permutation."""
        if seed is not None and generator is not None:
            raise ValueError("Both `seed` and `generator` were provided. Please specify just one of them.")
        return train_test_split(self, test_size=test_size, train_size=train_size, shuffle=shuffle,
                                seed=generator if generator is not None else seed,
                                stratify_by_column=stratify_by_column)

    # -- Hugging Face Dataset methods made of the ones above (dataset/hf_methods.py) -------------
    # -- in memory and back (dataset/in_memory.py, dataset/hf_interop.py) ------------------
    from_dict = classmethod(in_memory.from_dict)
    from_list = classmethod(in_memory.from_list)
    from_pandas = classmethod(in_memory.from_pandas)
    from_arrow = classmethod(in_memory.from_arrow)
    from_generator = classmethod(in_memory.from_generator)
    from_hf = classmethod(hf_interop.from_hf)

