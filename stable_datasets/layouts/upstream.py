"""Caches written by the upstream stable-datasets (galilai-group/stable-datasets), opened read-only.

Upstream's `_metadata.json` names a `layout` ("arrow-shards", "lance-rows" or
"lance-video-frames"). An "arrow-shards" cache lists its files as `shard_filenames`
(`shard-NNNNN.arrow`) with `shard_row_counts`; an empty split has zero shards. A "lance-rows"
cache is a Lance dataset at the cache root. Neither records features or checksums: each
Arrow field's metadata names only its feature class (`stable_datasets.feature`).
`upstream_metadata` reads such a cache as our `CacheMetadata`: files with their sizes on
disk, features rebuilt from the Arrow schema. Nothing is written.

What upstream did not store cannot come back: a ClassLabel column is served as its int64
values (the names are in the builder), an Array3D/Array4D column as the raw bytes (the shape
is in the builder). Both are said in a warning. A Video column of an Arrow cache is refused
with what to do.

A "lance-video-frames" cache is a Lance dataset at the cache root holding one WebP frame per
row (`video_id`, `frame_idx`, `bytes`), and its `_metadata.json` lists every video as a record
(`T` frames, `H`, `W`, `start_row`, `path`, `checksum`, and the example's scalar columns in
`metadata`). It is read as our `lance_video_frames` layout: its records become ours, the frames
are read where they lie (`dataset_dir` ".", `frame_column` "bytes"), and the scalar columns are
served beside each window as they are in our caches (`others`).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
from loguru import logger

from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.features import Features, Image, Sequence, Value, Video
from stable_datasets.layouts.lance_access import open_lance

UPSTREAM_LAYOUTS = ("arrow-shards", "lance-rows", "lance-video-frames")
#: our layouts by upstream's names (stable_datasets.upstream reports them so); parquet has no upstream name
UPSTREAM_NAMES = {"arrow_shards": "arrow-shards", "lance_rows": "lance-rows",
                  "lance_video_frames": "lance-video-frames", "parquet_shards": "parquet-shards"}
#: upstream's `format` of each of our layouts
UPSTREAM_FORMATS = {"arrow_shards": "arrow", "lance_rows": "lance", "lance_video_frames": "lance",
                    "parquet_shards": "parquet"}
_FEATURE_KEY = b"stable_datasets.feature"
_warned: set[str] = set()  # directories whose losses were already said in this process


def is_upstream(raw: Any) -> bool:
    """Whether a parsed `_metadata.json` has upstream's form (its layout names, no `shards` list)."""
    return isinstance(raw, dict) and raw.get("layout") in UPSTREAM_LAYOUTS and "shards" not in raw


def _value(dtype: pa.DataType, where: str):

    try:
        return Value(str(dtype))
    except ValueError:
        raise CacheError(f"{where}: Arrow type {dtype} has no stable-datasets feature") from None


def _feature(field: pa.Field, where: str, lost: list[str]):

    kind = (field.metadata or {}).get(_FEATURE_KEY, b"").decode()
    where = f"{where}: column {field.name!r}"
    if kind == "Image":
        return Image()
    if kind == "ClassLabel":
        lost.append(f"{field.name!r} (ClassLabel: served as int64 values, names not stored upstream)")
        return _value(field.type, where)
    if kind in ("Array3D", "Array4D"):
        lost.append(f"{field.name!r} ({kind}: served as raw bytes, shape not stored upstream)")
        return _value(field.type, where)
    if kind == "Video":
        raise CacheError(f"{where} is an upstream Video column, which this library stores differently; rebuild the "
                         "dataset with this library (load_dataset(..., download_mode='force_rebuild'))")
    if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
        return Sequence(_value(field.type.value_type, where))
    return _value(field.type, where)


def _shard_schema(path: Path) -> pa.Schema:
    try:
        with pa.memory_map(str(path)) as source:
            return pa.ipc.open_file(source).schema
    except (OSError, pa.ArrowInvalid) as exc:
        raise CacheError(f"{path}: not an Arrow IPC file ({exc})") from None


