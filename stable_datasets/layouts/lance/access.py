"""Opening Lance datasets safely after fork.

pylance keeps a process-wide async runtime whose threads do not survive fork(), so a forked
child that uses the inherited runtime can hang. Opening handles per process id is not enough
on its own. A process forked from a parent that had Lance open therefore reads through
`LanceProxy`: a helper subprocess (started with subprocess, which works inside daemonic
DataLoader workers) with its own fresh runtime, answering `take` and scan requests as
Arrow IPC over its stdin/stdout. Processes that never inherited a Lance runtime open datasets
directly. `STABLE_DATASETS_LANCE_FORK_PROXY=0` turns the proxy off.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.env import child_environment, env_flag, env_json_object
from stable_datasets.errors import CacheError, StableDatasetsError
from stable_datasets.layouts.lance import blobs as lance_blobs

_OPTIONS_ENV = "STABLE_DATASETS_LANCE_STORAGE_OPTIONS"  # storage options handed to a LanceProxy helper
_lance_opened = False  # this process has a Lance runtime (it opened a dataset)
_forked_after_lance = False  # this process was forked from one that did


def _after_fork_in_child() -> None:
    global _forked_after_lance, _lance_opened
    if _lance_opened:
        _forked_after_lance, _lance_opened = True, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def needs_helper_process() -> bool:
    """True in a process forked from one that used Lance: its inherited runtime must not be used."""
    return _forked_after_lance and env_flag("STABLE_DATASETS_LANCE_FORK_PROXY", default=True)


def lance_module() -> Any:
    """`import lance` for writing: the runtime starts, so forked children must not reuse it."""
    global _lance_opened
    import lance

    _lance_opened = True
    return lance


def open_lance(uri: str, storage_options: dict[str, str] | None = None) -> Any:
    """A `lance.LanceDataset`, or a LanceProxy in a process forked from a Lance-using parent.

    `storage_options`: endpoint and credentials of an object store holding `uri`.
    """
    if needs_helper_process():
        return LanceProxy(uri, storage_options)
    return lance_module().dataset(uri, storage_options=storage_options or None)


class RowTaker:
    """Reads rows by row number, fragment by fragment, with each fragment's rows sorted and distinct.

    Video windows are runs of neighbouring and often overlapping frames: asking each fragment once
    for its sorted distinct rows, then putting them in window order with one Arrow `take`, costs
    about a quarter less than Lance's dataset-level `take` in the order asked. For scattered
    random rows it gains nothing, so `lance_rows` keeps the dataset-level `take`. Datasets with
    deleted rows (never ours) and helper-process proxies use the dataset-level `take` too.
    """

    def __init__(self, dataset: Any):
        self.dataset = dataset
        fragments = dataset.get_fragments() if hasattr(dataset, "get_fragments") else []
        if any(f.metadata.deletion_file is not None or f.metadata.physical_rows is None for f in fragments):
            fragments = []  # offsets inside a fragment would not be row numbers, or cannot be placed
        self.fragments = fragments
        self.starts = np.cumsum([0] + [f.metadata.physical_rows for f in fragments])

    def take(self, rows: np.ndarray, columns: list[str] | None = None) -> pa.Table:
        rows = np.asarray(rows, dtype=np.int64)
        if not self.fragments:
            return self.dataset.take(rows, columns=columns)
        distinct, order = np.unique(rows, return_inverse=True)
        bounds = np.searchsorted(distinct, self.starts)
        parts = [fragment.take(distinct[lo:hi] - start, columns=columns)
                 for fragment, start, lo, hi in zip(self.fragments, self.starts, bounds, bounds[1:]) if hi > lo]
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        if len(distinct) == len(rows) and bool((distinct == rows).all()):
            return table  # asked in sorted order already
        if any(column.num_chunks > 1 for column in table.columns):
            table = table.combine_chunks()  # a take over many binary chunks is slow
        return table.take(pa.array(order))


def _describe_rows(rows: Any) -> str:
    if isinstance(rows, range):
        return f"rows {rows.start}..{rows.stop - 1}" if len(rows) > 1 else f"row {rows.start}"
    rows = np.asarray(rows).ravel()
    shown = ", ".join(str(int(r)) for r in rows[:5]) + (f", ... ({len(rows)} rows)" if len(rows) > 5 else "")
    return f"row {shown}" if len(rows) == 1 else f"rows {shown}"


@contextlib.contextmanager
def lance_read_errors(dataset_dir: Any, rows: Any = None, what: str = "reading") -> Iterator[None]:
    """Lance's Rust reader reports a damaged or vanished file as a bare OSError, ValueError,
    RuntimeError or panic; raise our CacheError naming the dataset and the rows instead."""

    try:
        yield
    except StableDatasetsError:
        raise
    except BaseException as exc:
        if not isinstance(exc, (OSError, ValueError, RuntimeError, pa.ArrowException)) and \
                type(exc).__name__ != "PanicException":  # pyo3's panic derives from BaseException
            raise
        where = f" ({_describe_rows(rows)})" if rows is not None else ""
        text = " ".join(str(exc).split())[:500] or type(exc).__name__
        raise CacheError(f"{dataset_dir}: the Lance dataset cannot be read, {what}{where}: {type(exc).__name__}: "
                         f"{text}. The cache is damaged or was removed; `stable-datasets verify` checks it, "
                         "load_dataset(..., download_mode='force_rebuild') rebuilds it") from exc


def _write_message(stream: Any, payload: bytes) -> None:
    stream.write(struct.pack("<Q", len(payload)))
    stream.write(payload)
    stream.flush()


def _read_message(stream: Any) -> bytes | None:
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    return stream.read(size)


def _table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


_HELPER_MAIN = "import sys; from stable_datasets.layouts.lance.access import _serve; _serve(sys.argv[1])"


class LanceProxy:
    """The subset of `lance.LanceDataset` our backends use, served by a helper process."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None):
        self.uri = uri
        self._lock = threading.Lock()
        env = child_environment(**{_OPTIONS_ENV: json.dumps(storage_options or {})})  # not argv: they may hold secrets
        # `-c` rather than `-m`: the package imports this module first, and runpy then warns in every worker
        self._process = subprocess.Popen([sys.executable, "-c", _HELPER_MAIN, uri],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.schema = self._call({"op": "schema"}).schema

    def _call(self, request: dict[str, Any]) -> pa.Table:
        with self._lock:
            _write_message(self._process.stdin, json.dumps(request).encode())
            reply = _read_message(self._process.stdout)
        if reply is None:
            raise RuntimeError(f"the Lance helper process for {self.uri} stopped")
        if reply.startswith(b"ERR"):
            raise RuntimeError(reply[3:].decode())
        return pa.ipc.open_stream(reply).read_all()

    def take(self, indices: Any, columns: list[str] | None = None) -> pa.Table:
        return self.take_with_bytes(indices, columns, [])

    def take_with_bytes(self, indices: Any, columns: list[str] | None, blobs: list[str]) -> pa.Table:
        """`take` with the bytes of the blob columns `blobs` (see lance_blobs.take_with_bytes)."""
        values = indices.to_pylist() if isinstance(indices, pa.Array) else [int(i) for i in indices]
        return self._call({"op": "take", "indices": values, "columns": columns, "blobs": blobs})

    def to_batches(self, columns: list[str] | None = None, offset: int = 0, limit: int | None = None,
                   batch_size: int | None = None, blob_handling: str | None = None,
                   **_: Any) -> Iterator[pa.RecordBatch]:
        table = self._call({"op": "scan", "offset": offset, "limit": limit, "columns": columns,
                            "blob_handling": blob_handling})
        yield from table.to_batches(max_chunksize=batch_size)

    def blob_descriptions(self, blobs: list[str]) -> tuple[list[tuple[str, int]], pa.Table]:
        """As lance_blobs.blob_descriptions, read by the helper."""
        table = self._call({"op": "blob_descriptions", "blobs": blobs})
        layout = json.loads(table.schema.metadata[b"layout"])
        return [(name, int(rows)) for name, rows in layout], table.replace_schema_metadata(None)

    def fragment_table(self, data_file: str, columns: list[str]) -> pa.Table:
        """As lance_blobs.fragment_table, read by the helper."""
        return self._call({"op": "fragment_table", "file": data_file, "columns": columns})

    def count_rows(self) -> int:
        return self._call({"op": "count"}).column(0)[0].as_py()

    def __del__(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            try:
                process.stdin.close()
                process.wait(timeout=5)
            except Exception:
                process.kill()


def _serve(uri: str) -> None:
    """The helper: answer requests on stdin with Arrow IPC on stdout until stdin closes."""
    import lance


    dataset = lance.dataset(uri, storage_options=env_json_object(_OPTIONS_ENV) or None)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while (message := _read_message(source)) is not None:
        request = json.loads(message)
        try:
            op = request["op"]
            if op == "schema":
                table = dataset.schema.empty_table()
            elif op == "take":
                table = lance_blobs.take_with_bytes(dataset, request["indices"], request.get("columns"),
                                                    request.get("blobs") or [])
            elif op == "scan":
                table = dataset.to_table(columns=request.get("columns"), offset=request["offset"],
                                         limit=request["limit"], blob_handling=request.get("blob_handling"))
            elif op == "blob_descriptions":
                layout, table = lance_blobs.blob_descriptions(dataset, request["blobs"])
                table = table.replace_schema_metadata({"layout": json.dumps(layout)})
            elif op == "fragment_table":
                table = lance_blobs.fragment_table(dataset, request["file"], request["columns"])
            elif op == "count":
                table = pa.table({"n": [dataset.count_rows()]})
            else:
                raise ValueError(f"unknown request {op!r}")
            _write_message(sink, _table_bytes(table))
        except Exception as exc:
            _write_message(sink, b"ERR" + f"{type(exc).__name__}: {exc}".encode())


if __name__ == "__main__":
    _serve(sys.argv[1])
