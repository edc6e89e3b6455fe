"""Writers for interleaved batches: Parquet part files and WebDataset tar shards.

Both are context managers with `write(batch)`. They have four modes: "error" (the target
must not exist), "overwrite", "append" (new parts after the existing ones) and "ignore"
(an existing target is left alone and nothing is written). Lazy image rows are materialized
first (unless `materialize_on_write=False`, which leaves them null), and
`on_materialize_error` decides what a row with `materialize_error` set becomes: "error",
"warn", "drop_row" or "drop_sample". Each part or shard is written to a temp name and renamed.

The tar writer writes what the reader reads back: `{key}.json` holds `sample_id`, the
`texts` / `images` lists (an image token is its member's full name, `{key}.{position}.{ext}`,
which NeMo Curator's reader resolves too), the metadata row's passthrough values with their
types, and each per-item passthrough column as a list (one entry per image row, per text
row, or per item when both kinds carry values).
"""

from __future__ import annotations

import json
import mimetypes
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stable_datasets.interleaved.batch import InterleavedBatch
from stable_datasets.interleaved.keys import escape_key
from stable_datasets.interleaved.materialize import apply_error_policy, materialize
from stable_datasets.interleaved.schema import (
    MODALITIES,
    RESERVED_COLUMNS,
    align_table,
    parse_source_ref,
    target_schema,
)
from stable_datasets.interleaved.tar_format import TarWriter

MODES = ("error", "overwrite", "append", "ignore")


class _Writer:
    pattern = "part-{:05d}"
    suffix = ""

    def __init__(self, path: str | os.PathLike, *, mode: str = "error", on_materialize_error: str = "error",
                 materialize_on_write: bool = True):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self.on_materialize_error = on_materialize_error
        self.materialize_on_write = materialize_on_write
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
        if self.materialize_on_write:
            return materialize(table, self.on_materialize_error)
        return apply_error_policy(table, self.on_materialize_error)


class InterleavedParquetWriter(_Writer):
    """Parquet parts; `schema=` (exact columns) or `schema_overrides=` (some column types) fix what is written."""

    suffix = ".parquet"

    def __init__(self, path: str | os.PathLike, *, mode: str = "error", on_materialize_error: str = "error",
                 materialize_on_write: bool = True, compression: str = "zstd", row_group_bytes: int = 64 << 20,
                 schema: pa.Schema | None = None, schema_overrides: Mapping[str, pa.DataType] | None = None):
        super().__init__(path, mode=mode, on_materialize_error=on_materialize_error,
                         materialize_on_write=materialize_on_write)
        self.compression, self.row_group_bytes = compression, row_group_bytes
        self.schema, self.schema_overrides = schema, schema_overrides

    def write(self, batch: InterleavedBatch | pa.Table) -> None:
        if self.skip:
            return
        table = self._prepare(batch)
        table = align_table(table, target_schema(table.schema, self.schema, self.schema_overrides))
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
                 materialize_on_write: bool = True, samples_per_shard: int = 1000, texts_field: str = "texts",
                 images_field: str = "images"):
        super().__init__(path, mode=mode, on_materialize_error=on_materialize_error,
                         materialize_on_write=materialize_on_write)
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
            refs = [parse_source_ref(r["source_ref"]) if r["modality"] == "image" else {} for r in rows]
            order = sorted(range(len(rows)), key=lambda i: (rows[i]["position"], refs[i].get("frame_index") or 0))
            self._write_sample([rows[i] for i in order], [refs[i] for i in order])
            self._samples_in_shard += 1

    def _write_sample(self, rows: list[dict[str, Any]], refs: list[dict[str, Any]]) -> None:
        sample_id = rows[0]["sample_id"]
        key = escape_key(sample_id)
        meta = next((r for r in rows if r["modality"] == "metadata"), None)
        original: dict[str, Any] = {}
        if meta and meta.get("text_content"):
            try:
                original = json.loads(meta["text_content"])
            except ValueError:
                original = {}
        record = dict(original) if isinstance(original, dict) else {}
        passthrough = [n for n in rows[0] if n not in RESERVED_COLUMNS]
        on_meta = [n for n in passthrough if meta and meta.get(n) is not None]
        for name in on_meta:
            record[name] = _restore(meta[name], record.get(name))
        items = [(r, ref) for r, ref in zip(rows, refs) if r["modality"] != "metadata"]
        length = max((r["position"] for r, _ in items), default=-1) + 1
        texts: list[Any] = [None] * length
        images: list[Any] = [None] * length
        written: set[str] = set()
        for r, ref in items:
            if r["modality"] == "text":
                texts[r["position"]] = r["text_content"]
                continue
            extension = _extension(ref.get("member"), r.get("content_type"))
            token = f"{key}.{r['position']}.{extension}"
            images[r["position"]] = token
            if token not in written and r.get("binary_content") is not None:
                self._add(token, r["binary_content"])
                written.add(token)
        for name in passthrough:
            if name not in on_meta:
                values = _per_item_values(name, [r for r, _ in items])
                if values is not None:
                    kept = record.get(name) if isinstance(record.get(name), list) else []
                    record[name] = [_restore(v, _at(kept, i)) for i, v in enumerate(values)]
        record["sample_id"] = sample_id
        record[self.texts_field], record[self.images_field] = texts, images
        self._add(f"{key}.json", json.dumps(record, ensure_ascii=False).encode("utf-8"))


_EXTENSIONS = {"image/jpeg": "jpg", "image/png": "png", "image/tiff": "tiff", "image/webp": "webp",
               "image/gif": "gif", "image/bmp": "bmp"}


def _extension(member: str | None, content_type: str | None) -> str:
    """The image member's extension: the source member's, else from the content type, else "bin"."""
    base = (member or "").rpartition("/")[2]
    if "." in base:
        return base.rpartition(".")[2]
    if content_type in _EXTENSIONS:
        return _EXTENSIONS[content_type]
    guessed = mimetypes.guess_extension(content_type or "", strict=False)
    return guessed.lstrip(".") if guessed else "bin"


def _per_item_values(name: str, items: list[dict[str, Any]]) -> list[Any] | None:
    """A per-item column as the JSON list the reader reads back: per image, per text, or per item if both."""
    images = [r.get(name) for r in items if r["modality"] == "image"]
    texts = [r.get(name) for r in items if r["modality"] == "text"]
    on_images, on_texts = any(v is not None for v in images), any(v is not None for v in texts)
    if on_images and on_texts:
        return [r.get(name) for r in items]
    return images if on_images else texts if on_texts else None


def _restore(value: Any, original: Any) -> Any:
    """A cell as a JSON value: JSON text goes back to a list or object where the source JSON had one."""
    if isinstance(value, str) and isinstance(original, (dict, list)):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _at(values: list, index: int) -> Any:
    return values[index] if index < len(values) else None
