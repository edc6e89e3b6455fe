"""`lance_rows`: one Lance dataset per split (`data.lance/` inside the cache directory).

Write: Lance pulls record batches from a reader while our build loop pushes them, so the
Lance writer runs in a thread fed through a bounded queue: memory stays at about two
batches and no intermediate IPC copy is made. Read: `take` for random and batched access,
fragment scans for iteration. Lance handles are not fork-safe, so they are opened lazily
and reopened in every new process (see LayoutBackend.ensure_open).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.errors import StableDatasetsError
from stable_datasets.layouts.base import LayoutWriter, TableBackend, require_positive_ints
from stable_datasets.layouts.lance_access import lance_module, open_lance

# pylance warns before every fork once imported. Our handles are reopened in every new process,
# so forked DataLoader workers are safe; the warning would only mislead.
warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)

NAME = "lance_rows"
DATASET_DIR = "data.lance"
DEFAULT_OPTIONS: dict[str, Any] = {"max_rows_per_file": 1 << 20, "max_rows_per_group": 1024}


def check_options(options: dict[str, Any]) -> None:
    require_positive_ints(options, "max_rows_per_file", "max_rows_per_group")


_END = object()


class _Abort(Exception):
    pass


def describe_files(directory: Path, dataset_dir: str = DATASET_DIR) -> list[ShardInfo]:
    """Every file of a Lance dataset with size and checksum; data files carry their row counts."""
    rows_by_file: dict[str, int] = {}
    dataset = open_lance(str(directory / dataset_dir))
    for fragment in dataset.get_fragments():
        for data_file in fragment.data_files():
            rows_by_file[f"{dataset_dir}/data/{data_file.path}"] = fragment.count_rows()
    shards = []
    for root, _dirs, files in os.walk(directory / dataset_dir):
        for name in sorted(files):
            path = Path(root) / name
            rel = path.relative_to(directory).as_posix()
            shards.append(ShardInfo(path=rel, num_rows=rows_by_file.get(rel, 0), num_bytes=path.stat().st_size,
                                    sha256=file_sha256(path)))
    return sorted(shards, key=lambda s: s.path)


class Writer(LayoutWriter):
    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        super().__init__(directory, schema, {**DEFAULT_OPTIONS, **options})
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lance writer", daemon=True)
        self._thread.start()

    def _batches(self) -> Iterator[pa.RecordBatch]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Abort):
                raise item
            yield item

    def _run(self) -> None:
        try:
            reader = pa.RecordBatchReader.from_batches(self.schema, self._batches())
            lance_module().write_dataset(reader, str(self.directory / DATASET_DIR), schema=self.schema, mode="create",
                                max_rows_per_file=self.options["max_rows_per_file"],
                                max_rows_per_group=self.options["max_rows_per_group"])
        except BaseException as exc:  # reported to the building thread
            self._error = exc

    def _put(self, item: Any) -> None:
        while True:
            if self._error is not None:
                raise StableDatasetsError(f"writing the Lance dataset failed: {self._error}") from self._error
            if not self._thread.is_alive():
                raise StableDatasetsError("the Lance writer thread stopped unexpectedly")
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._put(batch)

    def close(self) -> list[ShardInfo]:
        self._put(_END)
        self._thread.join()
        if self._error is not None:
            raise StableDatasetsError(f"writing the Lance dataset failed: {self._error}") from self._error
        return describe_files(self.directory)

    def abort(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(_Abort("build aborted"), timeout=5)
            self._thread.join(timeout=30)


class Backend(TableBackend):
    def _open(self) -> None:
        self._dataset = open_lance(str(self.directory / DATASET_DIR))
        self._schema = self._dataset.schema
        self.check_rows(self.directory / DATASET_DIR, self._dataset.count_rows(), self.metadata.num_rows)

    def stored_row_counts(self) -> tuple[int, int]:
        self.ensure_open()
        return self._dataset.count_rows(), self.metadata.num_rows

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        if not len(indices):
            return self._schema.empty_table()
        return self._dataset.take(np.asarray(indices, dtype=np.int64))  # an ndarray is the cheapest form

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        self.ensure_open()
        if stop <= start:
            return
        for batch in self._dataset.to_batches(offset=start, limit=stop - start, batch_size=batch_rows):
            if batch.num_rows:
                yield batch
