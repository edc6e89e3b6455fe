"""Binary columns of `lance_rows` caches: written with Lance's blob encoding, read as slices of the
memory-mapped data files.

Every Lance `take` pays a per-call planning cost and one scheduled read per row (~4 ms for 256
rows here, whatever the file version or encoding), so random batches over Lance were several
times slower than over Arrow. With the blob encoding (file version 2.1, field metadata
`lance-encoding:blob`) a row's bytes sit out of line in its fragment's data file, and the column
itself stores a (position, size) description of 16 bytes. The reader takes those descriptions
once at open, checks them against the file, and then serves a row as a slice of the mapped
file, as the Arrow layout does: one C++ `take` per column per batch, no Lance call, and nothing
Lance-specific left to survive a fork. Other columns are read whole at open when they are small
(`HELD_MEMORY`); otherwise Lance's `take` serves them.

File version 2.2 (pylance's default) has a second blob format that may place large values in
files of their own; 2.1 keeps every value in the fragment's data file, so 2.1 is written here.
"""

from __future__ import annotations

import bisect
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.tables import index_array, ordered_gather
from stable_datasets.errors import CacheError
from stable_datasets.layouts.mapped_files import MappedFiles, map_limit_error, map_refused

#: the `extra.lance_rows_version` of caches whose binary columns are blobs; older caches have none (1)
BLOB_LAYOUT_VERSION = 2
FILE_VERSION = "2.1"
BLOB_KEY = b"lance-encoding:blob"
#: bytes of non-blob columns one opened cache holds in memory (read whole at open) instead of taking them
HELD_MEMORY = 128 << 20
#: data files mapped (and their size checked again) when a cache is opened; the others when a read first needs them
MAP_AT_OPEN = 1024


def blob_column_names(schema: pa.Schema) -> list[str]:
    """Top-level binary columns: images, video and audio bytes, Binary values."""
    return [f.name for f in schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]


def stored_schema(schema: pa.Schema, blobs: list[str]) -> pa.Schema:
    """The schema Lance writes: each blob column as large_binary carrying the blob metadata."""
    fields = []
    for f in schema:
        if f.name in blobs:
            f = pa.field(f.name, pa.large_binary(), f.nullable, {**(f.metadata or {}), BLOB_KEY: b"true"})
        fields.append(f)
    return pa.schema(fields, schema.metadata)


def is_blob_field(field: pa.Field) -> bool:
    return (field.metadata or {}).get(BLOB_KEY) == b"true"


def served_schema(stored: pa.Schema, logical: pa.Schema) -> pa.Schema:
    """The rows' schema: blob columns read back as their logical type (binary) without the metadata."""
    return pa.schema([logical.field(f.name) if is_blob_field(f) else f for f in stored], stored.metadata)


def take_with_bytes(dataset: Any, indices: Any, columns: list[str] | None, blobs: list[str]) -> pa.Table:
    """`dataset.take` with blob columns holding their bytes (large_binary) instead of descriptions:
    for caches read through Lance itself (object stores, helper processes). One read per row."""
    if hasattr(dataset, "take_with_bytes"):  # a LanceProxy: its helper process does this
        return dataset.take_with_bytes(indices, columns, blobs)
    table = dataset.take(indices, columns=columns)
    for name in blobs:
        if name not in table.column_names:
            continue
        files = dataset.take_blobs(name, indices=list(indices))
        values = [None if f is None else _read_blob(f) for f in files]
        position = table.column_names.index(name)
        table = table.set_column(position, table.schema.field(name).with_type(pa.large_binary()),
                                 pa.array(values, pa.large_binary()))
    return table


def _read_blob(blob: Any) -> bytes:
    with blob:
        return blob.readall()


