"""A stream's lazy verbs, Hugging Face's `IterableDataset` names: `shuffle`, `take`, `skip`, `map`, `filter`,
`batch`, `with_format`. Each returns a new stream (epoch 0, nothing consumed) and keeps exact resume: `take`/`skip`
cut each epoch's order by position, before the ranks split it; maps and filters run in the reading process, on
rows in the format they were added in (`_row_as`).

`StreamVerbs` is a mixin of `StreamingDataset` (streaming/iterable.py keeps the order, the passes, the state and
the iteration).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stable_datasets.streaming import source as sources

if TYPE_CHECKING:
    from stable_datasets.streaming.iterable import StreamingDataset

#: formats whose rows are tables: a map or filter added in one receives one-row tables (see `_table_format`)
TABLE_FORMATS = ("arrow", "pandas")


def _row_as(row: Any, wanted: str | None, dataset: Any, source: Any) -> Any:
    """A row (a one-row Arrow table or pandas DataFrame, or a dict) as `wanted`: "arrow", "pandas", or None: the
    stream's own format (`dataset`'s, rows made by its row source); turned through Arrow when its kind differs."""
    own = ((dataset.format if isinstance(dataset, sources.Formatted) else None) or {}).get("type")
    wanted = wanted or (own if own in TABLE_FORMATS else None)
    if wanted is None and not isinstance(row, (pa.Table, pa.RecordBatch)) and not _is_frame(row):
        return row  # (a row of the stream's format, or whatever a map returned: a tuple, a tensor...)
    if (wanted == "arrow" and isinstance(row, pa.Table)) or (wanted == "pandas" and _is_frame(row)):
        return row
    if isinstance(row, pa.RecordBatch):
        row = pa.Table.from_batches([row])
    elif isinstance(row, dict):
        row = pa.Table.from_pylist([row])
    elif _is_frame(row):
        row = pa.Table.from_pandas(row, preserve_index=False)
    elif not isinstance(row, pa.Table):
        raise TypeError(f"a map in the arrow or pandas format must return a pyarrow Table, a pandas DataFrame or a "
                        f"dict, got {type(row).__name__}")
    if wanted == "arrow":
        return row
    if wanted == "pandas":
        return row.to_pandas()
    features = sources.features_of(dataset)
    added = [name for name in row.column_names if features is not None and name not in features]
    if not added:
        return source.rows_from_arrow(row)[0]
    known = source.rows_from_arrow(row.drop_columns(added))[0] if len(added) < row.num_columns else {}
    new = row.select(added).to_pylist()[0]  # columns a map added: the format knows no feature of theirs
    return {name: new[name] if name in new else known[name] for name in row.column_names if name in new or
            name in known}


def _is_frame(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and hasattr(value, "iloc")


class StreamVerbs:
    """`StreamingDataset`'s lazy verbs (they build the new stream with its `_with`)."""

    def shuffle(self, seed: int = 0, window_blocks: int = 8, window_shards: int | None = None, *,
                buffer_size: int | None = None) -> StreamingDataset:
        """The block shuffle (see streaming.order): blocks permuted, rows permuted within windows; with
        `window_shards` k, shards permuted and blocks only within windows of k shards (None: the stream's own,
        e.g. the window of units a stream of data files is opened with).

        `buffer_size` (Hugging Face's name) bounds the shuffle window in rows instead: blocks are cut to at
        most `buffer_size` rows and a window holds as many whole blocks as fit. Unlike a shuffle buffer the
        order is a function of (seed, epoch), so a resume is exact."""
        if self._options["rows"] is not None:
            return self._stretch_as_dataset().shuffle(seed, window_blocks, window_shards, buffer_size=buffer_size)
        if window_shards is None:
            window_shards = self._options["window_shards"]
        if buffer_size is None:
            return self._with(shuffle=True, seed=seed, window_blocks=window_blocks, window_shards=window_shards)
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
        block = min(buffer_size, self._options["max_block_rows"] or buffer_size)
        return self._with(shuffle=True, seed=seed, window_blocks=max(1, buffer_size // block),
                          window_shards=window_shards, max_block_rows=block)

    def _stretch_as_dataset(self) -> StreamingDataset:
        """This stream's stretch of rows (take/skip of the stored order) as a stream over a dataset of just those
        rows, which a shuffle then permutes (Hugging Face's `take(n).shuffle()`: a shuffle of the rows taken)."""
        select = self.dataset.select if isinstance(self.dataset, sources.Selectable) else None
        if self._options["shuffle"] or select is None:
            what = "a shuffled order" if self._options["shuffle"] else f"a {type(self.dataset).__name__}"
            raise ValueError(f"shuffle() after take()/skip() shuffles the rows kept, which needs the rows in stored "
                             f"order of a dataset that can select them; this stream cuts {what}: call shuffle() "
                             "before take()/skip()")
        lo, hi = self._range
        return self._with(select(range(lo, hi)), rows=None)

    def _cut(self, lo: int, hi: int) -> StreamingDataset:
        if self.filtered:
            raise ValueError("call take()/skip() before filter(): they cut the order by position, so that a resume "
                             "stays exact, and after a filter the n-th row kept has no position known in advance")
        base = self._range[0]
        return self._with(rows=(base + lo, base + hi))  # (a map keeps one row per row: the cut moves before it)

    def take(self, n: int) -> StreamingDataset:
        """The first `n` rows of each epoch's order (before the ranks split it), so resume stays exact."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"take() needs a non-negative int, got {n!r}")
        return self._cut(0, min(n, self.length))

    def skip(self, n: int) -> StreamingDataset:
        """Each epoch's order without its first `n` rows."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"skip() needs a non-negative int, got {n!r}")
        return self._cut(min(n, self.length), self.length)

    def map(self, function: Callable[[Any], Any]) -> StreamingDataset:
        """Apply `function` to every row (or batch, after `batch()`), lazily, in the reading process."""
        other = self._with()
        other._ops.append(("map", function, self._table_format()))
        return other

    def _table_format(self) -> str | None:
        """"arrow" or "pandas" when rows are served as tables now (a map or filter added now receives a one-row table
        of that kind whatever the format later, as Hugging Face's do), else None (it receives the rows served)."""
        fmt = self.dataset.format if isinstance(self.dataset, sources.Formatted) else None
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        return kind if kind in TABLE_FORMATS and self.batch_size is None else None

    def filter(self, function: Callable[[Any], bool]) -> StreamingDataset:
        """Keep the rows for which `function(row)` is true, lazily, in the reading process.

        The state then counts rows of the order read (kept or not), per rank: ranks no longer consume
        the same rows per step, so a filtered stream resumes exactly on the same rank and world size
        (a change is refused), in this process, or through torchdata's StatefulDataLoader."""
        if self.batch_size is not None:
            raise ValueError("call filter() before batch(): a filter after batch() would receive whole batches")
        other = self._with()
        other._ops.append(("filter", function, self._table_format()))
        return other

    def with_format(self, format: str | None = None, **kwargs: Any) -> StreamingDataset:
        """The same stream, rows in another format ("python", "numpy", "torch", "arrow"), as the dataset's."""
        if not isinstance(self.dataset, sources.Formatted):
            raise TypeError(f"with_format needs a dataset that has formats (a StableDataset), got "
                            f"{type(self.dataset).__name__}")
        return self._with(self.dataset.with_format(format, **kwargs))

    @property
    def filtered(self) -> bool:
        """Whether a filter drops rows (then the state is per rank, see `filter`)."""
        return any(kind == "filter" for kind, _, _ in self._ops)

    def batch(self, batch_size: int, *, drop_last_batch: bool = False,
              collate_fn: Callable[[list[Any]], Any] | None = None) -> StreamingDataset:
        """Yield batches of `batch_size` rows: a StableDataset's format as columns (one Arrow read and
        decode per batch), or `collate_fn(rows)`. Use `DataLoader(stream, batch_size=None)` then."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if self._ops:
            raise ValueError("call batch() before map() and after no filter(): a map after batch() receives whole "
                             "batches, and a filter cannot keep batches whole")
        other = self._with()
        other.batch_size, other.drop_last_batch, other.collate_fn = batch_size, drop_last_batch, collate_fn
        return other

    def row_maps(self) -> list[Callable[[Any], Any]]:
        """The functions `map()` applies to each row, in order (a mix applies them where it reads the row)."""
        if self.filtered:
            raise ValueError("a mixed source cannot filter (the mix draws its rows by position); filter the mix")
        if any(fmt for _, _, fmt in self._ops):
            raise ValueError("a mixed source cannot map in the arrow or pandas format (the mix reads rows); map the "
                             "mix")
        return [function for _, function, _ in self._ops]

    def _apply_ops(self, row: Any) -> tuple[bool, Any]:
        """(kept, row) after the maps and filters, each given the row as it asked (`_table_format`), then the row in
        the stream's format."""
        for kind, function, wanted in self._ops:
            row = _row_as(row, wanted, self.dataset, self.source)
            if kind == "map":
                row = function(row)
            elif not function(row):
                return False, None
        return True, _row_as(row, None, self.dataset, self.source)
