"""How `lance_rows` writes (the layout module re-exports what its contract names: Writer, commit_parts,
merge_parts, seal_part, check_options).

Lance pulls record batches from a reader while our build loop pushes them, so the Lance writer runs in a
thread fed through a bounded queue: memory stays at about two batches and no intermediate IPC copy is made.
The thread writes fragments (Lance's distributed-write API): each fragment of `max_rows_per_file` rows is
fsynced, hashed and journaled, so a killed build resumes after its last fragment. Parts written in parallel
each write fragments in their own folder; `merge_parts` moves their data files into one dataset and commits
every fragment once, in order. Where Lance must not run in this process, a helper process writes
(`python -m stable_datasets.layouts.lance.write`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stable_datasets.cache.hashing import FileHasher
from stable_datasets.cache.journal import ShardJournal
from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.features import Features
from stable_datasets.layouts.base import LayoutWriter, require_positive_ints
from stable_datasets.layouts.lance import blobs as lance_blobs
from stable_datasets.layouts.lance.access import lance_module, needs_helper_process, open_lance
from stable_datasets.layouts.lance.storage import DATASET_DIR
from stable_datasets.layouts.part_files import ON_DISK, PartFiles

if TYPE_CHECKING:
    from stable_datasets.write.parts import PartResult

# pylance warns before every fork once imported. Our handles are reopened in every new process,
# so forked DataLoader workers are safe; the warning would only mislead.
warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)

DATA_FILES = f"{DATASET_DIR}/data/"  # where the fragments' data files lie inside the cache
DEFAULT_OPTIONS: dict[str, Any] = {"max_rows_per_file": 1 << 20, "max_rows_per_group": 1024}
#: `_metadata.json` extra recording how the rows are stored: absent in caches written before blob columns (1)
VERSION_KEY = "lance_rows_version"
#: `_metadata.json` extra: the data file of each fragment (inside data/), in row order, so a remote stream knows
#: which file holds which rows from `_metadata.json` alone (absent in caches written before it)
FRAGMENT_FILES_KEY = "fragment_files"


def check_options(options: dict[str, Any]) -> None:
    require_positive_ints(options, "max_rows_per_file", "max_rows_per_group")


_END = object()


class _Abort(StableDatasetsError):
    pass


_RUST_OS_ERROR = re.compile(r"os error (\d+)")
_KEEP_ERRNO = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EIO)


def os_error_of(error: BaseException | str) -> OSError | None:
    """The OS error behind a Lance failure: Rust reports a full disk as text ("... (os error 28)"),
    with no errno, so the build could not tell it from a bug. An OSError carrying the errno, or None."""
    if isinstance(error, OSError) and error.errno in _KEEP_ERRNO:
        return error
    found = _RUST_OS_ERROR.search(str(error))
    if found is None or int(found.group(1)) not in _KEEP_ERRNO:
        return None
    code = int(found.group(1))
    return OSError(code, f"{os.strerror(code)} (Lance: {str(error).strip()[-300:]})")


def describe_files(directory: Path, dataset_dir: str = DATASET_DIR,
                   known: dict[str, ShardInfo] | None = None) -> list[ShardInfo]:
    """Every file of a Lance dataset with size and checksum; data files carry their row counts.
    Files in `known` (data files a part already hashed) are not read again, and are listed also when they
    are not on this disk (a merge on the store leaves them there: the manifest names them all the same)."""
    rows_by_file: dict[str, int] = {}
    dataset = open_lance(str(directory / dataset_dir))
    for fragment in dataset.get_fragments():
        for data_file in fragment.data_files():
            rows_by_file[f"{dataset_dir}/data/{data_file.path}"] = fragment.count_rows()
    known = known or {}
    shards = []
    for root, _dirs, files in os.walk(directory / dataset_dir):
        for name in sorted(files):
            path = Path(root) / name
            rel = path.relative_to(directory).as_posix()
            size = path.stat().st_size
            seen = known.get(rel)
            sha256 = seen.sha256 if seen is not None and seen.num_bytes == size else file_sha256(path)
            shards.append(ShardInfo(path=rel, num_rows=rows_by_file.get(rel, 0), num_bytes=size, sha256=sha256))
    on_disk = {s.path for s in shards}
    shards.extend(ShardInfo(path=rel, num_rows=rows_by_file.get(rel, 0), num_bytes=seen.num_bytes, sha256=seen.sha256)
                  for rel, seen in known.items() if rel not in on_disk)  # placed on the store (layouts.part_files)
    return sorted(shards, key=lambda s: s.path)


class _Rows:
    """Record batches from a stream, handed out `limit` rows at a time (a batch is split at the limit)."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self._held: pa.RecordBatch | None = None

    def exhausted(self) -> bool:
        while self._held is None or self._held.num_rows == 0:
            self._held = next(self._batches, None)
            if self._held is None:
                return True
        return False

    def take(self, limit: int) -> Iterator[pa.RecordBatch]:
        while limit > 0 and not self.exhausted():
            batch = self._held
            if batch.num_rows > limit:
                self._held = batch.slice(limit)
                batch = batch.slice(0, limit)
            else:
                self._held = None
            limit -= batch.num_rows
            yield batch