def upstream_metadata(directory: Path, raw: dict[str, Any]):
    """Our metadata for an upstream cache directory, checked against the files that are there."""

    where = f"{directory / METADATA_FILE}"
    layout = raw["layout"]
    if layout == "lance-rows":
        return _lance_rows(directory, raw, where)
    if layout == "lance-video-frames":
        return _lance_video_frames(directory, raw, where)
    try:
        names = [str(n) for n in raw["shard_filenames"]]
        counts = [int(c) for c in raw["shard_row_counts"]]
        num_rows, num_shards = int(raw["num_rows"]), int(raw["num_shards"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CacheError(f"{where}: unreadable upstream arrow-shards metadata ({exc!r})") from None
    if not len(names) == len(counts) == num_shards or sum(counts) != num_rows or min(counts, default=0) < 0:
        raise CacheError(f"{where}: upstream metadata lists {len(names)} shards with {len(counts)} row counts "
                         f"summing to {sum(counts)}, but records {num_shards} shards and {num_rows} rows")
    shards = []
    for name, count in zip(names, counts):
        if PurePosixPath(name).name != name or name in ("", ".", ".."):
            raise CacheError(f"{where}: shard name {name!r} is not a file name in the cache directory")
        path = directory / name
        if not path.is_file():
            raise CacheError(f"{path}: shard listed in {METADATA_FILE} is missing")
        shards.append(ShardInfo(path=name, num_rows=count, num_bytes=path.stat().st_size, sha256=""))
    schema = _shard_schema(directory / names[0]) if names else pa.schema([])
    return _metadata("arrow_shards", directory, raw, where, schema, num_rows, shards, {})


def _lance_rows(directory: Path, raw: dict[str, Any], where: str):

    try:
        num_rows = int(raw["num_rows"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CacheError(f"{where}: unreadable upstream lance-rows metadata ({exc!r})") from None
    try:
        schema = open_lance(str(directory)).schema
    except Exception as exc:  # Lance raises OSError, ValueError or its own errors for a damaged dataset
        raise CacheError(f"{directory}: not a readable Lance dataset ({type(exc).__name__}: {exc})") from None
    return _metadata("lance_rows", directory, raw, where, schema, num_rows, _lance_files(directory),
                     {"dataset_dir": "."})


def _lance_files(directory: Path):

    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != METADATA_FILE)
    return [ShardInfo(path=p.relative_to(directory).as_posix(), num_rows=0, num_bytes=p.stat().st_size, sha256="")
            for p in files]


def _int(record: dict[str, Any], key: str, where: str) -> int:
    value = record.get(key) if isinstance(record, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CacheError(f"{where}: {key} must be a non-negative integer, got {value!r}")
    return value


def _video_records(raw: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Upstream's `videos` records as ours (frames, first_row, ...) and each video's scalar columns."""
    videos = raw.get("videos")
    if not isinstance(videos, list) or not videos:
        raise CacheError(f"{where}: an upstream lance-video-frames cache must list its videos (a non-empty "
                         f"'videos' list), got {type(videos).__name__}")
    records, others, first_row = [], [], 0
    for i, video in enumerate(videos):
        at = f"{where}: videos[{i}]"
        frames, start = _int(video, "T", at), _int(video, "start_row", at)
        height, width = _int(video, "H", at), _int(video, "W", at)
        if start != first_row:
            raise CacheError(f"{at}: start_row is {start}, expected {first_row} (the frames of the videos before)")
        first_row += frames
        checksum = video.get("checksum")
        records.append({"frames": frames, "height": height, "width": width, "fps": 0.0, "source_height": height,
                        "source_width": width, "first_row": start,
                        "source_sha256": checksum if isinstance(checksum, str) else "",
                        "source": str(video.get("path", ""))})
        metadata = video.get("metadata")
        others.append(dict(metadata) if isinstance(metadata, dict) else {})
    return records, others


def _lance_video_frames(directory: Path, raw: dict[str, Any], where: str):

    records, others = _video_records(raw, where)
    column = raw.get("video_column")
    if not isinstance(column, str) or not column:
        raise CacheError(f"{where}: upstream lance-video-frames metadata names no video_column")
    try:
        dataset = open_lance(str(directory))
        schema = dataset.schema
    except Exception as exc:  # Lance raises OSError, ValueError or its own errors for a damaged dataset
        raise CacheError(f"{directory}: not a readable Lance dataset ({type(exc).__name__}: {exc})") from None
    if "bytes" not in schema.names:
        raise CacheError(f"{directory}: the upstream frame dataset has no 'bytes' column (columns {schema.names})")
    names = list(dict.fromkeys(k for o in others for k in o if k != column))
    try:
        table = pa.Table.from_pylist([{k: o.get(k) for k in names} for o in others])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CacheError(f"{where}: the videos' metadata columns have mixed types ({exc})") from None
    columns = {name: _value(table.schema.field(name).type if table.schema.field(name).type != pa.null()
                            else pa.string(), f"{where}: column {name!r}") for name in names}
    features = Features({column: Video(storage="frames"), **columns})
    skipped = raw.get("n_skipped", 0)
    skipped = skipped if isinstance(skipped, int) and not isinstance(skipped, bool) and skipped >= 0 else 0
    upstream = {k: raw[k] for k in ("format", "layout", "cache_format_version", "encoding", "quality", "resize",
                                    "lineage") if k in raw}
    extra = {"video_column": column, "frame_format": "webp", "num_videos": len(records), "skipped_videos": skipped,
             "videos": records, "dataset_dir": ".", "frame_column": "bytes",
             "others": [{k: o.get(k) for k in names} for o in others], "upstream": upstream}
    return CacheMetadata(layout="lance_video_frames", features=features.to_dict(), num_rows=len(records) + skipped,
                         shards=_lance_files(directory), fingerprint=str(raw.get("schema_fingerprint", "")),
                         extra=extra, cache_format_version=int(raw.get("cache_format_version") or 1))


def _metadata(layout: str, directory: Path, raw: dict[str, Any], where: str, schema: pa.Schema, num_rows: int,
              shards: list, extra: dict[str, Any]):

    lost: list[str] = []
    features = Features({f.name: _feature(f, where, lost) for f in schema})
    if lost and str(directory) not in _warned:
        _warned.add(str(directory))
        logger.warning("{}: upstream cache opened read-only; {}", directory, "; ".join(lost))
    upstream = {k: raw[k] for k in ("format", "layout", "cache_format_version", "compression", "lineage") if k in raw}
    return CacheMetadata(layout=layout, features=features.to_dict(), num_rows=num_rows, shards=shards,
                         fingerprint=str(raw.get("schema_fingerprint", "")), extra={**extra, "upstream": upstream},
                         cache_format_version=int(raw.get("cache_format_version") or 1))

