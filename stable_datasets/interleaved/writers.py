"""Writers for interleaved batches: Parquet part files and WebDataset tar shards.

Both are context managers with `write(batch)`. They have four modes: "error" (the target
must not exist), "overwrite", "append" (new parts after the existing ones) and "ignore"
(an existing target is left alone and nothing is written). Lazy image rows are materialized
first, and `on_materialize_error` decides what a failure does: "error", "warn",
"drop_row" or "drop_sample". Each part or shard is written to a temp name and renamed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stable_datasets.interleaved.batch import InterleavedBatch
from stable_datasets.interleaved.keys import escape_key
from stable_datasets.interleaved.materialize import materialize
from stable_datasets.interleaved.schema import MODALITIES, RESERVED_COLUMNS, parse_source_ref
from stable_datasets.interleaved.tar_format import TarWriter

MODES = ("error", "overwrite", "append", "ignore")


class _Writer:
    pattern = "part-{:05d}"
    suffix = ""

    def __init__(self, path: str | os.PathLike, *, mode: str = "error", on_materialize_error: str = "error"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self.on_materialize_error = on_materialize_error
        self.skip = False
        existing = sorted(self.path.glob(f"*{self.suffix}")) if self.path.is_dir() else []
        if existing:
            if mode == "error":
                raise FileExistsError(f"{self.path} already holds {len(existing)} files (mode='error'); use "
                                      "mode='overwrite', 'append' or 'ignore'")
            if mode == "overwrite":
                shutil.rmtree(self.path)
            elif mode == "ignore":
                self.skip = True
        self.path.mkdir(parents=True, exist_ok=True)
        self._next = len(existing) if mode == "append" else 0
        self.files_written: list[Path] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        pass

    def _target(self) -> tuple[Path, Path]:
        final = self.path / (self.pattern.format(self._next) + self.suffix)
        self._next += 1
        return final, final.with_name(f".{final.name}.tmp")

    def _prepare(self, batch: InterleavedBatch | pa.Table) -> pa.Table:
        table = batch.table if isinstance(batch, InterleavedBatch) else batch
        unknown = set(table.column("modality").to_pylist()) - set(MODALITIES)
        if unknown:
            raise ValueError(f"unknown modalities {sorted(unknown)}; known: {MODALITIES}")
        return materialize(table, self.on_materialize_error)


class InterleavedParquetWriter(_Writer):
    suffix = ".parquet"

    def __init__(self, path: str | os.PathLike, *, mode: str = "error", on_materialize_error: str = "error",
                 compression: str = "zstd", row_group_bytes: int = 64 << 20):
        super().__init__(path, mode=mode, on_materialize_error=on_materialize_error)
        self.compression, self.row_group_bytes = compression, row_group_bytes

    def write(self, batch: InterleavedBatch | pa.Table) -> None:
        if self.skip:
            return
        table = self._prepare(batch)
        final, tmp = self._target()
        rows_per_group = max(1, int(self.row_group_bytes // max(table.nbytes / max(table.num_rows, 1), 1)))
        pq.write_table(table, tmp, compression=self.compression, row_group_size=rows_per_group)
        os.replace(tmp, final)
        self.files_written.append(final)


class InterleavedWebdatasetWriter(_Writer):
    """MINT-1T-style shards: `{key}.json` (texts/images lists + metadata) and `{key}.{position}.{ext}`."""

    pattern = "shard-{:05d}"
    suffix = ".tar"

    def __init__(self, path: str | os.PathLike, *, mode: str = "error", on_materialize_error: str = "error",
                 samples_per_shard: int = 1000, texts_field: str = "texts", images_field: str = "images"):
        super().__init__(path, mode=mode, on_materialize_error=on_materialize_error)
        self.samples_per_shard = samples_per_shard
        self.texts_field, self.images_field = texts_field, images_field
        self._tar: TarWriter | None = None
        self._samples_in_shard = 0

    def _add(self, name: str, data: bytes) -> None:
        self._tar.add(name, data)

    def _open_shard(self) -> None:
        self._final, self._tmp = self._target()
        self._tar = TarWriter(open(self._tmp, "wb"))  # noqa: SIM115 - closed with the shard
        self._samples_in_shard = 0

    def _close_shard(self) -> None:
        if self._tar is not None:
            self._tar.close()
            os.replace(self._tmp, self._final)
            self.files_written.append(self._final)
            self._tar = None

    def close(self) -> None:
        self._close_shard()

    def write(self, batch: InterleavedBatch | pa.Table) -> None:
        if self.skip:
            return
        table = self._prepare(batch)
        samples: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():  # grouped in Python: one pass, first-appearance order
            samples.setdefault(row["sample_id"], []).append(row)
        for rows in samples.values():
            if self._tar is None or self._samples_in_shard >= self.samples_per_shard:
                self._close_shard()
                self._open_shard()
            rows.sort(key=lambda r: (r["position"], parse_source_ref(r.get("source_ref")).get("frame_index") or 0))
            self._write_sample(rows)
            self._samples_in_shard += 1

    def _write_sample(self, rows: list[dict[str, Any]]) -> None:
        sample_id = rows[0]["sample_id"]
        key = escape_key(sample_id)
        meta = next((r for r in rows if r["modality"] == "metadata"), None)
        record: dict[str, Any] = {}
        if meta and meta.get("text_content"):
            try:
                record = json.loads(meta["text_content"])
            except ValueError:
                record = {}
        if meta:
            for name, value in meta.items():
                if name not in RESERVED_COLUMNS and value is not None and name not in record:
                    record[name] = _from_json_text(value)
        items = [r for r in rows if r["modality"] != "metadata"]
        length = max((r["position"] for r in items), default=-1) + 1
        texts: list[Any] = [None] * length
        images: list[Any] = [None] * length
        written: set[str] = set()
        for r in items:
            if r["modality"] == "text":
                texts[r["position"]] = r["text_content"]
                continue
            ref = parse_source_ref(r.get("source_ref"))
            extension = (ref.get("member") or "").rsplit(".", 1)[-1] if ref.get("member") else \
                (r.get("content_type") or "image/png").split("/")[-1]
            token = f"{r['position']}.{extension}"
            images[r["position"]] = token
            if token not in written and r.get("binary_content") is not None:
                self._add(f"{key}.{token}", r["binary_content"])
                written.add(token)
        record[self.texts_field], record[self.images_field] = texts, images
        self._add(f"{key}.json", json.dumps(record, ensure_ascii=False).encode("utf-8"))


def _from_json_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
