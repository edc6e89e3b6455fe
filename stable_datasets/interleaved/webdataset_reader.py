"""`InterleavedWebdatasetReader`: MINT-1T-style WebDataset tars -> interleaved rows.

Every member whose name ends with one of `json_extensions` (".json" by default; ".meta.json"
works too) is a document, whatever other members share its key: its sample id is the member
name without that extension, percent-decoded (so NeMo Curator's `doc.1.json` and `doc.2.json`
are two documents). Its JSON holds `texts` and `images`, two lists aligned by position (None
where the other modality sits). Text i becomes a text row at position i. Image i becomes an
image row; its token names a member anywhere in the tar (the full name, the name relative to
the JSON's folder, or `key.token`), else the document's default image member: the one named
by `image_member_field`, the first token that is a member, `<sample id or key><ext>` for the
image extensions, or the only image member sharing the JSON's key. A TIFF member gets a
`frame_index` counting up per member: the i-th token naming a multi-frame TIFF is its frame i
(one row per token, as MINT-1T PDF documents are laid out).

Every other JSON field is a passthrough column on the metadata row (position -1): strings and
numbers keep their type, lists and objects become JSON text. `per_image_fields` /
`per_text_fields` are JSON lists whose k-th entry belongs to the k-th non-None image / text;
they go on the item rows. The metadata row keeps the original JSON in `text_content`, so
tar -> Parquet -> tar is lossless.

Lazy by default: image rows get a `source_ref` (tar path, member, byte offset, byte size,
frame index) and no bytes; `materialize_on_read=True` reads the bytes (one frame for a frame
ref). Members with absolute paths or `..` are skipped and reported in `unsafe_members`; a
member over `max_member_bytes`, a truncated tar and a `texts`/`images` value that is not a
list raise an error naming the file (and member or byte offset).
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
from loguru import logger

from stable_datasets.builder.data_files import glob_pattern
from stable_datasets.download.inputs import local_inputs
from stable_datasets.errors import StableDatasetsError
from stable_datasets.interleaved.batch import InterleavedBatch
from stable_datasets.interleaved.keys import split_member, unescape_key
from stable_datasets.interleaved.materialize import MaterializeError, tiff_frame
from stable_datasets.interleaved.schema import (
    INTERLEAVED_SCHEMA,
    RESERVED_COLUMNS,
    align_table,
    build_source_ref,
    reconcile_schema,
    target_schema,
)
from stable_datasets.interleaved.tar_format import TAR_SUFFIXES, TarFormatError, TarMember, iter_tar, map_file

DEFAULT_JSON_EXTENSIONS = (".json",)
DEFAULT_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".webp", ".bmp", ".gif")


class InterleavedReadError(StableDatasetsError):
    """A tar that cannot be read safely or completely."""


class InterleavedFieldTypeError(InterleavedReadError, TypeError):
    """A per-modality field that is not a list (a TypeError, as NeMo Curator raises it)."""


def _dotted(extensions: Sequence[str]) -> tuple[str, ...]:
    """Extensions as name endings: "json" and ".json" both mean ".json"."""
    if isinstance(extensions, str):
        extensions = (extensions,)
    return tuple(e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions)


def _cell(value: Any) -> Any:
    """A JSON value as a table cell: lists and objects as JSON text, everything else unchanged."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value


def _content_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


class _Tar:
    """One tar's members by name, read from a memory map."""

    def __init__(self, path: str, view: memoryview, members: dict[str, TarMember]):
        self.path, self.view, self.members = path, view, members
        self.by_key: dict[str, list[str]] = {}
        for name in members:
            self.by_key.setdefault(split_member(name)[0], []).append(name)

    def read(self, member: TarMember) -> bytes:
        return bytes(self.view[member.offset_data:member.offset_data + member.size])


