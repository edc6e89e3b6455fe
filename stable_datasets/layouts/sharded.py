"""Writers that rotate numbered shard files: shared by the Arrow IPC and Parquet layouts.

A shard ends once it passes `max_shard_size` bytes (batches are split at that point). Each
finished shard is hashed and fsynced by a background thread while the next is written (the
writer waits for the hash only; the publish fsyncs every file again before the rename), and
journaled, so a killed build resumes after its last finished shard (see cache.journal).
A subclass only says how one file is opened, appended to and closed.
"""

from __future__ import annotations

import dataclasses
import re
from abc import abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from stable_datasets.cache.hashing import FileHasher
from stable_datasets.cache.journal import ShardJournal
from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.layouts.base import LayoutWriter, StreamUnits
from stable_datasets.layouts.part_files import ON_DISK, PART_FILES_KEY, PartFiles

if TYPE_CHECKING:
    from stable_datasets.write.parts import PartResult


class ShardedFileWriter(LayoutWriter):
    supports_resume = True
    suffix = ".bin"

    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        super().__init__(directory, schema, options)
        self._shards: list[ShardInfo] = []
        self._sink: pa.NativeFile | None = None
        self._file: Any = None
        self._rows = 0
        self._rows_done = 0  # rows in finished shards
        self.journal: ShardJournal | None = None

    # -- format-specific ----------------------------------------------------------------
    @abstractmethod
    def _open_file(self, sink: pa.NativeFile) -> Any: ...

    @abstractmethod
    def _write_slice(self, file: Any, batch: pa.RecordBatch) -> None: ...

    @abstractmethod
    def _close_file(self, file: Any) -> None: ...

    def _max_rows_per_write(self, row_bytes: float) -> int:
        """How many rows one write may hold (a Parquet row group is one write)."""
        return 1 << 62

    # -- shared ---------------------------------------------------------------------------
    def resume_from(self, shards: list[ShardInfo], journal: ShardJournal) -> None:
        """Continue after shards a killed build finished; new shards are numbered after them."""
        self._shards = list(shards)
        self._rows_done = sum(s.num_rows for s in shards)
        self.journal = journal

    def _start_shard(self) -> None:
        path = self.directory / f"shard-{len(self._shards):05d}{self.suffix}"
        self._sink = pa.OSFile(str(path), "wb")
        self._file = self._open_file(self._sink)
        self._hasher = FileHasher(path, background_fsync=True)  # the publish fsyncs (and waits) once for all
        self._rows = 0
        self._shards.append(ShardInfo(path=path.name, num_rows=0, num_bytes=0, sha256=""))

    def _finish_shard(self) -> None:
        if self._file is None:
            return
        self._close_file(self._file)
        self._sink.close()
        shard = self._shards[-1]
        path = self.directory / shard.path
        shard.num_rows = self._rows
        shard.num_bytes = path.stat().st_size
        shard.sha256 = self._hasher.finish()  # its fsync goes on behind (a journal line is re-hashed on recovery)
        self._file = self._sink = None
        self._rows_done += self._rows
        if self.journal is not None:
            self.journal.append(shard, self._rows_done)

    def write(self, batch: pa.RecordBatch) -> None:
        """Append rows, splitting the batch where a shard would pass `max_shard_size`."""
        limit = self.options["max_shard_size"]
        row_bytes = max(batch.nbytes / max(batch.num_rows, 1), 1.0)
        per_write = self._max_rows_per_write(row_bytes)
        start = 0
        while start < batch.num_rows:
            if self._file is None:
                self._start_shard()
            room = limit - self._sink.tell()
            rows = max(1, min(batch.num_rows - start, int(room // row_bytes), per_write))
            self._write_slice(self._file, batch.slice(start, rows))
            self._hasher.advance(self._sink.tell())
            self._rows += rows
            start += rows
            if self._sink.tell() >= limit:
                self._finish_shard()

    def abort(self) -> None:
        if self._file is not None:
            self._hasher.cancel()
            self._sink.close()
            self._file = self._sink = None

    def close(self) -> list[ShardInfo]:
        if not self._shards:  # zero rows still publish one readable, empty shard
            self._start_shard()
        self._finish_shard()
        return self._shards


def merge_numbered_shards(staging: Path, parts: list[PartResult],
                          files: PartFiles = ON_DISK) -> tuple[list[ShardInfo], dict[str, Any]]:
    """Parts' shards placed in the staging root (moved there, or on the store: `files`) and renumbered in
    part order; their sizes and checksums are the parts' records, nothing is read.

    Empty shards (a part with no rows writes one) are dropped unless no part has rows, so a
    parallel build lists the rows of a one-process build, in order. The extra names the files each
    part became ("part_files"): the write path records it, so a later build can reuse parts (write.reuse).
    """
    chosen = [(position, shard) for position, part in enumerate(parts) for shard in part.shards if shard.num_rows]
    if not chosen:
        chosen = [(0, parts[0].shards[0])]
    shards = []
    part_files: list[list[str]] = [[] for _ in parts]
    for position, shard in chosen:
        name = re.sub(r"\d+", f"{len(shards):05d}", shard.path, count=1)
        files.place(staging, parts[position], shard.path, name)
        shards.append(dataclasses.replace(shard, path=name))
        part_files[position].append(name)
    return shards, {PART_FILES_KEY: part_files}


def seal_sharded_part(folder: Path, part: PartResult) -> PartResult:
    """A sharded part needs nothing more for a merge that reads only its record (see `merge_numbered_shards`)."""
    return part


#: rows per block when a stream reads a downloaded shard file (the write path's record batches are smaller)
STREAM_BLOCK_ROWS = 1024


def shard_file_bounds(metadata: CacheMetadata) -> np.ndarray:
    """Row offsets where each non-empty shard file begins, then the rows: the groups of a stream's shard window."""
    counts = metadata.shard_rows()
    return np.concatenate([[0], np.cumsum(counts[counts > 0], dtype=np.int64)]).astype(np.int64)


def shard_file_units(metadata: CacheMetadata) -> StreamUnits | None:
    """A stream of a remote sharded cache downloads a shard file at a time; not one with media files beside."""
    if metadata.extra_files or not metadata.shards:
        return None
    return StreamUnits(metadata.shards, [], STREAM_BLOCK_ROWS)
