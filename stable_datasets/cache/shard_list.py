"""`_shards.arrow`: the shard list of a cache of many shards, as Arrow columns beside `_metadata.json`.

The rule: **past `STABLE_DATASETS_SHARD_LIST_FILE_ABOVE` shards (10,000), the list of shards (rows, bytes,
sha256 of each) is an Arrow IPC file that every process memory-maps, and `_metadata.json` names it with its
own size and sha256.** In JSON a shard costs ~190 bytes of text parsed into ~560 bytes of objects in every
process that opens the cache (5 s and 560 MB at 1 M shards, 64 times on a training node); here it costs 48
bytes of a file the node's processes share through the page cache, and a pickled dataset carries its path.

The file holds pages (record batches) of `PAGE_SHARDS` shards: `num_rows` and `num_bytes` (int64), `sha256`
(32 raw bytes) and, only when the shards' names do not follow from their index (`shard-00042.arrow`), `path`.
`_metadata.json` holds in place of its list of shard entries the object `ShardListRef.to_json` writes:

    "shards": {"file": "_shards.arrow", "count": N, "file_bytes": B, "sha256": "...", "shard_bytes": S,
               "names": {"prefix": "shard-", "digits": 5, "suffix": ".arrow"}}

and `cache_format_version` 3. Readers before format 3 require a list there and refuse the cache ("shards must
be a list"). On open the file is checked by its size, structure and sums (the rows against `num_rows`, the
bytes against `shard_bytes`: a damaged count is found before a row is read); `verify` hashes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np
import pyarrow as pa

from stable_datasets.cache.publish import file_sha256, fsync_path
from stable_datasets.errors import CacheError, StableDatasetsError

SHARD_LIST_FILE = "_shards.arrow"
#: shards per record batch of the file: a page is read (mapped) as a whole
PAGE_SHARDS = 65_536
#: the cache format of a cache whose shard list is this file
SHARD_LIST_FORMAT = 3
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME_PART = re.compile(r"[A-Za-z0-9_.\-]{0,64}")
_NUMBERED = re.compile(r"\A([A-Za-z0-9_.\-]*?)(\d+)([A-Za-z0-9_.\-]*)\Z")
_BASE_FIELDS = [pa.field("num_rows", pa.int64(), nullable=False), pa.field("num_bytes", pa.int64(), nullable=False),
                pa.field("sha256", pa.binary(32), nullable=False)]
_PATH_FIELD = pa.field("path", pa.string(), nullable=False)


class ShardListProblem(StableDatasetsError, ValueError):
    """What is wrong in the `shards` object of a `_metadata.json` (the metadata check adds where)."""


@dataclass(frozen=True)
class ShardNames:
    """Shard `i` is named `prefix + i (zero-padded to digits) + suffix`, as the sharded writers name them."""

    prefix: str
    digits: int
    suffix: str

    def name(self, index: int) -> str:
        return f"{self.prefix}{index:0{self.digits}d}{self.suffix}"

    @classmethod
    def of(cls, paths: Sequence[str]) -> ShardNames | None:
        """The naming every path follows (checked for each one), else None (the paths are then stored)."""
        if not paths:
            return None
        found = _NUMBERED.match(paths[0])
        if found is None or int(found.group(2)) != 0:
            return None
        names = cls(found.group(1), len(found.group(2)), found.group(3))
        return names if all(p == names.name(i) for i, p in enumerate(paths)) else None


@dataclass(frozen=True)
class ShardListRef:
    """What `_metadata.json` says of its shard-list file: enough to fetch it, check it and name every shard."""

    count: int
    file_bytes: int
    sha256: str
    shard_bytes: int
    names: ShardNames | None = None
    file: str = SHARD_LIST_FILE

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "count": self.count, "file_bytes": self.file_bytes,
                                "sha256": self.sha256, "shard_bytes": self.shard_bytes}
        if self.names is not None:
            data["names"] = {"prefix": self.names.prefix, "digits": self.names.digits, "suffix": self.names.suffix}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShardListRef:
        """From untrusted JSON; ShardListProblem names the key that is wrong."""
        if data.get("file") != SHARD_LIST_FILE:
            raise ShardListProblem(f"shards.file must be {SHARD_LIST_FILE!r}, got {data.get('file')!r:.80}")
        for key in ("count", "file_bytes", "shard_bytes"):
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ShardListProblem(f"shards.{key} must be a non-negative integer, got {value!r:.80}")
        if not (isinstance(data.get("sha256"), str) and _SHA256.fullmatch(data["sha256"])):
            raise ShardListProblem(f"shards.sha256 must be 64 hex digits, got {data.get('sha256')!r:.80}")
        names = data.get("names")
        if names is not None:
            if not (isinstance(names, dict) and isinstance(names.get("prefix"), str)
                    and isinstance(names.get("suffix"), str) and type(names.get("digits")) is int
                    and 1 <= names["digits"] <= 12 and _NAME_PART.fullmatch(names["prefix"])
                    and _NAME_PART.fullmatch(names["suffix"])):  # no "/": a file in the cache folder
                raise ShardListProblem(f"shards.names must be {{'prefix', 'digits', 'suffix'}} of a plain file "
                                       f"name, got {names!r:.120}")
            names = ShardNames(names["prefix"], names["digits"], names["suffix"])
        return cls(data["count"], data["file_bytes"], data["sha256"], data["shard_bytes"], names)


def write_shard_list(directory: Path, shards: Sequence[Any], *, sync: bool = True) -> ShardListRef:
    """Write `directory/_shards.arrow` listing `shards` (ShardInfo-like: path, num_rows, num_bytes, sha256)."""
    count = len(shards)
    paths = [s.path for s in shards]
    names = ShardNames.of(paths)
    rows = np.fromiter((s.num_rows for s in shards), np.int64, count)
    sizes = np.fromiter((s.num_bytes for s in shards), np.int64, count)
    digests = b"".join(bytes.fromhex(s.sha256) if s.sha256 else bytes(32) for s in shards)
    schema = pa.schema(_BASE_FIELDS + ([] if names is not None else [_PATH_FIELD]))
    path = directory / SHARD_LIST_FILE
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for lo in range(0, max(count, 1), PAGE_SHARDS):
            hi = min(lo + PAGE_SHARDS, count)
            columns = [pa.array(rows[lo:hi]), pa.array(sizes[lo:hi]),
                       pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), hi - lo,
                                                            [None, pa.py_buffer(digests[lo * 32:hi * 32])])]
            if names is None:
                columns.append(pa.array(paths[lo:hi], pa.string()))
            writer.write_batch(pa.record_batch(columns, schema=schema))
    if sync:
        fsync_path(path)
    return ShardListRef(count, path.stat().st_size, file_sha256(path), int(sizes.sum()), names)


def _inside(path: str) -> bool:
    """A shard path of the cache folder: relative, not empty, no NUL, no `..` part (as `_metadata.json`'s)."""
    return bool(path) and path[0] != "/" and "\x00" not in path and ".." not in path.split("/")


def _int64s(array: pa.Array) -> np.ndarray:
    """The values of an int64 array without nulls, as a numpy view of its buffer (Array.to_numpy imports pandas
    when it is installed: 0.3 s and 20 MB the first time, in every process)."""
    return np.frombuffer(array.buffers()[1], np.int64, count=len(array), offset=array.offset * 8)


class ShardList(Sequence):
    """The shards of a cache as a read-only sequence of ShardInfo over the mapped `_shards.arrow`.

    A ShardInfo is made only for the shards asked for; `row_counts()`/`byte_counts()` give whole columns as
    numpy for the paths that need every shard (row starts, sums). Unattached (`directory` None: the metadata of
    a remote cache before its file is fetched) it knows only its reference, and reading it is an error. It
    pickles as its folder and reference, and maps the file again where it is unpickled.
    """

    def __init__(self, ref: ShardListRef, directory: Path | None, make: Any):
        self.ref = ref
        self.directory = directory
        self._make = make  # ShardInfo (passed in: cache.metadata imports this module)
        self._pages: list[pa.RecordBatch] | None = None
        self._rows: np.ndarray | None = None
        self._bytes: np.ndarray | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return ShardList, (self.ref, self.directory, self._make)

    @property
    def path(self) -> Path | None:
        return None if self.directory is None else self.directory / self.ref.file

    def attach(self, directory: Path) -> None:
        """Read the file from `directory` from now on (checked on first use)."""
        self.directory, self._pages, self._rows, self._bytes = Path(directory), None, None, None

    def open(self) -> list[pa.RecordBatch]:
        """The file's pages, mapped and checked against the reference (size, structure, byte sum)."""
        if self._pages is not None:
            return self._pages
        if self.directory is None:
            raise CacheError(f"the shard list {self.ref.file} of this cache was not fetched (an object-store cache "
                             "must be opened through its store)")
        path = self.directory / self.ref.file
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise CacheError(f"{path}: shard list named in _metadata.json is missing; the cache cannot be trusted "
                             "(rebuild it with download_mode='force_rebuild')") from None
        if size != self.ref.file_bytes:
            raise self._damaged(f"{size} bytes, _metadata.json records {self.ref.file_bytes}")
        try:
            with pa.memory_map(str(path)) as source:
                reader = pa.ipc.open_file(source)
                pages = [reader.get_batch(i) for i in range(reader.num_record_batches)]
                schema = reader.schema
            for page in pages:  # offsets and lengths are read straight from the map: checked once, here
                page.validate(full=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise self._damaged(f"not a readable Arrow file ({exc})") from None
        expected = pa.schema(_BASE_FIELDS + ([] if self.ref.names is not None else [_PATH_FIELD]))
        if not schema.equals(expected):
            raise self._damaged(f"its columns are {schema.names}, expected {expected.names}")
        sizes = [p.num_rows for p in pages]
        want = [min(PAGE_SHARDS, self.ref.count - lo) for lo in range(0, max(self.ref.count, 1), PAGE_SHARDS)]
        if sizes != want:
            raise self._damaged(f"{sum(sizes)} shards in {len(pages)} pages, expected {self.ref.count}")
        if any(p.column(c).null_count for p in pages for c in range(p.num_columns)):
            raise self._damaged("it holds nulls")
        if self.ref.names is None:
            bad = next((p for page in pages for p in page.column(3).to_pylist() if not _inside(p)), None)
            if bad is not None:
                raise self._damaged(f"shard path {bad!r:.120} is not a relative path inside the cache folder")
        self._pages = pages
        rows, counts = self.row_counts(), self.byte_counts()
        problem = None
        if rows.min(initial=0) < 0 or counts.min(initial=0) < 0:
            problem = "it holds a negative count"
        elif int(counts.sum()) != self.ref.shard_bytes:
            problem = f"its shards hold {int(counts.sum())} bytes, _metadata.json records {self.ref.shard_bytes}"
        if problem is not None:
            self._pages = self._rows = self._bytes = None
            raise self._damaged(problem)
        return pages

    def _damaged(self, what: str) -> CacheError:
        return CacheError(f"{self.directory / self.ref.file}: damaged shard list: {what}; the cache cannot be "
                          "trusted (rebuild it with download_mode='force_rebuild')")

    def _column(self, index: int) -> np.ndarray:
        pages = self.open()
        if not pages:
            return np.zeros(0, np.int64)
        if len(pages) == 1:
            return _int64s(pages[0].column(index))  # zero-copy: the mapped file itself
        return np.concatenate([_int64s(p.column(index)) for p in pages])

    def row_counts(self) -> np.ndarray:
        """Rows of every shard, in order (int64; mapped, or one copy when the file has several pages)."""
        if self._rows is None:
            self._rows = self._column(0)
        return self._rows

    def byte_counts(self) -> np.ndarray:
        """Bytes of every shard file, in order (int64)."""
        if self._bytes is None:
            self._bytes = self._column(1)
        return self._bytes

    def name(self, index: int) -> str:
        """The path of shard `index` relative to the cache folder."""
        if self.ref.names is not None:
            return self.ref.names.name(index)
        page = self.open()[index // PAGE_SHARDS]
        return page.column(3)[index % PAGE_SHARDS].as_py()

    def names(self, start: int = 0, stop: int | None = None) -> list[str]:
        """The paths of shards `start` to `stop`."""
        stop = self.ref.count if stop is None else stop
        if self.ref.names is not None:
            return [self.ref.names.name(i) for i in range(start, stop)]
        out: list[str] = []
        for p in range(start // PAGE_SHARDS, (stop + PAGE_SHARDS - 1) // PAGE_SHARDS):  # a page's column at a time
            lo = p * PAGE_SHARDS
            column = self.open()[p].column(3)
            out.extend(column.slice(max(start - lo, 0), max(min(stop - lo, len(column)) - max(start - lo, 0), 0))
                       .to_pylist())
        return out

    def __len__(self) -> int:
        return self.ref.count

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.ref.count))]
        if index < 0:
            index += self.ref.count
        if not 0 <= index < self.ref.count:
            raise IndexError(f"shard {index} of {self.ref.count}")
        pages = self.open()
        page, at = pages[index // PAGE_SHARDS], index % PAGE_SHARDS
        return self._make(self.name(index), int(self.row_counts()[index]), int(self.byte_counts()[index]),
                          page.column(2)[at].as_py().hex())

    def __iter__(self) -> Iterator[Any]:
        make = self._make
        for p, page in enumerate(self.open()):
            lo = p * PAGE_SHARDS
            column = page.column(2)
            digests = column.buffers()[1].to_pybytes()[column.offset * 32:(column.offset + page.num_rows) * 32]
            paths = self.names(lo, lo + page.num_rows) if self.ref.names is not None \
                else page.column(3).to_pylist()
            rows, sizes = _int64s(page.column(0)).tolist(), _int64s(page.column(1)).tolist()
            for i in range(page.num_rows):
                yield make(paths[i], rows[i], sizes[i], digests[i * 32:i * 32 + 32].hex())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ShardList):
            return self.ref == other.ref
        return isinstance(other, list) and len(other) == len(self) and list(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ShardList({self.ref.count} shards in {self.path or self.ref.file})"


def shard_rows(shards: Sequence[Any]) -> np.ndarray:
    """The rows of every shard in `shards` in order (int64): a ShardList's mapped column, else one per ShardInfo."""
    if isinstance(shards, ShardList):
        return shards.row_counts()
    return np.fromiter((s.num_rows for s in shards), np.int64, len(shards))


def shard_bytes(shards: Sequence[Any]) -> np.ndarray:
    """The byte size of every shard file in `shards` in order (int64), the same way."""
    if isinstance(shards, ShardList):
        return shards.byte_counts()
    return np.fromiter((s.num_bytes for s in shards), np.int64, len(shards))