class InterleavedWebdatasetReader:
    def __init__(self, paths: str | os.PathLike | Sequence[str | os.PathLike], *, fields: Sequence[str] | None = None,
                 max_batch_bytes: int | None = None, materialize_on_read: bool = False,
                 json_extensions: Sequence[str] = DEFAULT_JSON_EXTENSIONS,
                 image_extensions: Sequence[str] = DEFAULT_IMAGE_EXTENSIONS, texts_field: str = "texts",
                 images_field: str = "images", sample_id_field: str | None = None,
                 image_member_field: str | None = None, per_image_fields: Sequence[str] = (),
                 per_text_fields: Sequence[str] = (), max_member_bytes: int = 256 << 20,
                 schema: pa.Schema | None = None, schema_overrides: Mapping[str, pa.DataType] | None = None,
                 storage_options: dict[str, Any] | None = None):
        self.paths = _expand(paths, TAR_SUFFIXES, storage_options)
        self.fields = list(fields) if fields is not None else None
        if self.fields:
            clash = sorted(set(self.fields) & set(RESERVED_COLUMNS))
            if clash:
                raise ValueError(f"fields contains reserved keys {clash}; reserved columns are always read")
        self.max_batch_bytes = max_batch_bytes
        self.materialize_on_read = materialize_on_read
        self.json_extensions = _dotted(json_extensions)
        self.image_extensions = _dotted(image_extensions)
        self.texts_field, self.images_field = texts_field, images_field
        self.sample_id_field, self.image_member_field = sample_id_field, image_member_field
        self.per_image_fields, self.per_text_fields = tuple(per_image_fields), tuple(per_text_fields)
        self.max_member_bytes = max_member_bytes
        self.schema, self.schema_overrides = schema, schema_overrides
        self.unsafe_members: list[str] = []
        self._warned: set[tuple[str, str]] = set()

    # -- tar walking -------------------------------------------------------------------------
    def _documents(self, path: str) -> Iterator[tuple[_Tar, TarMember, str]]:
        """(tar, JSON member, key) for each document of one tar, in member order."""
        try:
            mapped, view = map_file(path)
        except TarFormatError as exc:
            raise InterleavedReadError(str(exc)) from None
        try:
            members: dict[str, TarMember] = {}
            try:
                for member in iter_tar(path, view):
                    name = PurePosixPath(member.name)
                    if name.is_absolute() or ".." in name.parts:
                        self.unsafe_members.append(f"{path}:{member.name}")
                        continue
                    if member.size > self.max_member_bytes:
                        raise InterleavedReadError(f"{path}: member {member.name!r} is {member.size} bytes, over "
                                                   f"the {self.max_member_bytes}-byte limit (max_member_bytes)")
                    members.pop(member.name, None)  # a later copy of a name replaces the earlier one, as in tar
                    members[member.name] = member
            except TarFormatError as exc:
                raise InterleavedReadError(str(exc)) from None
            tar = _Tar(path, view, members)
            documents = 0
            for name, member in members.items():
                lowered = name.lower()
                extension = next((e for e in self.json_extensions if lowered.endswith(e)), None)
                if extension is not None:
                    documents += 1
                    yield tar, member, name[:-len(extension)]
            if not documents and members:
                logger.warning("{}: no document: none of its {} members ends with {} (json_extensions)", path,
                               len(members), "/".join(self.json_extensions))
        finally:
            try:
                view.release()
                if mapped is not None:
                    mapped.close()
            except BufferError:  # a traceback still holds a slice of the map: the collector unmaps it
                pass
        if self.unsafe_members:
            logger.warning("skipped {} tar members with absolute or '..' paths, e.g. {}", len(self.unsafe_members),
                           self.unsafe_members[0])

    # -- one sample -----------------------------------------------------------------------------
    def _list(self, where: str, record: dict, name: str) -> list:
        """A field that must hold a list (absent or null: empty)."""
        value = record.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InterleavedFieldTypeError(f"{where}: field {name!r} must be a list, got {type(value).__name__} "
                                            f"{str(value)[:40]!r}")
        return value

    def _items(self, where: str, record: dict, name: str) -> list:
        """The texts or images list; anything else gives no items of that modality (NeMo Curator's rule), said
        once per field."""
        value = record.get(name)
        if value is None or isinstance(value, list):
            return value or []
        self._warn_once(name, "field {!r} is a {}, not a list, in {}: no items of it are read (warned once)", name,
                        type(value).__name__, where)
        return []

    def _warn_once(self, field: str, message: str, *args: Any) -> None:
        if (field, message) not in self._warned:
            self._warned.add((field, message))
            logger.warning(message, *args)

    def _per_item(self, where: str, record: dict, names: Sequence[str]) -> dict[str, list]:
        out = {}
        for name in names:
            if name not in record:
                self._warn_once(name, "per-modality field {!r} not found in source sample {} (filling with null; "
                                      "warned once)", name, where)
                continue
            out[name] = self._list(where, record, name)
        return out

    def _default_member(self, tar: _Tar, record: dict, tokens: list, key: str, sample_id: str) -> str | None:
        if self.image_member_field:
            named = record.get(self.image_member_field)
            if isinstance(named, str) and named in tar.members:
                return named
        for token in tokens:
            if isinstance(token, str) and token in tar.members:
                return token
        for stem in dict.fromkeys((sample_id, key)):
            for extension in self.image_extensions:
                if f"{stem}{extension}" in tar.members:
                    return f"{stem}{extension}"
        group = [n for n in tar.by_key.get(split_member(key)[0], ()) if n.lower().endswith(self.image_extensions)]
        return group[0] if len(group) == 1 else None

    @staticmethod
    def _member_for(tar: _Tar, token: Any, key: str, default: str | None) -> str | None:
        if isinstance(token, str):
            folder = key.rpartition("/")[0]
            for candidate in (token, f"{folder}/{token}" if folder else None, f"{key}.{token}"):
                if candidate in tar.members:
                    return candidate
        return default

    def _sample_rows(self, tar: _Tar, json_member: TarMember, key: str) -> list[dict[str, Any]]:
        path, where = tar.path, f"{tar.path}:{json_member.name}"
        raw = tar.read(json_member)
        try:
            record = json.loads(raw.decode("utf-8"))  # JSON text is UTF-8 (RFC 8259); no guessing at UTF-16
        except ValueError as exc:
            raise InterleavedReadError(f"{_where(path, json_member)}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise InterleavedReadError(f"{_where(path, json_member)}: not a JSON object ({type(record).__name__})")
        if self.sample_id_field and record.get(self.sample_id_field) is None:
            raise InterleavedReadError(f"{where}: no {self.sample_id_field!r} field (sample_id_field)")
        sample_id = str(record[self.sample_id_field]) if self.sample_id_field else unescape_key(key)
        texts = self._items(where, record, self.texts_field)
        tokens = self._items(where, record, self.images_field)
        per_text = self._per_item(where, record, self.per_text_fields)
        per_image = self._per_item(where, record, self.per_image_fields)
        special = {*RESERVED_COLUMNS, self.texts_field, self.images_field, self.sample_id_field,
                   self.image_member_field, *self.per_image_fields, *self.per_text_fields}
        if self.fields is None:
            passthrough = {k: _cell(v) for k, v in record.items() if k not in special}
        else:
            passthrough = {k: _cell(record.get(k)) for k in self.fields}
            for name in self.fields:
                if name not in record:
                    self._warn_once(name, "Requested fields not found in source sample: {!r} in {} (filling with "
                                          "null; warned once)", name, where)
        rows = [{"sample_id": sample_id, "position": -1, "modality": "metadata", "content_type": "application/json",
                 "text_content": raw.decode("utf-8", "replace"),
                 "source_ref": build_source_ref(path, json_member.name, json_member.offset_data, json_member.size),
                 **passthrough}]
        rows.extend(self._text_rows(where, sample_id, texts, per_text))
        rows.extend(self._image_rows(tar, where, record, key, sample_id, tokens, per_image))
        rows[1:] = sorted(rows[1:], key=lambda r: r["position"])
        return rows

    def _text_rows(self, where: str, sample_id: str, texts: list, per_text: dict[str, list]) -> list[dict]:
        rows = []
        for position, text in enumerate(texts):
            if text is None:
                continue
            row = {"sample_id": sample_id, "position": position, "modality": "text", "content_type": "text/plain",
                   "text_content": str(text)}
            row.update({f: _cell(_at(values, len(rows))) for f, values in per_text.items()})
            rows.append(row)
        self._check_lengths(where, per_text, len(rows), "text")
        return rows

    def _image_rows(self, tar: _Tar, where: str, record: dict, key: str, sample_id: str, tokens: list,
                    per_image: dict[str, list]) -> list[dict]:
        default = self._default_member(tar, record, tokens, key, sample_id)
        frames_used: dict[str, int] = {}
        rows: list[dict] = []
        for position, token in enumerate(tokens):
            if token is None:
                continue
            row: dict[str, Any] = {"sample_id": sample_id, "position": position, "modality": "image"}
            row.update({f: _cell(_at(values, len(rows))) for f, values in per_image.items()})
            rows.append(row)
            name = self._member_for(tar, token, key, default)
            if name is None:
                row["materialize_error"] = f"no tar member for image {token!r}"
                continue
            member = tar.members[name]
            row["content_type"] = _content_type(name)
            frame = None
            if row["content_type"] == "image/tiff":
                frame = frames_used.get(name, 0)
                frames_used[name] = frame + 1
            row["source_ref"] = build_source_ref(tar.path, name, member.offset_data, member.size, frame)
            if self.materialize_on_read:
                row["binary_content"] = tar.read(member)
                if frame is not None:
                    try:
                        row["binary_content"] = tiff_frame(row["binary_content"], frame, f"{tar.path}:{name}")
                    except MaterializeError as exc:
                        row["materialize_error"] = f"{type(exc).__name__}: {exc}"
        self._check_lengths(where, per_image, len(rows), "image")
        return rows

    def _check_lengths(self, where: str, per_item: dict[str, list], count: int, modality: str) -> None:
        for name, values in per_item.items():
            if len(values) != count:
                self._warn_once(name, "per-{} field {!r} has {} values but {} has {} non-None {}s (the k-th value "
                                "goes with the k-th {}; warned once)", modality, name, len(values), where, count,
                                modality, modality)

    # -- batches --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[InterleavedBatch]:
        """One batch per tar, or batches of about `max_batch_bytes` (a sample is never split)."""
        rows: list[dict[str, Any]] = []
        files: list[str] = []
        held = 0
        for path in self.paths:
            for tar, json_member, key in self._documents(path):
                try:
                    sample = self._sample_rows(tar, json_member, key)
                except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                    if isinstance(exc, InterleavedReadError):
                        raise
                    raise InterleavedReadError(f"{_where(path, json_member)}: unusable sample "
                                               f"({type(exc).__name__}: {exc})") from exc
                rows.extend(sample)
                if not files or files[-1] != path:  # a batch lists only the files its rows came from
                    files.append(path)
                held += sum(len(r.get("text_content") or "") + len(r.get("binary_content") or b"") for r in sample)
                if self.max_batch_bytes is not None and held >= self.max_batch_bytes:
                    yield self._batch(rows, files)
                    rows, files, held = [], [], 0
            if rows and self.max_batch_bytes is None:
                yield self._batch(rows, files)
                rows, files, held = [], [], 0
        if rows:
            yield self._batch(rows, files)

    def _requested(self) -> list[str]:
        """Passthrough columns every batch has, even when no document carries them."""
        return list(dict.fromkeys([*(self.fields or ()), *self.per_text_fields, *self.per_image_fields]))

    def _batch(self, rows: list[dict[str, Any]], files: Sequence[str]) -> InterleavedBatch:
        names = [n for n in dict.fromkeys([*self._requested(), *(k for r in rows for k in r)])
                 if n not in RESERVED_COLUMNS]
        reserved = [pa.array([r.get(f.name) for r in rows], f.type) for f in INTERLEAVED_SCHEMA]
        passthrough = [_column(name, [r.get(name) for r in rows]) for name in names]
        schema = pa.schema([*INTERLEAVED_SCHEMA, *(pa.field(n, a.type) for n, a in zip(names, passthrough))])
        table = pa.Table.from_arrays([*reserved, *passthrough], schema=schema)
        if self.schema is not None or self.schema_overrides:
            table = align_table(table, target_schema(table.schema, self.schema, self.schema_overrides))
        return InterleavedBatch(table, tuple(files))

    def read(self) -> InterleavedBatch:
        """Everything as one batch."""
        batches = list(iter(self))
        if not batches:
            return self._batch([], self.paths)
        schema = reconcile_schema([b.table.schema for b in batches])
        return InterleavedBatch(pa.concat_tables([align_table(b.table, schema) for b in batches]), tuple(self.paths))


def _column(name: str, values: list) -> pa.Array:
    """Arrow infers the type; values of mixed kinds (1 and "a") fall back to JSON text for the non-strings."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        logger.debug("passthrough column {!r} mixes value types; non-strings are kept as JSON text", name)
        return pa.array([v if v is None or isinstance(v, str) else json.dumps(v) for v in values], pa.string())


def _where(path: str, member: TarMember) -> str:
    return f"{path}: member {member.name!r} at byte {member.offset_data}"


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None


def _expand(paths: Any, suffixes: tuple[str, ...], storage_options: dict[str, Any] | None = None) -> list[str]:
    """Files, folders and globs as file paths; URLs (a prefix or glob too) as local verified copies
    (download.inputs)."""

    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:  # an empty list of inputs reads as nothing, as in NeMo Curator (a folder or glob must match)
        return []
    items = local_inputs(items, suffixes, storage_options)
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

