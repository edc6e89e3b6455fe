"""Megatron-Core's indexed dataset format, both directions: `prefix.bin` holds the token ids of every sequence
back to back; `prefix.idx` says where each sequence starts and how long it is, and where each document ends.

The `.idx` file, little-endian, as Megatron-Core's `_IndexWriter` writes it:

    b"MMIDIDX\\x00\\x00"   9 bytes    header
    version               uint64     1
    dtype code            uint8      1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
    sequence count        uint64     S
    document count        uint64     D + 1 (the document index starts with 0)
    sequence lengths      int32[S]   tokens in each sequence
    sequence pointers     int64[S]   byte offset of each sequence in `.bin`
    document indices      int64[D+1] the sequences of document d are [indices[d], indices[d+1])
    sequence modes        int8[S]    only in multimodal files

Reading checks everything the writer promises (header, sizes, pointers inside `.bin`, indices in order) before a
token is served: a damaged or truncated file is an IndexedFormatError naming the file and the offset, never wrong
tokens. A prefix in an object store (`s3://bucket/corpus_text_document`) is read as Megatron-Core reads one: the
`.idx` whole (one GET), the `.bin` a ranged GET per read, each of the version the `.idx` was opened with.
Writing is atomic: both files are written beside their final names and renamed, `.idx` last; parts written in
parallel are merged by appending their `.bin` files and offsetting their indices (`merge_indexed`), no token
rewritten.
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stable_datasets.cache.publish import fsync_path
from stable_datasets.download.inputs import is_object_url, object_identity, object_range
from stable_datasets.errors import StableDatasetsError

INDEX_HEADER = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
#: Megatron-Core's DType codes
DTYPE_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
               8: np.uint16}
CODES = {np.dtype(v): k for k, v in DTYPE_CODES.items()}
#: Megatron-Core's rule: token ids of a vocabulary below this fit uint16, else int32
UINT16_VOCAB_LIMIT = 65_500
#: bytes of the fixed part of an index header (magic, version, dtype code, sequence and document counts)
HEADER_BYTES = len(INDEX_HEADER) + 8 + 1 + 8 + 8


class IndexedFormatError(StableDatasetsError, ValueError):
    """A `.bin`/`.idx` pair that is not what Megatron-Core's writer makes: names the file and the offset."""


def optimal_dtype(vocab_size: int | None) -> type[np.number]:
    """uint16 for a vocabulary below 65,500 ids, else int32 (Megatron-Core's DType.optimal_dtype)."""
    return np.uint16 if vocab_size is not None and vocab_size < UINT16_VOCAB_LIMIT else np.int32


def index_bytes(lengths: np.ndarray, document_indices: np.ndarray, dtype: Any,
                modes: np.ndarray | None = None) -> bytes:
    """The `.idx` file of sequences of `lengths` tokens (written back to back) and the given documents."""
    dtype = np.dtype(dtype)
    lengths = np.asarray(lengths, dtype=np.int32)
    pointers = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    parts = [INDEX_HEADER, struct.pack("<Q", INDEX_VERSION), struct.pack("<B", CODES[dtype]),
             struct.pack("<Q", len(lengths)), struct.pack("<Q", len(document_indices)), lengths.tobytes(),
             pointers.tobytes(), np.asarray(document_indices, dtype=np.int64).tobytes()]
    if modes is not None:
        parts.append(np.asarray(modes, dtype=np.int8).tobytes())
    return b"".join(parts)


