"""A batch of random packs from Parquet files, reading only the data pages that hold them.

pyarrow decodes whole row groups: under a full shuffle each pack costs one row-group decode,
in our reader and in Megatron-Bridge's alike. DataFusion's Parquet reader (arrow-rs) uses the
offset index instead: with `pack_id IN (...)` pushed into the scan it decodes the small
`pack_id` column, turns the matches into a row selection, and fetches and decompresses only
the pages of `input_ids`, `loss_mask` and `seq_start_id` that hold selected rows. That needs
what `write_packed_parquet` writes: a `pack_id` column equal to the row number in the file,
the page index, and data pages of about one pack. Files stay plain Parquet; readers that
know nothing of `pack_id` ignore the column.

A query costs a few milliseconds (planning, and reading `pack_id` of every row group), about the
decode of a row group of 30 packs, so files whose row groups are smaller than
`PAGE_MIN_GROUP_ROWS` packs keep the row-group path. On the files `write_packed_parquet` writes
(4 MiB row groups, ~230 packs) pages serve batches (`__getitems__`), runs of samples read in a
steady stride (read ahead in one query), and single packs. DataFusion is optional
(`pip install stable-datasets[pages]`); without it, or for files without a usable `pack_id`
column, reads fall back to the row-group path. DataFusion is imported on the first read, not
when a dataset is opened (the import costs ~0.7 s).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from loguru import logger

from stable_datasets.arrow.cells import cell_getter, primitive_view
from stable_datasets.errors import CacheError
from stable_datasets.sft.validate import bad_packs

PACK_ID = "pack_id"
#: the process whose DataFusion runtime (tokio threads) is running: a process forked from it after that
#: inherits the runtime without its threads, and a query there would wait forever
_RUNTIME_PID: int | None = None
#: data page size `write_packed_parquet` writes: about one pack of 4,096 delta-packed token ids
PAGE_BYTES = 8 << 10
#: files whose row groups hold fewer packs than this on average are read by row groups: decoding such a
#: group costs about what a query does (benchmarks/RESULTS.md, issue 13 part 14)
PAGE_MIN_GROUP_ROWS = 32


def datafusion_available() -> bool:
    """Whether DataFusion is installed, without importing it (its import costs ~0.7 s)."""
    return importlib.util.find_spec("datafusion") is not None


def pack_id_problem(path: str) -> str | None:
    """Why `path` cannot serve page reads (None when it can).

    `pack_id` must be exactly 0..rows-1 in file order: a query selects rows by its values,
    so a file whose ids were permuted or duplicated would return other packs. The column is
    small (delta-packed), so it is read and compared whole, once per file and process.
    """
    if any(c in path for c in "*?["):
        return "its path has glob characters, which DataFusion would expand"
    meta = pq.read_metadata(path)
    names = meta.schema.to_arrow_schema().names
    if PACK_ID not in names:
        return f"it has no {PACK_ID} column"
    column = names.index(PACK_ID)
    for g in range(meta.num_row_groups):
        if meta.row_group(g).num_rows and not meta.row_group(g).column(column).has_offset_index:
            return "it has no page index (offset index)"
    ids = pq.read_table(path, columns=[PACK_ID]).column(0).combine_chunks()
    view = primitive_view(ids) if pa.types.is_integer(ids.type) else None
    if view is None:
        return f"its {PACK_ID} column is not a null-free integer column ({ids.type})"
    if not np.array_equal(view, np.arange(meta.num_rows)):
        return f"its {PACK_ID} column is not the row number 0..{meta.num_rows - 1}"
    return None


class PackPages:
    """Page-level reads of packs from Parquet files (global pack numbers across the files).

    Pickling carries the paths only; each process makes its own DataFusion context and checks
    each file once, on its first batch from that file.
    """

    def __init__(self, paths: Sequence[str], file_rows: Sequence[int], columns: Sequence[str],
                 file_groups: Sequence[int] | None = None, min_group_rows: int = PAGE_MIN_GROUP_ROWS):
        self.paths = [str(p) for p in paths]
        self.columns = list(columns)
        self.file_starts = np.concatenate([[0], np.cumsum(np.asarray(file_rows, np.int64))]).astype(np.int64)
        groups = np.maximum(np.asarray(file_groups if file_groups is not None else [1] * len(self.paths)), 1)
        #: packs per row group of each file, on average (from the footers)
        self.group_rows = np.diff(self.file_starts) / groups
        self.min_group_rows = min_group_rows
        self._reset()

    @property
    def started(self) -> bool:
        """Whether this process has a DataFusion context for these files already."""
        return self._context is not None and self._pid == os.getpid()

    def small_groups(self, f: int) -> bool:
        """File `f` has row groups too small for a query to beat decoding them."""
        return bool(self.group_rows[f] < self.min_group_rows)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._context: Any = None
        self._usable: dict[int, bool] = {}
        self._datafusion: bool | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_pid", "_context", "_usable", "_datafusion")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def _session(self) -> Any:
        global _RUNTIME_PID
        if self._pid != os.getpid():
            self._reset()
        if self._context is None:
            from datafusion import SessionConfig, SessionContext

            _RUNTIME_PID = _RUNTIME_PID or self._pid

            config = (SessionConfig().with_target_partitions(1)
                      .set("datafusion.execution.parquet.pushdown_filters", "true")
                      .set("datafusion.execution.parquet.enable_page_index", "true"))
            self._context = SessionContext(config)
        return self._context

    def usable(self, files: Sequence[int]) -> bool:
        """Whether every file in `files` serves page reads (checked once per file and process)."""
        if self._pid != os.getpid():
            self._reset()
        if self._datafusion is None:
            self._datafusion = datafusion_available()
            if _RUNTIME_PID not in (None, self._pid):
                logger.warning("page-level reads are off in process {}: it was forked after DataFusion started in "
                               "process {}, and its runtime does not survive a fork; batches read row groups instead "
                               "(use a 'spawn' or 'forkserver' DataLoader context, or read batches only in workers)",
                               self._pid, _RUNTIME_PID)
                self._datafusion = False
        if not self._datafusion:
            return False
        for f in files:
            if f not in self._usable:
                problem = (f"its row groups hold {self.group_rows[f]:.0f} packs on average (< {self.min_group_rows})"
                           if self.small_groups(f) else pack_id_problem(self.paths[f]))
                if problem is None:
                    self._session().register_parquet(f"f{f}", self.paths[f],
                                                     file_extension=os.path.splitext(self.paths[f])[1])
                else:
                    logger.debug("{}: no page-level reads, row groups instead: {}", self.paths[f], problem)
                self._usable[f] = problem is None
            if not self._usable[f]:
                return False
        return True

    def files_of(self, packs: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.file_starts, packs, side="right") - 1

    def read(self, packs: np.ndarray) -> tuple[list[dict[str, Any]], list[bool]]:
        """The rows of `packs` (global numbers, any order, repeats allowed) in that order, and their
        validation flags (`validate.bad_packs` over the packs read, as `BlockChecks` computes them
        over a row group: each flag depends on its own pack only).

        Each row is what the row-group path returns for it (the same cell getters), so the
        dataset's validation and conversion see identical values.
        """
        packs = np.asarray(packs, np.int64)
        files = self.files_of(packs)
        rows: list[Any] = [None] * len(packs)
        flags: list[bool] = [False] * len(packs)
        for f in np.unique(files):
            where = np.flatnonzero(files == f)
            local = packs[where] - self.file_starts[f]
            wanted = np.unique(local)
            batch = self._query(int(f), wanted)
            getters = [cell_getter(batch.column(j)) for j in range(batch.num_columns)]
            names = batch.schema.names
            bad = bad_packs(batch.column("input_ids"), batch.column("loss_mask"), batch.column("seq_start_id"))
            for at, k in zip(where.tolist(), np.searchsorted(wanted, local).tolist()):
                rows[at] = {name: get(k) for name, get in zip(names, getters)}
                flags[at] = bool(bad[k])
        return rows, flags

    def _query(self, f: int, wanted: np.ndarray) -> pa.RecordBatch:
        """Rows `wanted` (sorted, unique local row numbers) of file `f`, in that order."""
        listed = ",".join(map(str, wanted.tolist()))
        sql = f"SELECT {PACK_ID}, {', '.join(self.columns)} FROM f{f} WHERE {PACK_ID} IN ({listed})"
        try:
            table = self._session().sql(sql).to_arrow_table()
        except Exception as exc:  # DataFusion raises its own exception types for IO and decode faults
            raise CacheError(f"{self.paths[f]}: pages of {len(wanted)} packs cannot be read "
                             f"({type(exc).__name__}: {exc}); the file is damaged or changed") from None
        ids = table.column(PACK_ID).to_numpy()
        if len(ids) != len(wanted) or not np.array_equal(np.sort(ids), wanted):
            raise CacheError(f"{self.paths[f]}: asked for {len(wanted)} packs by {PACK_ID}, got {len(ids)} rows "
                             "with other ids; the file changed since it was checked")
        table = table.select(self.columns).combine_chunks()
        order = np.argsort(ids, kind="stable")
        if not np.array_equal(order, np.arange(len(order))):
            table = table.take(pa.array(order))
        return table.to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], schema=table.schema)