class _FragmentBlobs:
    """One blob column of one fragment: a virtual large_binary array over the mapped data file,
    2 elements per row (the row's bytes, then the padding up to the next row's), so that row k is
    element 2k and a batch of rows is one C++ `take`."""

    def __init__(self, whole: pa.Buffer, bounds: np.ndarray, valid: np.ndarray | None):
        self.whole = whole
        self.bounds = bounds  # int64, 2n+1: row k is whole[bounds[2k]:bounds[2k+1]]
        self.view = memoryview(whole)
        self._bounds_view = memoryview(bounds)
        self.valid = valid  # None when no row is null
        validity = None if valid is None else pa.py_buffer(np.packbits(np.repeat(valid, 2), bitorder="little"))
        self.virtual = pa.Array.from_buffers(pa.large_binary(), len(bounds) - 1,
                                             [validity, pa.py_buffer(bounds), whole])

    def take(self, local: np.ndarray) -> pa.Array:
        return self.virtual.take(index_array(local * 2))

    def cell(self, k: int) -> bytes | None:
        if self.valid is not None and not self.valid[k]:
            return None
        b = self._bounds_view
        return self.view[b[2 * k]:b[2 * k + 1]].tobytes()


def _checked_bounds(descriptions: pa.Array, file_size: int, where: str, first_row: int) -> tuple[np.ndarray, Any]:
    """(bounds for _FragmentBlobs, validity or None) from (position, size) descriptions.

    The descriptions decide which bytes a row is, so they are checked as the Arrow layout checks
    offsets: every value inside the file, values in row order and not overlapping (the order the
    writer lays them out). A damaged description, or a data file truncated or replaced, raises
    CacheError naming the file and the row.
    """
    descriptions = descriptions.combine_chunks() if isinstance(descriptions, pa.ChunkedArray) else descriptions
    n = len(descriptions)
    if descriptions.type.num_fields < 2 or descriptions.type.field(0).name != "position":
        raise CacheError(f"{where}: holds no (position, size) blob descriptions (type {descriptions.type})")
    valid = None
    if descriptions.null_count:
        valid = np.asarray(descriptions.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    position = descriptions.field("position").fill_null(0).to_numpy(zero_copy_only=False).astype(np.uint64)
    size = descriptions.field("size").fill_null(0).to_numpy(zero_copy_only=False).astype(np.uint64)
    if valid is not None:
        position, size = np.where(valid, position, 0), np.where(valid, size, 0)
    limit = np.uint64(file_size)
    outside = (position > limit) | (size > limit) | (position + size > limit)
    nonempty = size > 0
    position, size = position.astype(np.int64), size.astype(np.int64)  # every value <= file size now
    end = np.where(nonempty & ~outside, position + size, 0)
    previous_end = np.concatenate([[0], np.maximum.accumulate(end)[:-1]]) if n else end
    overlapping = nonempty & (position < previous_end)
    bad = np.flatnonzero((outside & nonempty) | overlapping)
    if len(bad):
        k = int(bad[0])
        problem = "points outside the file" if outside[k] else "overlaps the bytes of an earlier row"
        raise CacheError(f"{where}: the blob description of row {first_row + k} (position {int(position[k])}, "
                         f"size {int(size[k])}, file of {file_size} bytes) {problem}; the cache is damaged "
                         "(`stable-datasets verify` checks it, download_mode='force_rebuild' rebuilds it)")
    start = np.where(nonempty, position, previous_end)
    stop = np.where(nonempty, position + size, previous_end)
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0:2 * n:2], bounds[1:2 * n:2] = start, stop
    bounds[2 * n] = stop[-1] if n else 0
    return bounds, valid


def blob_descriptions(dataset: Any, blobs: list[str]) -> tuple[list[tuple[str, int]], pa.Table]:
    """([(data file name, rows) per fragment], the blob columns' descriptions of every row, in order).

    The layout comes from the manifest, the descriptions from one ordered scan (~0.3 ms a fragment; a read
    per fragment took ~1-3 ms, minutes at 65,000 fragments); a fragment without its row count in the manifest
    is read alone."""
    layout, counted = [], True
    fragments = dataset.get_fragments()
    for fragment in fragments:
        files = fragment.data_files()
        if len(files) != 1 or fragment.metadata.deletion_file is not None:
            raise ValueError(f"fragment {fragment.fragment_id} has {len(files)} data files or deleted rows; a cache "
                             "written by stable-datasets has one data file per fragment")
        rows = getattr(fragment.metadata, "physical_rows", None)
        counted = counted and isinstance(rows, int)
        layout.append((files[0].path, rows if isinstance(rows, int) else 0))
    if counted:
        table = dataset.to_table(columns=blobs, scan_in_order=True)
        if table.num_rows == sum(rows for _, rows in layout):
            return layout, table
    tables = [fragment.to_table(columns=blobs) for fragment in fragments]
    layout = [(name, table.num_rows) for (name, _), table in zip(layout, tables)]
    return layout, pa.concat_tables(tables) if tables else pa.table({})