class Writer(LayoutWriter):
    """Writes one part's rows as Lance fragments under `<directory>/data.lance/data/`."""

    supports_resume = True

    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any], blobs: bool = True):
        """`blobs`: write the binary columns with Lance's blob encoding (see lance_blobs)."""
        super().__init__(directory, schema, {**DEFAULT_OPTIONS, **options})
        self.blob_columns = lance_blobs.blob_column_names(schema) if blobs else []
        self.stored_schema = lance_blobs.stored_schema(schema, self.blob_columns) if self.blob_columns else schema
        self.file_version = lance_blobs.FILE_VERSION if self.blob_columns else None
        self.journal: ShardJournal | None = None
        self._shards: list[ShardInfo] = []  # data files, in fragment order
        self._fragments: list[dict[str, Any]] = []  # Lance fragment metadata (JSON), in order
        self._rows_done = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lance writer", daemon=True)
        self._thread.start()

    def resume_from(self, shards: list[ShardInfo], journal: ShardJournal) -> None:
        """Continue after the fragments a killed build finished (called before any write)."""
        self._shards = list(shards)
        self._fragments = [note["fragment"] for note in journal.notes]
        self._rows_done = sum(s.num_rows for s in shards)
        self.journal = journal

    def _batches(self) -> Iterator[pa.RecordBatch]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Abort):
                raise item
            yield item

    def _run(self) -> None:
        uri, per_file, per_group = (str(self.directory / DATASET_DIR), self.options["max_rows_per_file"],
                                    self.options["max_rows_per_group"])
        try:
            if needs_helper_process():
                self._write_through_helper(uri, per_file, per_group)
            else:
                for meta in write_fragment_chunks(_Rows(self._batches()), self.stored_schema, uri, per_file, per_group,
                                                  self.file_version):
                    self._finish_fragment(meta)
        except BaseException as exc:  # reported to the building thread
            self._error = os_error_of(exc) or exc

    def _write_through_helper(self, uri: str, per_file: int, per_group: int) -> None:
        """In a process forked from a Lance user (a parallel part), Lance runs in a fresh helper
        process: batches go to it as an Arrow IPC stream, finished fragments come back as JSON lines."""
        process = subprocess.Popen([sys.executable, "-m", "stable_datasets.layouts.lance.write", uri, str(per_file),
                                    str(per_group), self.file_version or ""], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        failure: list[BaseException] = []

        def collect() -> None:
            try:
                for line in process.stdout:
                    self._finish_fragment(json.loads(line))
            except BaseException as exc:
                failure.append(exc)

        collector = threading.Thread(target=collect, name="lance writer results", daemon=True)
        collector.start()
        try:
            with pa.ipc.new_stream(process.stdin, self.stored_schema) as stream:
                for batch in self._batches():
                    stream.write_batch(batch)
            process.stdin.close()
        except BaseException:
            process.kill()
            raise
        finally:
            collector.join()
            code = process.wait()
        if failure:
            raise failure[0]
        if code != 0:
            stderr = process.stderr.read().decode(errors="replace")
            raise os_error_of(stderr) or StableDatasetsError(f"the Lance writer process failed (exit {code}): "
                                                             f"{stderr[-2000:]}")

    def _finish_fragment(self, meta: dict[str, Any]) -> None:
        rows = int(meta["physical_rows"])
        files = [f"{DATASET_DIR}/data/{f['path']}" for f in meta["files"]]
        self._rows_done += rows
        self._fragments.append(meta)
        for number, rel in enumerate(files):
            path = self.directory / rel
            sha256 = FileHasher(path).finish()  # also fsyncs it, before the journal says it is done
            shard = ShardInfo(path=rel, num_rows=rows if number == 0 else 0, num_bytes=path.stat().st_size,
                              sha256=sha256)
            self._shards.append(shard)
            if self.journal is not None:  # the fragment's metadata rides with its last data file
                self.journal.append(shard, self._rows_done, {"fragment": meta} if number == len(files) - 1 else None)

    def _raise_error(self) -> None:
        if isinstance(self._error, OSError):
            raise self._error  # a full disk keeps its errno, so the build names it and keeps the journal
        raise StableDatasetsError(f"writing the Lance dataset failed: {self._error}") from self._error

    def _put(self, item: Any) -> None:
        while True:
            if self._error is not None:
                self._raise_error()
            if not self._thread.is_alive():
                raise StableDatasetsError("the Lance writer thread stopped unexpectedly")
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._put(batch.cast(self.stored_schema) if self.blob_columns else batch)

    def close(self) -> list[ShardInfo]:
        self._put(_END)
        self._thread.join()
        if self._error is not None:
            self._raise_error()
        return list(self._shards)

    def abort(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(_Abort("build aborted"), timeout=5)
            self._thread.join(timeout=30)

    def extra_metadata(self) -> dict[str, Any]:
        return {"fragments": self._fragments}


def write_fragment_chunks(rows: _Rows, schema: pa.Schema, uri: str, per_file: int, per_group: int,
                          file_version: str | None = None) -> Iterator[dict[str, Any]]:
    """Lance fragments of at most `per_file` rows each, written one chunk at a time so each can be
    journaled as it finishes; yields each fragment's metadata (JSON). `file_version`: Lance's
    data storage version (None: pylance's default)."""
    lance = lance_module()
    while not rows.exhausted():
        reader = pa.RecordBatchReader.from_batches(schema, rows.take(per_file))
        for fragment in lance.fragment.write_fragments(reader, uri, schema=schema, mode="create",
                                                       max_rows_per_file=per_file, max_rows_per_group=per_group,
                                                       data_storage_version=file_version):
            yield fragment.to_json()


def _write_from_stdin(uri: str, per_file: int, per_group: int, file_version: str | None) -> None:
    """The helper process of `Writer._write_through_helper`."""
    reader = pa.ipc.open_stream(sys.stdin.buffer)
    for meta in write_fragment_chunks(_Rows(iter(reader)), reader.schema, uri, per_file, per_group, file_version):
        sys.stdout.write(json.dumps(meta) + "\n")
        sys.stdout.flush()


def commit_parts(staging: Path, parts: list[PartResult], schema: pa.Schema,
                 files: PartFiles = ON_DISK) -> list[ShardInfo]:
    """Place every part's data files in `staging/data.lance` (moved, or left on the store: `files`) and commit
    their fragments once, in order. Lance's commit writes only the manifest from the fragments' metadata: it
    needs no data file on this disk."""
    lance = lance_module()
    data_dir = staging / DATASET_DIR / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    fragments = []
    known: dict[str, ShardInfo] = {}
    for part in parts:
        for shard in part.shards:
            if shard.path.startswith(f"{DATASET_DIR}/data/"):
                files.place(staging, part, shard.path, shard.path)  # data file names are unique (Lance uuids)
                known[shard.path] = shard
        fragments.extend(lance.fragment.FragmentMetadata.from_json(json.dumps(f))
                         for f in part.extra.get("fragments", []))
    lance.LanceDataset.commit(str(staging / DATASET_DIR), lance.LanceOperation.Overwrite(schema, fragments))
    return describe_files(staging, known=known)


def merge_parts(staging: Path, parts: list[PartResult],
                files: PartFiles = ON_DISK) -> tuple[list[ShardInfo], dict[str, Any]]:
    schema = Features.from_dict(next(p.features for p in parts if p.features is not None)).arrow_schema
    blobs = lance_blobs.blob_column_names(schema)
    stored = lance_blobs.stored_schema(schema, blobs) if blobs else schema
    shards = commit_parts(staging, parts, stored, files)
    extra: dict[str, Any] = {VERSION_KEY: lance_blobs.BLOB_LAYOUT_VERSION, "blob_columns": blobs}
    fragments = [f for p in parts for f in p.extra.get("fragments", [])]
    if fragments and all(len(f["files"]) == 1 for f in fragments):
        extra[FRAGMENT_FILES_KEY] = [f["files"][0]["path"] for f in fragments]
    if blobs:
        extra[BLOB_DIGESTS] = _merged_digests(staging, parts, blobs, files)
    return shards, extra


#: the blob columns' `dataset_digests` of a part's fragments (`seal_part`), and of a cache's (its extra)
BLOB_DIGESTS = "blob_digests"


def _merged_digests(staging: Path, parts: list[PartResult], blobs: list[str], files: PartFiles) -> dict[str, str]:
    """The digests every part carries (computed where it was written), else read from the merged dataset here."""
    carried = [p.extra.get(BLOB_DIGESTS) for p in parts]
    if all(isinstance(d, dict) for d in carried):
        return {name: digest for d in carried for name, digest in d.items()}  # type: ignore[union-attr]
    if not files.on_disk:
        lacking = next(p.index for p, d in zip(parts, carried) if not isinstance(d, dict))
        raise StableDatasetsError(f"part {lacking} of {len(parts)} records no blob digests and its data files are "
                                  "not on this disk; build again with download_mode='force_rebuild'")
    return lance_blobs.dataset_digests(open_lance(str(staging / DATASET_DIR)), blobs)


def seal_part(folder: Path, part: PartResult) -> PartResult:
    """The part with its blob digests (`BLOB_DIGESTS`), for a merge that reads only part records (a Ray build on
    an object store): the digests read the blob descriptions in the data files, so they are computed here, on
    the node that wrote them. Its fragments are committed in its own folder for that, and the commit removed."""
    if part.features is None or not part.extra.get("fragments"):
        return part
    schema = Features.from_dict(part.features).arrow_schema
    blobs = lance_blobs.blob_column_names(schema)
    if not blobs:
        return part
    lance = lance_module()
    dataset = folder / DATASET_DIR
    fragments = [lance.fragment.FragmentMetadata.from_json(json.dumps(f)) for f in part.extra["fragments"]]
    try:
        lance.LanceDataset.commit(str(dataset), lance.LanceOperation.Overwrite(
            lance_blobs.stored_schema(schema, blobs), fragments))
        digests = lance_blobs.dataset_digests(open_lance(str(dataset)), blobs)
    finally:
        for bookkeeping in ("_versions", "_transactions"):
            shutil.rmtree(dataset / bookkeeping, ignore_errors=True)
    return dataclasses.replace(part, extra={**part.extra, BLOB_DIGESTS: digests})


if __name__ == "__main__":
    _write_from_stdin(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 and sys.argv[4]
                      else None)
