"""Streams of data files read where they lie: `load_dataset(<loader>, data_files=..., streaming=True)`.

No cache is built. A split's files are cut into units (a line-based file into byte ranges of about
`UNIT_BYTES` at line ends, a Parquet file into runs of row groups, any other file whole), and each
unit's rows are counted once when the stream opens: from metadata (Parquet, Arrow), by counting
lines (JSON Lines, text, CSV without quotes), from the member headers of a WebDataset tar (nothing
decoded), else by parsing it; the counts are kept per node
(loaders.file_counts), so the other ranks of the node and a restart count nothing. A unit is read, parsed and cast
to the features by its loader's own `read_piece` (so every parse error, and every cast error
naming file and column, is the loader's) only when the stream's order reaches it, and a few recent
units are held.

The units become a backend (`FileBackend`): the rows of one split laid end to end, each unit a
block. A `StableDataset` over it is a stream like any cache's (`streaming.StreamingDataset`): the
block order, ranks and workers, exact and elastic resume, and the verbs all come from there. The
backend lists its files with their identity (the dataset's row source says them: dataset/row_source.py), so
the state is the cache stream's (epoch, rows consumed) plus the files: a file changed, added or removed since a state
was saved is refused, naming the file. A unit whose file changed while it is being streamed is
refused when it is read. A shuffle reads windows of WINDOW_UNITS units (the stream is opened with
`window_shards=WINDOW_UNITS`; each unit a shard), so each unit is parsed once per epoch by a reader;
the stream is opened with lanes (streaming.order.Lanes), so each rank x worker reads its own stretch
of the epoch and a unit is parsed by about one of them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stable_datasets.arrow.cells import table_rows
from stable_datasets.arrow.tables import ordered_gather
from stable_datasets.cache.content_hashes import ContentHashes
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.cache.publish import file_sha256
from stable_datasets.dataset.row_source import SOURCE_FILES_KEY
from stable_datasets.errors import EncodingError, ExampleError
from stable_datasets.features.features import Features
from stable_datasets.identity.inputs import files_identity
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.loaders.arrow_files import open_ipc
from stable_datasets.loaders.base import FileLoader
from stable_datasets.loaders.columns import LoaderError
from stable_datasets.loaders.file_counts import UnitCounts, counting_key, node_counts
from stable_datasets.loaders.webdataset_files import count_samples
from stable_datasets.urls import is_url, local_path_text

#: threads counting the rows of the units when a stream opens (file reads and numpy scans release the GIL)
COUNT_THREADS = max(1, min(8, os.cpu_count() or 1))
#: a line-based file (JSON Lines, text, CSV) is read in units of about this many bytes
UNIT_BYTES = 8 << 20
#: parsed units held at once (the stream's reader holds the windows it serves besides)
HELD_UNITS = 16
#: bytes of parsed units held at once, at most (one larger unit is still held alone)
HELD_BYTES = 256 << 20
#: units a shuffled stream reads at a time by default (units permuted; rows mixed within such a window)
WINDOW_UNITS = 8
#: the name the backend gives itself in `CacheMetadata.layout` (it is no stored layout)
LAYOUT = "data_files"
#: bytes that are whitespace to JSON Lines (a line of them only is skipped)
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\r\n\f\v")] = True


@dataclass(frozen=True)
class FileUnit:
    """Rows `rows` of one data file: the whole file (start, stop None) or a range (bytes, row groups)."""

    path: str  # the local path read (absolute: a later os.chdir changes nothing)
    source: str  # the file as the user named it (a webdataset's __url__, as a built cache has it)
    start: int | None
    stop: int | None
    rows: int
    name: str  # the file as states and messages name it: its absolute path when the stream opened, or its URL

    def piece(self) -> list[Any]:
        return [self.path, self.start, self.stop, self.source]


def file_stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as exc:
        raise LoaderError(f"{path}: cannot read the data file ({exc.strerror or exc})") from None


def file_identity(path: str) -> list[int]:
    """[size, mtime in ns] of a local file: what says it is unchanged (with input_identity="stat")."""
    stat = file_stat(path)
    return [stat.st_size, stat.st_mtime_ns]


def content_key(stat: os.stat_result, digest: str) -> list[Any]:
    """[ctime_ns, inode, "sha256:..."] of a local file read with input_identity="sha256": any write moves its ctime
    (which, unlike mtime, cannot be set back) or its inode, and only then is its content hashed again."""
    return [stat.st_ctime_ns, stat.st_ino, f"sha256:{digest}"]


class FileBackend(LayoutBackend):
    """The rows of one split's data files, read a unit at a time by their loader (see the module docstring)."""

    batched_reads = True

    def __init__(self, loader: FileLoader, split: str, units: list[FileUnit], identities: dict[str, list[int]],
                 named: dict[str, list[Any]] | None = None, contents: dict[str, list[Any]] | None = None):
        self.loader = loader
        self.split = split
        self.units = units
        #: local path -> [size, mtime_ns] when the stream was opened (checked before each unit is read)
        self.identities = identities
        #: file as named -> its identity for a saved state: a local file's [size, mtime_ns] (with
        #: input_identity="sha256": [size, "sha256:..."]), a remote one's [size, digest of its ETag or content]
        #: (its downloaded copy's mtime says nothing)
        self.named = named or {}
        #: local path -> `content_key` when the stream was opened, with input_identity="sha256"
        self.contents = contents or {}
        self.features: Features = loader.features
        self._schema = self.features.arrow_schema
        self._starts = np.concatenate([[0], np.cumsum([u.rows for u in units])]).astype(np.int64)
        self._held: OrderedDict[int, pa.Table] = OrderedDict()
        metadata = CacheMetadata(layout=LAYOUT, features=self.features.to_dict(), num_rows=int(self._starts[-1]),
                                 shards=[], fingerprint=self.identity(), builder_name=loader.builder_name(),
                                 config_name=loader.config.name, split=split,
                                 extra={SOURCE_FILES_KEY: [[name, *identity] for name, identity in self.sources()]})
        first = units[0].path if units else "."
        super().__init__(Path(first).absolute().parent, metadata)
        self._pin = None

    def identity(self) -> str:
        """A hash of what decides the rows: the loader, its config, the features, every file and its identity."""
        described = [self.loader.builder_name(), json.dumps(parse_options(self.loader), sort_keys=True, default=str),
                     self.features.to_dict(), [[u.name, u.start, u.stop, u.rows] for u in self.units],
                     self.sources()]  # a remote file by its ETag: its downloaded copy's mtime says nothing
        return hashlib.sha256(json.dumps(described, default=str).encode()).hexdigest()[:16]

    def sources(self) -> list[tuple[str, list[Any]]]:
        """(file as named, its identity) of every file, in order."""
        seen: dict[str, list[Any]] = {}
        for unit in self.units:
            seen.setdefault(unit.name, self.named.get(unit.source) or self.identities[unit.path])
        return list(seen.items())

    # -- the backend contract -----------------------------------------------------------------
    def _open(self) -> None:
        self._held = OrderedDict()  # a forked worker parses its own units

    def __getstate__(self) -> dict[str, Any]:
        return {"loader": self.loader, "split": self.split, "units": self.units, "identities": self.identities,
                "named": self.named, "contents": self.contents}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["loader"], state["split"], state["units"], state["identities"],  # type: ignore[misc]
                      state["named"], state.get("contents"))

    @property
    def num_rows(self) -> int:
        return int(self._starts[-1])

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def block_bounds(self) -> np.ndarray:
        return np.unique(self._starts)

    def shard_bounds(self) -> np.ndarray | None:
        """Where each unit's rows begin: a shuffled stream permutes units and reads a window of a few at a time
        (the stream is opened with `window_shards=WINDOW_UNITS`), so each unit is parsed once per epoch."""
        return np.unique(self._starts)

    def stored_row_counts(self) -> tuple[int, int]:
        return self.num_rows, self.num_rows

    def stored_column_order(self) -> list[str] | None:
        return list(self.features)

    def row(self, index: int) -> dict[str, Any]:
        return self.rows([index])[0]

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        return table_rows(self.take(np.asarray(indices, dtype=np.int64)))

    def take(self, indices: np.ndarray) -> pa.Table:
        return ordered_gather(np.asarray(indices, dtype=np.int64), self._starts[:-1], self._gather, self._schema)

    def slice(self, start: int, stop: int) -> pa.Table:
        pieces = [self.unit_table(u).slice(lo, hi - lo) for u, lo, hi in self._covering(start, stop)]
        if not pieces:
            return self._schema.empty_table()
        return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        for unit, lo, hi in self._covering(start, stop):
            table = self.unit_table(unit).slice(lo, hi - lo)
            yield from (b for b in table.to_batches(max_chunksize=max(batch_rows, 1)) if b.num_rows)

    def _covering(self, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
        """(unit, first local row, end local row) of the units rows [start, stop) lie in."""
        if stop <= start:
            return
        first = int(np.searchsorted(self._starts, start, side="right")) - 1
        for unit in range(first, len(self.units)):
            lo, hi = int(self._starts[unit]), int(self._starts[unit + 1])
            if lo >= stop:
                break
            if hi > lo:
                yield unit, max(start, lo) - lo, min(stop, hi) - lo

    def _gather(self, unit: int, local: np.ndarray) -> pa.Table:
        table = self.unit_table(unit)
        if len(local) and local[-1] - local[0] == len(local) - 1 and np.all(np.diff(local) == 1):
            return table.slice(int(local[0]), len(local))
        return table.take(pa.array(local, pa.int64()))

    # -- reading units --------------------------------------------------------------------------
    def unit_table(self, index: int) -> pa.Table:
        """Unit `index` parsed and cast to the features (held while it is among the recent ones)."""
        self.ensure_open()
        table = self._held.get(index)
        if table is not None:
            self._held.move_to_end(index)
            return table
        unit = self.units[index]
        if self.changed(unit.path):
            raise LoaderError(f"{unit.name}: the file changed while it was streamed (its size, modification time "
                              "or content differs from when the stream was opened); open the stream again")
        try:
            table = read_unit(self.loader, unit, self._schema)
        except ExampleError as exc:  # as the build names it: builder, split, example key and field
            raise ExampleError(exc.builder, self.split, exc.key, exc.field, exc.message) from None
        if table.num_rows != unit.rows:
            if self.changed(unit.path):
                raise LoaderError(f"{unit.name}: {_range_text(unit)}holds {table.num_rows} rows, {unit.rows} when "
                                  "the stream was opened; the file changed while it was streamed (open the stream "
                                  "again)")
            forget_counts(self.loader, unit.path)  # the next open counts the file again
            raise LoaderError(f"{unit.name}: {_range_text(unit)}holds {table.num_rows} rows as the loader reads it, "
                              f"but {unit.rows} were counted when the stream opened, and the file has not changed "
                              "since: the count was wrong (its remembered count is dropped; open the stream again, "
                              "and please report this file's shape)")
        self._held[index] = table
        while len(self._held) > HELD_UNITS or (len(self._held) > 1 and
                                                sum(t.nbytes for t in self._held.values()) > HELD_BYTES):
            self._held.popitem(last=False)
        return table


    def changed(self, path: str) -> bool:
        """Whether a local file differs from when the stream opened: its size or mtime, or, with
        input_identity="sha256", its content (hashed again only when its ctime or inode moved; a file touched
        or rewritten with the same bytes is still the same)."""
        stat = file_stat(path)
        if [stat.st_size, stat.st_mtime_ns] != self.identities[path]:
            return True
        opened = self.contents.get(path)
        if opened is None or [stat.st_ctime_ns, stat.st_ino] == opened[:2]:
            return False
        now = content_key(stat, file_sha256(Path(path)))
        if now[2] != opened[2]:
            return True
        self.contents[path] = now
        return False


def _range_text(unit: FileUnit) -> str:
    return "" if unit.start is None else f"[{unit.start}:{unit.stop}] "


def read_unit(loader: FileLoader, unit: FileUnit, schema: pa.Schema) -> pa.Table:
    """One unit's rows, parsed and cast to the features by the loader (one single-chunk table)."""
    if loader.read_tables:
        tables = list(loader.read_piece(unit.piece()[:3]))
    else:  # media and tars: (key, example) pairs, encoded by the features as the write path does
        features = loader.features
        rows = []
        for key, example in loader.examples_of_piece(unit.piece()):
            try:
                rows.append(features.encode(example, ""))
            except EncodingError as exc:  # the stream's split is filled in by FileBackend.unit_table
                raise ExampleError(loader.builder_name(), "", key, exc.field, exc.message) from None
        tables = [pa.Table.from_pylist(rows, schema=schema)]
    tables = [t.select(schema.names) if t.schema.names != schema.names else t for t in tables]
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return table.combine_chunks() if any(c.num_chunks > 1 for c in table.columns) else table


# -- counting rows -----------------------------------------------------------------------------------
def unit_pieces(loader: FileLoader, path: str) -> list[tuple[list[Any], int | None]]:
    """A file's units with their rows where metadata tells them (else None): runs of Parquet row groups of
    about UNIT_BYTES, byte ranges of about UNIT_BYTES at line ends (`piece_ranges`, as parallel builds cut
    files), or the whole file."""
    if not loader.read_tables:
        return [([path, None, None], None)]
    if loader.name == "parquet":
        metadata = pq.ParquetFile(path).metadata
        units: list[tuple[list[Any], int | None]] = []
        first, rows, size = 0, 0, 0
        for group in range(metadata.num_row_groups):
            rows += metadata.row_group(group).num_rows
            size += metadata.row_group(group).total_byte_size
            if size >= UNIT_BYTES or group == metadata.num_row_groups - 1:
                units.append(([path, first, group + 1], rows))
                first, rows, size = group + 1, 0, 0
        return units or [([path, None, None], 0)]
    parts = max(1, -(-os.path.getsize(path) // UNIT_BYTES))
    pieces = loader.piece_ranges(path, parts) if parts > 1 else [[path, None, None]]
    return [(piece, None) for piece in pieces or [[path, None, None]]]


def unit_extent(loader: FileLoader, path: str) -> int:
    """What a file's range units tile, from 0: a Parquet file's row groups (from its footer), else its bytes."""
    if loader.name == "parquet":
        return pq.ParquetFile(path).metadata.num_row_groups
    return os.path.getsize(path)


def count_rows(loader: FileLoader, piece: list[Any]) -> int:
    """Rows of one piece: from metadata or by counting lines where the format allows, else by parsing it."""
    path, start, stop = piece[:3]
    name = loader.name
    if name == "parquet":
        metadata = pq.ParquetFile(path).metadata
        groups = range(metadata.num_row_groups) if start is None else range(start, stop)
        return sum(metadata.row_group(g).num_rows for g in groups)
    if name == "arrow":
        source, _, batches = open_ipc(path)
        try:
            return sum(b.num_rows for b in batches)
        finally:
            source.close()
    counted = _count_lines(loader, path, start, stop)
    if counted is not None:
        return counted
    if name == "webdataset" and start is None:
        return count_samples(path)
    if not loader.read_tables:
        return sum(1 for _ in loader.examples_of_piece([path, start, stop]))
    return sum(t.num_rows for t in loader.read_piece([path, start, stop], conform=False))


def _count_lines(loader: FileLoader, path: str, start: int | None, stop: int | None) -> int | None:
    """Rows of JSON Lines, plain CSV or text-by-line counted without parsing; None where only parsing can tell."""
    config = loader.config
    if getattr(config, "encoding", "utf-8").lower().replace("_", "-") not in ("utf-8", "utf8", "ascii"):
        return None
    if loader.name == "json" and getattr(config, "field", None) is None:
        data = _read_range(path, start, stop)
        if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b""):
            return None if data.strip() else 0  # a document (an array) is parsed
        counted = count_records(data)
        if counted is not None:
            return counted
        try:  # records over several lines or sharing one: only the parser counts them
            return sum(t.num_rows for t in loader.read_piece([path, start, stop], conform=False))
        except LoaderError:  # a bad line: counted as lines, the unit raises the loader's error when it is read
            return count_records(data, whole=False)
    if loader.name == "csv" and _plain_csv(config):
        data = _read_range(path, start, stop)
        if b"\r" in data or (config.quotechar and config.quotechar.encode() in data):
            return None  # quoted values may hold line breaks, and "\r" alone ends a line: the parser decides
        array = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(array == 10)
        lines = len(ends) + (1 if len(data) and data[-1:] != b"\n" else 0)
        empty = int(np.count_nonzero(np.diff(ends) == 1)) + (1 if len(ends) and ends[0] == 0 else 0)
        return max(lines - empty - (0 if start else 1), 0)  # the header line is the first of the file
    if loader.name == "text" and getattr(config, "sample_by", "line") == "line":
        data = _read_range(path, start, stop)
        if b"\r" in data:
            return None  # universal newlines: the loader decides
        return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return None


def count_records(data: bytes, whole: bool = True) -> int | None:
    """Records of JSON Lines counted without parsing: its lines holding more than whitespace, when each of them is
    one whole object (it starts with "{" and ends with "}", and no "}" is followed by "{" on a line); None when
    records may span lines or share one (pretty-printed objects, "{...} {...}"), which only parsing counts. In
    valid JSON a line that ends with "}" inside a record is followed by ",", "}" or "]", so lines that start with
    "{" and end with "}" are one record each. One vectorized pass; lines that start or end with whitespace are
    looked at one by one. `whole=False`: the lines holding more than whitespace, whatever they hold."""
    array = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(array == 10)
    starts, stops = np.concatenate([[0], newlines + 1]), np.append(newlines, len(array))
    if starts[-1] == len(array):  # data ending with a line end: no line after it
        starts, stops = starts[:-1], stops[:-1]
    filled = stops > starts
    loose = ~filled
    loose[filled] = _WHITESPACE[array[starts[filled]]] | _WHITESPACE[array[stops[filled] - 1]]
    tight = ~loose
    if whole and not (np.all(array[starts[tight]] == ord("{")) and np.all(array[stops[tight] - 1] == ord("}"))):
        return None
    records = int(np.count_nonzero(tight))
    for lo, hi in zip(starts[loose].tolist(), stops[loose].tolist()):
        line = data[lo:hi].strip()
        if line:
            if whole and (line[:1] != b"{" or line[-1:] != b"}"):
                return None
            records += 1
    if whole and _OBJECTS_ON_ONE_LINE.search(data):
        return None
    return records


#: a "}" followed on its line by "{": two records on one line (or, rarely, text in a string; then it is parsed)
_OBJECTS_ON_ONE_LINE = re.compile(rb"}[ \t\r\f\v]*{")


def _plain_csv(config: Any) -> bool:
    """A CSV whose records are its non-empty lines after one header line (no skipped rows, names or escapes)."""
    return (config.skiprows == 0 and config.header in ("infer", 0) and not (config.column_names or config.names)
            and config.escapechar is None)


def _read_range(path: str, start: int | None, stop: int | None) -> bytes:
    with open(path, "rb") as fh:
        if start:
            fh.seek(start)
        return fh.read() if stop is None else fh.read(stop - (start or 0))


def forget_counts(loader: FileLoader, path: str) -> None:
    """Drop the node's remembered units of `path` (they disagreed with what the loader reads)."""
    with node_counts(counting_key(loader.name, parse_options(loader), UNIT_BYTES)) as known:
        known.forget(path)


def parse_options(loader: FileLoader) -> dict[str, Any]:
    """The loader's config fields that decide how its files are cut and parsed (not which files, nor the features):
    both the stream's identity and the node's remembered row counts are keyed by them, so they change together."""
    return {k: v for k, v in vars(loader.config).items() if k not in ("features", "data_files", "data_dir")}


def open_file_backends(loader: FileLoader, splits: list[str] | None = None) -> dict[str, FileBackend]:
    """split -> the backend of its data files (rows counted; nothing parsed beyond what counting needs). Counts
    are remembered per node (loaders.file_counts): the other ranks of the node, and a restart, count nothing."""
    files = loader.data_files()
    loader.features  # noqa: B018  (inferred once here, not by the counting threads at once)
    wanted = list(files) if splits is None else splits
    for split in wanted:
        if split not in files:
            raise ValueError(f"unknown split {split!r}; the data files have splits {list(files)}")
    backends = {}
    with node_counts(counting_key(loader.name, parse_options(loader), UNIT_BYTES)) as known:
        for split in wanted:
            backends[split] = _open_split(loader, split, files[split], known)
    return backends


def _open_split(loader: FileLoader, split: str, sources: list[str], known: UnitCounts) -> FileBackend:
    identities: dict[str, list[int]] = {}
    named: dict[str, list[Any]] = {}
    contents: dict[str, list[Any]] = {}
    by_content = getattr(loader.config, "input_identity", "stat") == "sha256"
    pieces: list[tuple[str, list[Any], int | None]] = []
    names = {source: source if is_url(source) else os.path.abspath(local_path_text(source)) for source in sources}
    counted_as: dict[str, list[Any]] = {}
    for source in sources:
        if loader.is_companion(source):
            continue
        path = os.path.abspath(loader.local_file(source))  # read from here whatever the working folder becomes
        identities[path] = file_identity(path)
        if is_url(source):
            summary = files_identity([source], cache_root=loader.cache_root)
            named[source] = [identities[path][0], summary["sha256"][:16]]
        elif by_content:  # a same-size, same-mtime edit is another file, when opened, mid-epoch and on resume
            named[source], contents[path] = content_identities(loader, names[source], path)
        counted_as[path] = [*identities[path], *named.get(source, [])]  # its identity in the counts file
        counted = known.get(path, counted_as[path], functools.partial(unit_extent, loader, path))
        if counted is not None:
            pieces.extend((source, [path, start, stop], rows) for start, stop, rows in counted)
        else:
            pieces.extend((source, piece, rows) for piece, rows in unit_pieces(loader, path))
    with ThreadPoolExecutor(max_workers=min(COUNT_THREADS, max(len(pieces), 1))) as pool:
        counts = list(pool.map(lambda item: item[2] if item[2] is not None else count_rows(loader, item[1]), pieces))
    units = [FileUnit(piece[0], source, piece[1], piece[2], count, names[source])
             for (source, piece, _), count in zip(pieces, counts)]
    by_path: dict[str, list[tuple[Any, Any, int]]] = {}
    for unit in units:
        by_path.setdefault(unit.path, []).append((unit.start, unit.stop, unit.rows))
    for path, counted in by_path.items():
        known.put(path, counted_as[path], counted)
    return FileBackend(loader, split, units, identities, named, contents)


def content_identities(loader: FileLoader, source: str, path: str) -> tuple[list[Any], list[Any]]:
    """([size, "sha256:..."] of the local file `source` for a state, `content_key` of `path`, the file read: the same
    file, or its decompressed copy), hashed through the cache root's memo (an unchanged file is read once)."""
    with ContentHashes(loader.cache_root) as hashes:
        read = file_stat(path)
        key = content_key(read, hashes.sha256(path, read))
        if source == path:
            return [read.st_size, key[2]], key
        named = file_stat(source)
        return [named.st_size, f"sha256:{hashes.sha256(source, named)}"], key
