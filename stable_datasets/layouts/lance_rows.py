"""`lance_rows`: one Lance dataset per split (`data.lance/` inside the cache directory).

Write: Lance pulls record batches from a reader while our build loop pushes them, so the
Lance writer runs in a thread fed through a bounded queue: memory stays at about two
batches and no intermediate IPC copy is made. The thread writes fragments (Lance's
distributed-write API): each fragment of `max_rows_per_file` rows is fsynced, hashed and
journaled, so a killed build resumes after its last fragment. Parts written in parallel each
write fragments in their own folder; `merge_parts` moves their data files into one dataset
and commits every fragment once, in order. Read: `take` for random and batched access,
fragment scans for iteration. Lance handles are not fork-safe, so they are opened lazily
and reopened in every new process (see LayoutBackend.ensure_open).
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

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import cell_getter, compile_row_builder
from stable_datasets.arrow.tables import index_array
from stable_datasets.cache.hashing import FileHasher
from stable_datasets.cache.journal import ShardJournal
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.errors import CacheError, StableDatasetsError
from stable_datasets.features.features import Features
from stable_datasets.layouts import base, lance_blobs
from stable_datasets.layouts.base import LayoutWriter, StreamUnits, TableBackend, require_positive_ints
from stable_datasets.layouts.lance_access import (
    LanceProxy,
    lance_module,
    lance_read_errors,
    needs_helper_process,
    open_lance,
)
from stable_datasets.layouts.lance_storage import DATASET_DIR, LanceStorage
from stable_datasets.layouts.part_files import ON_DISK, PartFiles

if TYPE_CHECKING:
    from stable_datasets.write.parts import PartResult

# pylance warns before every fork once imported. Our handles are reopened in every new process,
# so forked DataLoader workers are safe; the warning would only mislead.
warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)

NAME = "lance_rows"
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
        process = subprocess.Popen([sys.executable, "-m", "stable_datasets.layouts.lance_rows", uri, str(per_file),
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


class Backend(LanceStorage, TableBackend):
    """Rows through Lance's `take` and scans; in caches written with blob columns (`extra.lance_rows_version`
    2) on local disk, blob columns are slices of the mapped data files and small columns are held in
    memory from open (see lance_blobs), so a random batch makes no Lance call at all."""

    @property
    def dataset_dir(self) -> Path:
        # caches of the upstream stable-datasets keep the Lance dataset at the cache root ("dataset_dir": ".")
        return self.directory / self.metadata.extra.get("dataset_dir", DATASET_DIR)

    @property
    def blob_columns(self) -> list[str]:
        """Columns stored with the blob encoding ([] in caches written before it)."""
        if self.metadata.extra.get(VERSION_KEY, 1) < lance_blobs.BLOB_LAYOUT_VERSION:
            return []
        return list(self.metadata.extra.get("blob_columns") or [])

    #: the data file (inside data/) of the one fragment this backend serves, or None: every fragment
    fragment_file: str | None = None

    def read_fragment(self, data_file: str) -> None:
        """Serve only the fragment stored in `data_file`, as rows 0..n: a remote stream downloads one data file at a
        time (storage.remote_stream), so the others the manifest names are absent. `_metadata.json` is then
        that fragment's (its one data file, its rows)."""
        self.fragment_file = data_file

    def serve_unit(self, unit: ShardInfo) -> None:
        self.read_fragment(unit.path[len(DATA_FILES):])

    @classmethod
    def stream_units(cls, metadata: CacheMetadata) -> StreamUnits | None:
        """The fragments' data files in row order (`fragment_files`), with the manifest files beside each; None for
        caches written before `fragment_files` (a stream reads them in place, with ranged GETs)."""
        names = metadata.extra.get(FRAGMENT_FILES_KEY)
        if names is None or metadata.extra_files or not metadata.shards:
            return None
        by_path = {s.path: s for s in metadata.shards}
        units = [by_path.get(f"{DATA_FILES}{name}") for name in names] if isinstance(names, list) else None
        if units is None or None in units or sum(u.num_rows for u in units) != metadata.num_rows:  # type: ignore[union-attr]
            raise CacheError(f"invalid cache metadata: {FRAGMENT_FILES_KEY} {names!r} do not name the Lance data "
                             f"files {METADATA_FILE} lists, holding its {metadata.num_rows} rows")
        shared = [s for s in metadata.shards
                  if s.path.startswith(f"{DATASET_DIR}/") and not s.path.startswith(DATA_FILES)]
        group = int(metadata.layout_options.get("max_rows_per_group", DEFAULT_OPTIONS["max_rows_per_group"]))
        return StreamUnits(units, shared, group)  # type: ignore[arg-type]

    def ray_dataset(self, ray: Any, override_num_blocks: int | None) -> Any | None:
        """Ray's own Lance reader, on disk or in place on the store; None with blob columns (Lance would
        give their descriptions, not their bytes)."""
        if self.metadata.extra.get("blob_columns") or self.fragment_file is not None:
            return None
        if self.lance_base is None and self.origin is not None:  # a remote cache downloaded to this node only
            return None
        uri, options = (f"{self.lance_base[0]}/{DATASET_DIR}", self.lance_base[1]) if self.lance_base else (
            str(self.directory / DATASET_DIR), None)
        return ray.data.read_lance(uri, storage_options=options, override_num_blocks=override_num_blocks)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "fragment_file": self.fragment_file}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if state.get("fragment_file"):
            self.read_fragment(state["fragment_file"])

    def ensure_open(self) -> None:
        """In a forked child, the mapped files and held columns of the parent stay valid: only the Lance
        handle is dropped (its runtime does not survive fork), to be reopened if a read needs it."""
        if self._generation == base._fork_generation:
            return
        if self._generation != -1 and getattr(self, "_blobs", None) is not None:
            self._dataset = None
            self._generation = base._fork_generation
            return
        self._open()
        self._generation = base._fork_generation

    def _lance(self) -> Any:
        if self._dataset is None:
            with lance_read_errors(self.dataset_dir, what="opening it"):
                self._dataset = self.lance_dataset(self.metadata.extra.get("dataset_dir", DATASET_DIR))
        return self._dataset

    def _check_columns(self, stored_schema: pa.Schema) -> None:
        recorded = sorted(self.metadata.features)  # order aside: metadata stored as sorted JSON keeps no order
        if sorted(stored_schema.names) != recorded:  # e.g. a damaged manifest: rows would miss named columns
            raise CacheError(f"{self.dataset_dir}: the Lance dataset holds columns {sorted(stored_schema.names)} but "
                             f"{METADATA_FILE} records {recorded}; the cache is corrupt (rebuild it with "
                             "download_mode='force_rebuild')")

    def _open(self) -> None:
        self._dataset, self._blobs, self._held = None, None, None
        if self.fragment_file is not None:
            self._open_fragment(self.fragment_file)
            return
        with lance_read_errors(self.dataset_dir, what="opening it"):
            dataset = self._lance()
            stored_schema = dataset.schema
            stored = dataset.count_rows()
        self.check_rows(self.directory / DATASET_DIR, stored, self.metadata.num_rows)
        self._check_columns(stored_schema)
        blobs = self.blob_columns
        self._schema = stored_schema
        if not blobs:
            return
        self._schema = lance_blobs.served_schema(stored_schema, Features.from_dict(self.metadata.features).arrow_schema)
        if self.lance_base is not None:
            return  # an object store: nothing to map, Lance reads the bytes (take_with_bytes)
        with lance_read_errors(self.dataset_dir, what="reading the blob descriptions"):
            layout, descriptions = dataset.blob_descriptions(blobs) if isinstance(dataset, LanceProxy) else \
                lance_blobs.blob_descriptions(dataset, blobs)
        prefix = f"{DATASET_DIR}/data/"
        sizes = {s.path[len(prefix):]: s.num_bytes for s in self.metadata.shards if s.path.startswith(prefix)}
        self._blobs = lance_blobs.BlobReader(self.dataset_dir, blobs, layout, descriptions, sizes,
                                             self.metadata.extra.get("blob_digests") or {})
        self.check_rows(self.directory / DATASET_DIR, self._blobs.num_rows, self.metadata.num_rows)
        rest = [name for name in self._schema.names if name not in blobs]
        if rest and self._blobs.file_bytes - self._blobs.blob_bytes <= lance_blobs.HELD_MEMORY:
            with lance_read_errors(self.dataset_dir, what="reading the small columns"):
                self._held = pa.Table.from_batches(list(dataset.to_batches(columns=rest)),
                                                   schema=pa.schema([self._schema.field(n) for n in rest]))
            self._held = self._held.combine_chunks()
            self.check_rows(self.directory / DATASET_DIR, self._held.num_rows, self.metadata.num_rows)
        self._row_getters = None

    def _open_fragment(self, name: str) -> None:
        """One fragment from its local data file: blob columns mapped, the other columns held (one fragment's
        worth, whatever HELD_MEMORY says), so after these two Lance reads its rows need no Lance call."""
        blobs = self.blob_columns
        with lance_read_errors(self.dataset_dir, what=f"reading the fragment in data/{name}"):
            dataset = self._lance()
            stored_schema = dataset.schema
            rest = [n for n in stored_schema.names if n not in blobs]
            descriptions = lance_blobs.fragment_table(dataset, name, blobs) if blobs else pa.table({})
            held = lance_blobs.fragment_table(dataset, name, rest) if rest else None
        self._check_columns(stored_schema)
        logical = Features.from_dict(self.metadata.features).arrow_schema
        self._schema = lance_blobs.served_schema(stored_schema, logical) if blobs else stored_schema
        rows = descriptions.num_rows if blobs else held.num_rows
        self.check_rows(self.dataset_dir / "data" / name, rows, self.metadata.num_rows)
        prefix = f"{DATASET_DIR}/data/"
        sizes = {s.path[len(prefix):]: s.num_bytes for s in self.metadata.shards if s.path.startswith(prefix)}
        self._blobs = lance_blobs.BlobReader(self.dataset_dir, blobs, [(name, rows)], descriptions, sizes,
                                             (self.metadata.extra.get("blob_digests") or {}) if blobs else None)
        if held is not None:
            self.check_rows(self.dataset_dir / "data" / name, held.num_rows, rows)
            self._held = held.combine_chunks()
        self._row_getters = None
        self._dataset = None  # nothing reads through Lance from here on (a fork helper process, if any, ends)

    def rows_in_place(self) -> bool:
        """Blob columns mapped and every other column held: any rows are gathered with no Lance call."""
        self.ensure_open()
        return self._blobs is not None and (self._held is not None or len(self._blobs.names) == len(self._schema))

    def open_before_fork(self) -> None:
        """Open a v2 cache on local disk now, in the process that forks DataLoader workers: they keep its maps
        and held columns and never import or call Lance (an import of lance is also one of pandas, 1-2 s per
        worker). Other caches are opened where they are read: a worker forked from a Lance user reads through
        the helper process of lance_access."""
        if self.blob_columns and self.lance_base is None:
            self.ensure_open()

    def stored_row_counts(self) -> tuple[int, int]:
        self.ensure_open()
        if self.fragment_file is not None:
            return self._blobs.num_rows, self.metadata.num_rows
        with lance_read_errors(self.dataset_dir, what="counting rows"):
            return self._lance().count_rows(), self.metadata.num_rows

    def shard_bounds(self) -> np.ndarray | None:
        """Where each fragment (one data file) begins, then the rows: the shards of a stream's shard window."""
        self.ensure_open()
        if self._blobs is not None:
            return self._blobs.starts.astype(np.int64)
        dataset = self._lance()
        sizes = [f.metadata.physical_rows or 0 for f in dataset.get_fragments()] \
            if hasattr(dataset, "get_fragments") else [self.num_rows]
        return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)

    def block_bounds(self) -> np.ndarray:
        """Fragments, cut every `max_rows_per_group` rows (the unit Lance writes its pages in)."""
        self.ensure_open()
        group = int(self.metadata.layout_options.get("max_rows_per_group", DEFAULT_OPTIONS["max_rows_per_group"]))
        if self._blobs is not None:
            sizes = np.diff(self._blobs.starts).tolist()
        else:
            dataset = self._lance()
            fragments = dataset.get_fragments() if hasattr(dataset, "get_fragments") else []
            sizes = [f.metadata.physical_rows or 0 for f in fragments]
        starts = np.cumsum([0, *sizes])[:-1] if sum(sizes) == self.num_rows else np.zeros(1, np.int64)
        cuts = np.concatenate([np.arange(lo, hi, group) for lo, hi in zip(starts, [*starts[1:], self.num_rows])]
                              or [np.zeros(1, np.int64)])
        return np.unique(np.append(cuts, self.num_rows)).astype(np.int64)

    def _served(self, table: pa.Table) -> pa.Table:
        """A table read through Lance with blob bytes (large_binary) in the served schema."""
        return table.select(self._schema.names).cast(self._schema) if self.blob_columns else table

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        if not len(indices):
            return self._schema.empty_table()
        indices = np.asarray(indices, dtype=np.int64)  # an ndarray is the cheapest form for Lance
        blobs = self._blobs
        if blobs is None:
            with lance_read_errors(self.dataset_dir, indices):
                if self.blob_columns:
                    return self._served(lance_blobs.take_with_bytes(self._lance(), indices, None, self.blob_columns))
                return self._lance().take(indices)
        rest = self._held.take(index_array(indices)) if self._held is not None else None
        if rest is None and len(blobs.names) < len(self._schema):
            with lance_read_errors(self.dataset_dir, indices):
                rest = self._lance().take(indices, columns=[n for n in self._schema.names if n not in blobs.names])
        arrays = [blobs.take(f.name, indices).cast(f.type) if f.name in blobs.names else rest.column(f.name)
                  for f in self._schema]
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def row(self, index: int) -> dict[str, Any]:
        self.ensure_open()
        if self._blobs is None or (self._held is None and len(self._blobs.names) < len(self._schema)):
            return self.rows([index])[0]
        if self._row_getters is None:
            self._row_getters = [self._blobs.cell_getter(f.name) if f.name in self._blobs.names else
                                 cell_getter(self._held.column(f.name).chunk(0)) for f in self._schema]
            self._build_row = compile_row_builder(self._schema.names)
        return self._build_row(self._row_getters, index)

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        self.ensure_open()
        if stop <= start:
            return
        if self._blobs is not None:
            for lo in range(start, stop, batch_rows):
                yield from self.take(np.arange(lo, min(stop, lo + batch_rows), dtype=np.int64)).to_batches()
            return
        options = {"blob_handling": "all_binary"} if self.blob_columns else {}
        with lance_read_errors(self.dataset_dir, range(start, stop)):
            for batch in self._lance().to_batches(offset=start, limit=stop - start, batch_size=batch_rows,
                                                  **options):
                if batch.num_rows:
                    yield self._served(pa.Table.from_batches([batch])).to_batches()[0] if options else batch


if __name__ == "__main__":
    _write_from_stdin(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 and sys.argv[4]
                      else None)