class IndexedDataset:
    """A Megatron-Core indexed dataset (`prefix.bin` + `prefix.idx`), memory-mapped, with Megatron-Core's reading
    API: `len`, `ds[i]` (a numpy array of the sequence's tokens), `ds[a:b]` (a list of them), `get(i, offset,
    length)`, `sequence_lengths`, `sequence_pointers`, `document_indices`, `sequence_modes`."""

    def __init__(self, path_prefix: str | os.PathLike, multimodal: bool = False,
                 storage_options: dict[str, Any] | None = None):
        """`path_prefix` local, or an object-store URL (`s3://...`; `storage_options` as for `load_dataset`, else
        the environment's)."""
        self.path_prefix = os.fspath(path_prefix)
        self.storage_options = storage_options
        self.idx_path: Any
        self.bin_path: Any
        if is_object_url(self.path_prefix):
            self.idx_path, self.bin_path = self.path_prefix + ".idx", self.path_prefix + ".bin"
            self._idx_map = _RemoteFile(self.idx_path, storage_options).read(0, None)
            self._bin_map = _RemoteFile(self.bin_path, storage_options)
        else:
            self.idx_path, self.bin_path = Path(self.path_prefix + ".idx"), Path(self.path_prefix + ".bin")
            self._idx_map = _map(self.idx_path)
            self._bin_map = _map(self.bin_path)
        self._read_index(multimodal)

    def _read_index(self, multimodal: bool) -> None:
        data, where = self._idx_map, self.idx_path
        if len(data) < HEADER_BYTES or data[:len(INDEX_HEADER)] != INDEX_HEADER:
            raise IndexedFormatError(f"{where}: not a Megatron indexed dataset index (header at offset 0 is "
                                     f"{bytes(data[:len(INDEX_HEADER)])!r}, expected {INDEX_HEADER!r})")
        version, code, sequences, documents = struct.unpack_from("<QBQQ", data, len(INDEX_HEADER))
        if version != INDEX_VERSION:
            raise IndexedFormatError(f"{where}: index version {version} at offset {len(INDEX_HEADER)}, expected 1")
        if code not in DTYPE_CODES:
            raise IndexedFormatError(f"{where}: unknown dtype code {code} at offset {len(INDEX_HEADER) + 8}")
        self.dtype = np.dtype(DTYPE_CODES[code])
        expected = HEADER_BYTES + sequences * (4 + 8 + (1 if multimodal else 0)) + documents * 8
        if len(data) != expected:
            raise IndexedFormatError(f"{where}: {len(data)} bytes, but its header ({sequences} sequences, {documents} "
                                     f"document indices{', multimodal' if multimodal else ''}) needs {expected}")
        offset = HEADER_BYTES
        self.sequence_lengths = np.frombuffer(data, np.int32, sequences, offset)
        offset += 4 * sequences
        self.sequence_pointers = np.frombuffer(data, np.int64, sequences, offset)
        offset += 8 * sequences
        self.document_indices = np.frombuffer(data, np.int64, documents, offset)
        offset += 8 * documents
        self.sequence_modes = np.frombuffer(data, np.int8, sequences, offset) if multimodal else None
        self._check(sequences)

    def _check(self, sequences: int) -> None:
        """Every pointer and length inside `.bin`, sequences back to back, document indices in order: vectorized,
        once, so no later read can serve bytes past the file or of another sequence."""
        lengths, pointers, where = self.sequence_lengths, self.sequence_pointers, self.idx_path
        if sequences and (lengths < 0).any():
            bad = int(np.argmax(lengths < 0))
            raise IndexedFormatError(f"{where}: sequence {bad} has length {lengths[bad]} "
                                     f"(offset {HEADER_BYTES + 4 * bad})")
        ends = pointers + lengths.astype(np.int64) * self.dtype.itemsize
        if sequences and (pointers[0] != 0 or (pointers[1:] != ends[:-1]).any()):
            bad = 0 if pointers[0] != 0 else int(np.argmax(pointers[1:] != ends[:-1])) + 1
            raise IndexedFormatError(f"{where}: sequence {bad}'s pointer {pointers[bad]} (offset "
                                     f"{HEADER_BYTES + 4 * sequences + 8 * bad}) does not follow the sequence "
                                     "before it")
        size = int(ends[-1]) if sequences else 0
        if len(self._bin_map) != size:
            raise IndexedFormatError(f"{self.bin_path}: {len(self._bin_map)} bytes, but {where} places its "
                                     f"{sequences} sequences in {size} (truncated or from another index?)")
        docs = self.document_indices
        if len(docs) == 0 or docs[0] != 0 or docs[-1] != sequences or (len(docs) > 1 and (np.diff(docs) < 0).any()):
            raise IndexedFormatError(f"{where}: document indices must rise from 0 to {sequences} (offset "
                                     f"{HEADER_BYTES + 12 * sequences})")

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    def __getitem__(self, index: int | np.integer | slice) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError(f"slices must be contiguous (step 1), got step {step}")
            return [self.get(i) for i in range(start, stop)]
        return self.get(int(index))

    def get(self, idx: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Tokens [offset, offset + length) of sequence `idx` (the rest of it when `length` is None)."""
        count = len(self)
        if not -count <= idx < count:
            raise IndexError(f"sequence {idx} out of range for {count} sequences ({self.path_prefix})")
        idx %= count
        size = int(self.sequence_lengths[idx])
        if length is None:
            length = size - offset
        if offset < 0 or length < 0 or offset + length > size:
            raise IndexError(f"tokens [{offset}, {offset + length}) out of range for sequence {idx} of {size}")
        start = int(self.sequence_pointers[idx]) + offset * self.dtype.itemsize
        if isinstance(self._bin_map, _RemoteFile):
            return np.frombuffer(self._bin_map.read(start, length * self.dtype.itemsize), self.dtype)
        return np.frombuffer(self._bin_map, self.dtype, length, start)

    def tokens(self, first: int, last: int) -> np.ndarray:
        """The tokens of sequences [first, last) back to back: one read (one ranged GET for a remote `.bin`)."""
        if first >= last:
            return np.zeros(0, self.dtype)
        start = int(self.sequence_pointers[first])
        size = int(self.sequence_pointers[last - 1]) + int(self.sequence_lengths[last - 1]) * self.dtype.itemsize
        if isinstance(self._bin_map, _RemoteFile):
            return np.frombuffer(self._bin_map.read(start, size - start), self.dtype)
        return np.frombuffer(self._bin_map, self.dtype, (size - start) // self.dtype.itemsize, start)

    @property
    def document_count(self) -> int:
        return len(self.document_indices) - 1

    def documents(self) -> Iterator[np.ndarray]:
        """Each document's tokens (its sequences joined), in order."""
        for d in range(self.document_count):
            first, last = int(self.document_indices[d]), int(self.document_indices[d + 1])
            yield np.concatenate([self.get(i) for i in range(first, last)]) if last - first != 1 else self.get(first)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its paths: each process maps the files itself (fork-started DataLoader workers included)."""
        return {"path_prefix": self.path_prefix, "multimodal": self.sequence_modes is not None,
                "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path_prefix"], state["multimodal"], state.get("storage_options"))  # type: ignore[misc]


class _RemoteFile:
    """An object read by ranges, always of the version it had when opened (a changed object is an error)."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None):
        self.url = url
        self.options = storage_options
        try:
            _, self.size, version = object_identity(url, self.options)
        except FileNotFoundError:
            raise IndexedFormatError(f"{url} does not exist (an indexed dataset is a prefix with .bin and .idx)") \
                from None
        self.expected = [self.size, version]

    def __len__(self) -> int:
        return self.size

    def read(self, start: int, count: int | None) -> bytes:
        stop = self.size if count is None else start + count
        if stop == start:
            return b""
        data = object_range(self.url, start, stop, self.options, self.expected)
        if len(data) != stop - start:
            raise IndexedFormatError(f"{self.url}: {len(data)} bytes at offset {start}, expected {stop - start}")
        return data


def _map(path: Path) -> Any:
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return b""
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise IndexedFormatError(f"{path} does not exist (an indexed dataset is a prefix with .bin and .idx)") \
            from None


def fit_tokens(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Token ids as `dtype`; ids that do not fit it are a ValueError, never a silent wrap (ids of `dtype` already
    are not looked at)."""
    dtype = np.dtype(dtype)
    values = np.asarray(values)
    if values.dtype == dtype:
        return values
    if len(values) and dtype.kind in "iu":
        info, low, high = np.iinfo(dtype), values.min(), values.max()
        if low < info.min or high > info.max:
            raise ValueError(f"token ids [{low}, {high}] do not fit {dtype} (pass a wider dtype)")
    return values.astype(dtype)


class IndexedWriter:
    """Writes one `.bin`/`.idx` pair: `add(tokens)` appends one document of one sequence; `commit()` makes both files
    visible, `.idx` last, after fsync; nothing is visible before. Tokens that do not fit `dtype` are refused."""

    def __init__(self, output_prefix: str | os.PathLike, dtype: Any = None):
        """`dtype=None` writes int32 and narrows to uint16 at commit when every id is below 65,500 (Megatron-Core's
        choice for such a vocabulary)."""
        self.prefix = os.fspath(output_prefix)
        self.narrow = dtype is None
        self.dtype = np.dtype(np.int32 if dtype is None else dtype)
        self.max_id = -1
        if self.dtype not in CODES:
            raise ValueError(f"dtype {self.dtype} is not one of Megatron-Core's: {sorted(str(d) for d in CODES)}")
        Path(self.prefix).parent.mkdir(parents=True, exist_ok=True)
        self._tmp_bin = Path(f"{self.prefix}.bin.tmp-{os.getpid()}")
        self._fh = open(self._tmp_bin, "wb")  # noqa: SIM115 (closed by commit or discard)
        self._lengths: list[np.ndarray] = []
        self._pending: list[int] = []
        self._documents: list[np.ndarray] = []  # sequences per document, for blocks that say (else one each)
        self._info = np.iinfo(self.dtype) if self.dtype.kind in "iu" else None

    def add(self, tokens: Any, where: str = "") -> None:
        array = np.asarray(tokens)
        if array.size == 0:
            array = array.astype(self.dtype).reshape(0)  # [] reads as float64 and would be refused below
        if array.ndim != 1:
            raise ValueError(f"{where or 'a document'}: tokens must be a flat list of ids, got shape {array.shape}")
        if self._info is not None and array.size and array.dtype.kind in "iu" and \
                (array.min() < self._info.min or array.max() > self._info.max):
            raise ValueError(f"{where or 'a document'}: token ids [{array.min()}, {array.max()}] do not fit "
                             f"{self.dtype} (pass dtype=np.int32 or np.int64)")
        if array.dtype.kind == "f" and self.dtype.kind in "iu":
            raise ValueError(f"{where or 'a document'}: token ids must be integers, got {array.dtype}")
        if array.size and self.narrow:
            self.max_id = max(self.max_id, int(array.max()))
        self._fh.write(array.astype(self.dtype, copy=False).tobytes())
        self._pending.append(array.size)
        if len(self._pending) >= 65536:
            self._flush_pending()

    def add_block(self, values: np.ndarray, lengths: np.ndarray, documents: np.ndarray | None = None) -> None:
        """Many sequences at once: their ids back to back (`values`) and how many each has (`lengths`); each one
        document, or `documents[d]` sequences make document d (0: an empty document, as Megatron-LM's
        preprocessing writes a text that has no tokens)."""
        values = fit_tokens(values, self.dtype)
        if len(values) and self.narrow:
            self.max_id = max(self.max_id, int(values.max()))
        self._fh.write(np.ascontiguousarray(values).data)  # its buffer: no copy (a Ray object's, read-only, too)
        self._flush_pending()
        lengths = np.asarray(lengths, dtype=np.int64)
        if documents is not None and int(np.sum(documents)) != len(lengths):
            raise ValueError(f"documents hold {int(np.sum(documents))} sequences, but {len(lengths)} were given")
        self._lengths.append(lengths)
        self._documents.append(np.ones(len(lengths), np.int64) if documents is None
                               else np.asarray(documents, dtype=np.int64))

    def _flush_pending(self) -> None:
        if self._pending:
            self._lengths.append(np.asarray(self._pending, dtype=np.int64))
            self._documents.append(np.ones(len(self._pending), np.int64))
            self._pending = []

    def commit(self, modes: np.ndarray | None = None) -> None:
        self._flush_pending()
        lengths = np.concatenate([np.zeros(0, np.int64), *self._lengths])
        documents = np.zeros(1 + sum(len(d) for d in self._documents), np.int64)
        if len(documents) > 1:
            np.cumsum(np.concatenate(self._documents), out=documents[1:])
        if (lengths > np.iinfo(np.int32).max).any():
            raise ValueError("a document longer than 2**31 - 1 tokens does not fit Megatron-Core's int32 lengths")
        self._fh.close()
        if self.narrow and self.max_id + 1 < UINT16_VOCAB_LIMIT:
            self._narrow_to_uint16()
        tmp_idx = Path(f"{self.prefix}.idx.tmp-{os.getpid()}")
        tmp_idx.write_bytes(index_bytes(lengths, documents, self.dtype, modes))
        _publish(self._tmp_bin, tmp_idx, self.prefix)

    def _narrow_to_uint16(self) -> None:
        """Rewrite the int32 ids as uint16, a bounded block at a time."""
        narrow = self._tmp_bin.with_name(self._tmp_bin.name + ".u16")
        with open(self._tmp_bin, "rb") as src, open(narrow, "wb") as dst:
            while block := src.read(4 << 20):
                dst.write(np.frombuffer(block, np.int32).astype(np.uint16).tobytes())
        os.replace(narrow, self._tmp_bin)
        self.dtype = np.dtype(np.uint16)

    def discard(self) -> None:
        self._fh.close()
        self._tmp_bin.unlink(missing_ok=True)


def _publish(tmp_bin: Path, tmp_idx: Path, prefix: str) -> None:
    """fsync both, then rename them into place, `.idx` last (a reader never pairs a new `.bin` with an old `.idx`)."""
    for path in (tmp_bin, tmp_idx):
        fsync_path(path)
    Path(prefix + ".idx").unlink(missing_ok=True)
    os.replace(tmp_bin, prefix + ".bin")
    os.replace(tmp_idx, prefix + ".idx")


def merge_indexed(parts: list[str], output_prefix: str | os.PathLike) -> None:
    """One `.bin`/`.idx` of the parts in order: their `.bin` files appended (the kernel copies; no token is decoded
    or rewritten), their indices concatenated with each part's document boundaries offset. The parts must share
    a dtype; they are checked as any reader checks them, and removed once the merge is published."""
    prefix = os.fspath(output_prefix)
    opened = [IndexedDataset(part) for part in parts]
    dtypes = {d.dtype for d in opened}
    if len(dtypes) > 1:
        raise ValueError(f"parts of one indexed dataset must share a dtype, got {sorted(str(d) for d in dtypes)}")
    dtype = dtypes.pop() if dtypes else np.dtype(np.int32)
    lengths = np.concatenate([np.zeros(0, np.int32), *(d.sequence_lengths for d in opened)])
    documents, offset = [np.zeros(1, np.int64)], 0
    for d in opened:
        documents.append(d.document_indices[1:] + offset)
        offset += len(d)
    tmp_bin, tmp_idx = Path(f"{prefix}.bin.tmp-{os.getpid()}"), Path(f"{prefix}.idx.tmp-{os.getpid()}")
    try:
        with open(tmp_bin, "wb") as out:
            for part in parts:
                with open(part + ".bin", "rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        tmp_idx.write_bytes(index_bytes(lengths, np.concatenate(documents), dtype))
        _publish(tmp_bin, tmp_idx, prefix)
    except BaseException:
        tmp_bin.unlink(missing_ok=True)
        tmp_idx.unlink(missing_ok=True)
        raise
    del opened
    for part in parts:
        for suffix in (".bin", ".idx"):
            Path(part + suffix).unlink(missing_ok=True)


def write_tokens(documents: Iterable[Any], output_prefix: str | os.PathLike, dtype: Any = None) -> int:
    """Write each item of `documents` (token ids) as one document; the number written."""
    writer = IndexedWriter(output_prefix, dtype)
    count = 0
    try:
        for count, tokens in enumerate(documents, 1):
            writer.add(tokens, where=f"document {count - 1}")
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    return count