def fragment_table(dataset: Any, data_file: str, columns: list[str]) -> pa.Table:
    """`columns` of the one fragment stored in `data_file` (inside data/), blob columns as their descriptions:
    what a reader needs to map that file alone, while the dataset's other data files may be absent."""
    if hasattr(dataset, "fragment_table"):  # a LanceProxy: its helper process does this
        return dataset.fragment_table(data_file, columns)
    for fragment in dataset.get_fragments():
        files = fragment.data_files()
        if len(files) == 1 and files[0].path == data_file and fragment.metadata.deletion_file is None:
            return fragment.to_table(columns=columns)
    raise ValueError(f"no fragment is stored in data/{data_file} alone (the manifest does not match _metadata.json)")


def descriptions_digest(descriptions: pa.Table) -> str:
    """A digest of one fragment's blob descriptions (positions, sizes, nulls), recorded at build time:
    a flipped bit that leaves a description plausible (a size a little shorter) would otherwise read
    the wrong bytes unnoticed, as the bounds checks only catch what points outside or overlaps."""
    digest = hashlib.blake2b(digest_size=16)
    for column in descriptions.columns:
        column = column.combine_chunks()
        valid = np.ones(len(column), bool) if not column.null_count else \
            np.asarray(column.is_valid().to_numpy(zero_copy_only=False), bool)
        for child in ("position", "size"):
            values = column.field(child).fill_null(0).to_numpy(zero_copy_only=False).astype("<u8")
            digest.update(np.where(valid, values, 0).astype("<u8").tobytes())
        digest.update(np.packbits(valid).tobytes())
    return digest.hexdigest()


def dataset_digests(dataset: Any, blobs: list[str]) -> dict[str, str]:
    """{data file name: descriptions_digest} for every fragment of a written dataset."""
    layout, descriptions = blob_descriptions(dataset, blobs)
    starts = np.cumsum([0] + [rows for _, rows in layout]).tolist()
    return {name: descriptions_digest(descriptions.slice(start, rows))
            for (name, rows), start in zip(layout, starts)}


class _MappedFragment:
    """One fragment's data file mapped, with a `_FragmentBlobs` per blob column: an item of the reader's
    `MappedFiles` pool."""

    def __init__(self, columns: list[_FragmentBlobs]):
        self.columns = columns
        self.used = False
        self.pooled = True


