"""`InterleavedWebdatasetReader`: MINT-1T-style WebDataset tars -> interleaved rows.

Each sample is the group of tar members sharing a key. Its JSON member holds `texts` and
`images`, two lists aligned by position (None where the other modality sits). Text i becomes
a text row at position i. Image i becomes an image row: its token names a member of the tar
(full name, `key.token` or the same base name), else the sample's default image member. A
multi-frame TIFF gives one row per frame (`frame_index` in `source_ref`).

Every other JSON field is a passthrough column on the metadata row (position -1), stored as
JSON text if it is not a string. `per_image_fields` / `per_text_fields` (lists aligned with
images / texts) go on the item rows instead. The metadata row keeps the original JSON in
`text_content`, so tar -> Parquet -> tar is lossless.

Lazy by default: image rows get a `source_ref` (tar path, member, byte offset, byte size)
and no bytes; `materialize_on_read=True` reads the bytes. Members with absolute paths or
`..` are skipped and reported in `unsafe_members`; a member over `max_member_bytes` and a
truncated tar raise an error naming the file and the byte offset.
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import cv2
import numpy as np
import pyarrow as pa

from stable_datasets.builder.data_files import glob_pattern
from stable_datasets.errors import StableDatasetsError
from stable_datasets.interleaved.batch import InterleavedBatch
from stable_datasets.interleaved.keys import split_member, unescape_key
from stable_datasets.interleaved.schema import RESERVED_COLUMNS, build_source_ref, reconcile_schema
from stable_datasets.interleaved.tar_format import TarFormatError, TarMember, iter_tar, map_file

DEFAULT_JSON_EXTENSIONS = ("json",)
DEFAULT_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff")


class InterleavedReadError(StableDatasetsError):
    """A tar that cannot be read safely or completely."""


def _jsonish(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value, sort_keys=True)


def tiff_frame_count(data: bytes) -> int:
    ok, frames = cv2.imdecodemulti(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    return len(frames) if ok else 1


class InterleavedWebdatasetReader:
    def __init__(self, paths: str | os.PathLike | Sequence[str | os.PathLike], *, fields: Sequence[str] | None = None,
                 max_batch_bytes: int | None = None, materialize_on_read: bool = False,
                 json_extensions: Sequence[str] = DEFAULT_JSON_EXTENSIONS,
                 image_extensions: Sequence[str] = DEFAULT_IMAGE_EXTENSIONS, texts_field: str = "texts",
                 images_field: str = "images", sample_id_field: str | None = None,
                 image_member_field: str | None = None, per_image_fields: Sequence[str] = (),
                 per_text_fields: Sequence[str] = (), max_member_bytes: int = 256 << 20):
        self.paths = _expand(paths, (".tar",))
        self.fields = list(fields) if fields is not None else None
        if self.fields:
            clash = sorted(set(self.fields) & set(RESERVED_COLUMNS))
            if clash:
                raise ValueError(f"fields {clash} collide with reserved columns")
        self.max_batch_bytes = max_batch_bytes
        self.materialize_on_read = materialize_on_read
        self.json_extensions = tuple(e.lower() for e in json_extensions)
        self.image_extensions = tuple(e.lower() for e in image_extensions)
        self.texts_field, self.images_field = texts_field, images_field
        self.sample_id_field, self.image_member_field = sample_id_field, image_member_field
        self.per_image_fields, self.per_text_fields = tuple(per_image_fields), tuple(per_text_fields)
        self.max_member_bytes = max_member_bytes
        self.unsafe_members: list[str] = []

    # -- tar walking -------------------------------------------------------------------------
    def _groups(self, path: str) -> Iterator[tuple[str, list[TarMember], Any]]:
        """(key, members, read) for each run of members sharing a key; unsafe members are reported."""
        mapped, view = map_file(path)
        try:
            current_key, members = None, []

            def read(member: TarMember) -> bytes:
                return bytes(view[member.offset_data:member.offset_data + member.size])

            try:
                for member in iter_tar(path, view):
                    name = PurePosixPath(member.name)
                    if name.is_absolute() or ".." in name.parts:
                        self.unsafe_members.append(f"{path}:{member.name}")
                        continue
                    if member.size > self.max_member_bytes:
                        raise InterleavedReadError(f"{path}: member {member.name!r} is {member.size} bytes, over "
                                                   f"the {self.max_member_bytes}-byte limit (max_member_bytes)")
                    key, _ = split_member(member.name)
                    if key != current_key and members:
                        yield current_key, members, read
                        members = []
                    current_key = key
                    members.append(member)
            except TarFormatError as exc:
                raise InterleavedReadError(str(exc)) from None
            if members:
                yield current_key, members, read
        finally:
            try:
                view.release()
                if mapped is not None:
                    mapped.close()
            except BufferError:  # a traceback still holds a slice of the map: the collector unmaps it
                pass
        if self.unsafe_members:
            from loguru import logger

            logger.warning("skipped {} tar members with absolute or '..' paths, e.g. {}", len(self.unsafe_members),
                           self.unsafe_members[0])

    # -- one sample -----------------------------------------------------------------------------
    def _sample_rows(self, path: str, key: str, members: list[TarMember], read: Any,
                     json_member: TarMember) -> list[dict[str, Any]]:
        raw = read(json_member)
        try:
            record = json.loads(raw.decode("utf-8"))  # JSON text is UTF-8 (RFC 8259); no guessing at UTF-16
        except ValueError as exc:
            raise InterleavedReadError(f"{_where(path, json_member)}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise InterleavedReadError(f"{_where(path, json_member)}: not a JSON object ({type(record).__name__})")
        if self.sample_id_field and self.sample_id_field not in record:
            raise InterleavedReadError(f"{path}:{json_member.name}: no {self.sample_id_field!r} field "
                                       "(sample_id_field)")
        sample_id = str(record[self.sample_id_field]) if self.sample_id_field else unescape_key(key)
        by_name = {m.name: m for m in members}
        images = [m for m in members if split_member(m.name)[1].rsplit(".", 1)[-1].lower() in self.image_extensions]
        texts = record.get(self.texts_field) or []
        tokens = record.get(self.images_field) or []
        special = {self.texts_field, self.images_field, self.sample_id_field, self.image_member_field,
                   *self.per_image_fields, *self.per_text_fields}
        passthrough = {k: v for k, v in record.items() if k not in special and
                       (self.fields is None or k in self.fields)}
        rows = [{"sample_id": sample_id, "position": -1, "modality": "metadata", "content_type": "application/json",
                 "text_content": raw.decode("utf-8"),
                 "source_ref": build_source_ref(path, json_member.name, json_member.offset_data, json_member.size),
                 **{k: _jsonish(v) for k, v in passthrough.items()}}]
        default = by_name.get(record.get(self.image_member_field)) if self.image_member_field else None
        default = default or (images[0] if len(images) == 1 else None)
        for position in range(max(len(texts), len(tokens))):
            text = texts[position] if position < len(texts) else None
            if text is not None:
                row = {"sample_id": sample_id, "position": position, "modality": "text",
                       "content_type": "text/plain", "text_content": str(text)}
                row.update({f: _jsonish(_at(record.get(f), position)) for f in self.per_text_fields})
                rows.append(row)
            token = tokens[position] if position < len(tokens) else None
            if token is None:
                continue
            member = (by_name.get(str(token)) or by_name.get(f"{key}.{token}")
                      or next((m for m in images if PurePosixPath(m.name).name == PurePosixPath(str(token)).name),
                              None) or default)
            extra = {f: _jsonish(_at(record.get(f), position)) for f in self.per_image_fields}
            if member is None:
                rows.append({"sample_id": sample_id, "position": position, "modality": "image",
                             "materialize_error": f"no tar member for image {token!r}", **extra})
                continue
            extension = member.name.rsplit(".", 1)[-1].lower()
            content_type = mimetypes.types_map.get(f".{extension}", "application/octet-stream")
            data = None
            if self.materialize_on_read or extension in ("tif", "tiff"):
                data = read(member)
            frames = tiff_frame_count(data) if extension in ("tif", "tiff") else 1
            for frame in range(frames):
                rows.append({"sample_id": sample_id, "position": position, "modality": "image",
                             "content_type": content_type,
                             "binary_content": data if self.materialize_on_read else None,
                             "source_ref": build_source_ref(path, member.name, member.offset_data, member.size,
                                                            frame if frames > 1 else None), **extra})
        return rows

    # -- batches --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[InterleavedBatch]:
        """One batch per tar, or batches of about `max_batch_bytes` (a sample is never split)."""
        rows: list[dict[str, Any]] = []
        files: list[str] = []
        held = 0
        for path in self.paths:
            files.append(path)
            for key, members, read in self._groups(path):
                json_members = [m for m in members if split_member(m.name)[1].rsplit(".", 1)[-1].lower()
                                in self.json_extensions]
                for json_member in json_members:
                    try:
                        sample = self._sample_rows(path, key, members, read, json_member)
                    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                        if isinstance(exc, InterleavedReadError):
                            raise
                        raise InterleavedReadError(f"{_where(path, json_member)}: unusable sample "
                                                   f"({type(exc).__name__}: {exc})") from exc
                    rows.extend(sample)
                    held += sum(len(r.get("text_content") or "") + len(r.get("binary_content") or b"")
                                for r in sample)
                    if self.max_batch_bytes is not None and held >= self.max_batch_bytes:
                        yield self._batch(rows, files)
                        rows, files, held = [], [path], 0
            if rows and self.max_batch_bytes is None:
                yield self._batch(rows, files)
                rows, files, held = [], [], 0
        if rows:
            yield self._batch(rows, files)

    def _batch(self, rows: list[dict[str, Any]], files: Sequence[str]) -> InterleavedBatch:
        names = list(dict.fromkeys(k for r in rows for k in r))
        passthrough = [n for n in names if n not in RESERVED_COLUMNS]
        observed = pa.schema([pa.field(n, pa.string()) for n in passthrough])
        schema = reconcile_schema([observed])
        columns = {name: [r.get(name) for r in rows] for name in schema.names}
        return InterleavedBatch(pa.Table.from_pydict(columns, schema=schema), tuple(files))

    def read(self) -> InterleavedBatch:
        """Everything as one batch."""
        batches = list(iter(self))
        if not batches:
            return self._batch([], self.paths)
        schema = reconcile_schema([b.table.schema for b in batches])
        from stable_datasets.interleaved.schema import align_table

        return InterleavedBatch(pa.concat_tables([align_table(b.table, schema) for b in batches]), tuple(self.paths))


def _where(path: str, member: TarMember) -> str:
    return f"{path}: member {member.name!r} at byte {member.offset_data}"


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None


def _expand(paths: Any, suffixes: tuple[str, ...]) -> list[str]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            out.extend(str(p) for p in sorted(path.iterdir()) if p.name.endswith(suffixes))
        elif (matched := glob_pattern(str(item))) is not None:
            out.extend(matched)
        else:
            out.append(str(item))
    if not out:
        raise FileNotFoundError(f"no {'/'.join(suffixes)} files in {paths}")
    return out