class BlobReader:
    """The blob columns of a Lance dataset on local disk, as slices of its data files, each mapped when a read
    first needs it and at most `env.max_open_shards()` at once (layouts.mapped_files): a cache of 70,000
    fragments opens without 70,000 maps. Descriptions are checked for every fragment at open (against the
    file's size then; against the file again when it is mapped)."""

    def __init__(self, dataset_dir: Path, blobs: list[str], layout: list[tuple[str, int]], descriptions: pa.Table,
                 expected_sizes: dict[str, int], digests: dict[str, str] | None):
        """`layout` and `descriptions` as `blob_descriptions` gives them; `expected_sizes`: data file name
        (inside data/) -> the size `_metadata.json` records; `digests`: the `dataset_digests` recorded
        at build time (None: not checked)."""
        self.names = blobs
        self.starts = np.cumsum([0] + [rows for _, rows in layout]).astype(np.int64)
        self._starts_list = self.starts.tolist()
        self._paths: list[str] = []
        self._sizes: list[int] = []
        #: per fragment, per blob column: (bounds, validity) as _checked_bounds gives them
        self._bounds: list[list[tuple[np.ndarray, np.ndarray | None]]] = []
        self.pool: MappedFiles[_MappedFragment] = MappedFiles()
        self.file_bytes = self.blob_bytes = 0
        for (name, rows), first_row in zip(layout, self._starts_list):
            path = dataset_dir / "data" / name
            try:
                file_size = path.stat().st_size
            except OSError as exc:
                raise CacheError(f"{path}: cannot read the Lance data file ({exc})") from None
            expected = expected_sizes.get(name)
            if expected is not None and file_size != expected:
                raise CacheError(f"{path}: {file_size} bytes, but _metadata.json records {expected}; the data file "
                                 "was truncated or replaced (download_mode='force_rebuild' rebuilds the cache)")
            self.file_bytes += file_size
            if digests is not None:
                mine = descriptions.select(blobs).slice(first_row, rows)
                if digests.get(name) != descriptions_digest(mine):
                    raise CacheError(f"{path}: the blob descriptions of rows {first_row}..{first_row + rows - 1} do "
                                     "not match the digest _metadata.json records; the cache is damaged "
                                     "(`stable-datasets verify` checks it, download_mode='force_rebuild' rebuilds it)")
            checked = []
            for column in blobs:
                bounds, valid = _checked_bounds(descriptions.column(column).slice(first_row, rows), file_size,
                                                f"{path} (column {column})", first_row)
                checked.append((bounds, valid))
                self.blob_bytes += int(bounds[-1] - bounds[0])
            self._paths.append(str(path))
            self._sizes.append(file_size)
            self._bounds.append(checked)
        # the first fragments are mapped now: a file that cannot be mapped is reported at open, as before
        for f in range(min(len(self._paths), self.pool.capacity, MAP_AT_OPEN)):
            self._fragment(f)

    def _fragment(self, f: int) -> _MappedFragment:
        return self.pool.acquire(f, lambda: self._map(f))[0]

    def _map(self, f: int) -> _MappedFragment:
        path, file_size = self._paths[f], self._sizes[f]
        try:
            whole = pa.memory_map(path, "r").read_buffer() if file_size else pa.py_buffer(b"")
        except (OSError, pa.ArrowException) as exc:
            if isinstance(exc, OSError) and map_refused(exc):  # not damaged: out of maps or address space
                raise map_limit_error(path) from None
            raise CacheError(f"{path}: cannot map the Lance data file ({exc})") from None
        if whole.size != file_size:  # changed since open: the checked descriptions would not describe it
            raise CacheError(f"{path}: {whole.size} bytes, but _metadata.json records {file_size}; the data file "
                             "was truncated or replaced (download_mode='force_rebuild' rebuilds the cache)")
        return _MappedFragment([_FragmentBlobs(whole, bounds, valid) for bounds, valid in self._bounds[f]])

    def open_files(self) -> tuple[int, int]:
        """(data files mapped now, data files mapped since open): for tests and benchmarks of the bound."""
        return len(self.pool.open), self.pool.maps_opened

    @property
    def num_rows(self) -> int:
        return self._starts_list[-1]

    def take(self, name: str, rows: np.ndarray) -> pa.Array:
        """Bytes of `rows` (global row numbers, any order) as one large_binary array."""
        column = self.names.index(name)
        if len(self._paths) == 1:
            return self._fragment(0).columns[column].take(rows)
        table = ordered_gather(rows, self.starts[:-1],
                               lambda f, local: pa.table({"c": self._fragment(f).columns[column].take(local)}),
                               pa.schema([pa.field("c", pa.large_binary())]))
        return table.column(0).combine_chunks()

    def cell_getter(self, name: str) -> Any:
        """row -> bytes (or None), for the single-row path."""
        column = self.names.index(name)
        if len(self._paths) == 1:  # one file: never evicted (the pool holds at least one)
            return self._fragment(0).columns[column].cell
        starts, find, fragment = self._starts_list, bisect.bisect_right, self._fragment

        def cell(row: int) -> bytes | None:
            f = find(starts, row) - 1
            return fragment(f).columns[column].cell(row - starts[f])

        return cell
