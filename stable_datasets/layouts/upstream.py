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

import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.features import Features, Image, Sequence, Value, Video
from stable_datasets.layouts.lance import open_lance

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


def _frame_runs(dataset: Any, directory: Path) -> tuple[dict[int, tuple[int, int]], np.ndarray, int]:
    """Where each video's frames are in the frame dataset, by its `video_id`: id -> (first row, rows) of its one run
    of rows (an id in several runs maps to (-1, -1)); the `frame_idx` column; the row count. Two int columns are
    read, never the frames."""
    try:
        table = dataset.to_table(columns=["video_id", "frame_idx"])
    except Exception as exc:  # Lance raises OSError, ValueError or its own errors for a damaged dataset
        raise CacheError(f"{directory}: the upstream frame dataset's video_id and frame_idx columns cannot be read "
                         f"({type(exc).__name__}: {exc})") from None
    ids = table.column("video_id").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    order = table.column("frame_idx").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    starts = np.flatnonzero(np.diff(ids, prepend=ids[:1] - 1)) if len(ids) else np.zeros(0, np.int64)
    lengths = np.diff(np.append(starts, len(ids)))
    runs: dict[int, tuple[int, int]] = {}
    for video_id, start, length in zip(ids[starts].tolist(), starts.tolist(), lengths.tolist()):
        runs[video_id] = (-1, -1) if video_id in runs else (start, length)
    return runs, order, len(ids)


def _video_records(raw: dict[str, Any], where: str, dataset: Any = None,
                   directory: Path | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Upstream's `videos` records as ours (frames, first_row, ...) and each video's scalar columns.

    With the frame `dataset`, each video's frames are found by its `video_id` (the record's `id`, else its place):
    they must be one run of rows in `frame_idx` order 0..T-1, starting at its `start_row`; the frames all the
    records claim must be the rows the dataset holds, checked before anything is sized by them."""
    videos = raw.get("videos")
    if not isinstance(videos, list) or not videos:
        raise CacheError(f"{where}: an upstream lance-video-frames cache must list its videos (a non-empty "
                         f"'videos' list), got {type(videos).__name__}")
    runs: dict[int, tuple[int, int]] | None = None
    if dataset is not None:
        claimed = sum(_int(video, "T", f"{where}: videos[{i}]") for i, video in enumerate(videos))
        stored = dataset.count_rows()
        if claimed != stored:
            raise CacheError(f"{where}: the videos claim {claimed} frames; the frame dataset holds {stored} rows")
        runs, order, _ = _frame_runs(dataset, directory or Path("."))
    records, others, first_row = [], [], 0
    for i, video in enumerate(videos):
        at = f"{where}: videos[{i}]"
        frames, start = _int(video, "T", at), _int(video, "start_row", at)
        height, width = _int(video, "H", at), _int(video, "W", at)
        if runs is not None:
            video_id = video.get("id", i)
            if isinstance(video_id, bool) or not isinstance(video_id, int):
                raise CacheError(f"{at}: id must be an integer (the video_id of its frames), got {video_id!r}")
            found, length = runs.get(video_id, (start, 0))
            if found < 0:
                raise CacheError(f"{at}: the frames of video_id {video_id} are not one run of rows in the frame "
                                 "dataset")
            if length != frames:
                raise CacheError(f"{at}: T is {frames}, but the frame dataset holds {length} frames of video_id "
                                 f"{video_id}")
            if frames and start != found:
                raise CacheError(f"{at}: start_row is {start}, expected {found} (where the frames of video_id "
                                 f"{video_id} are in the frame dataset)")
            wrong = np.flatnonzero(order[found:found + frames] != np.arange(frames)) if frames else []
            if len(wrong):
                row = found + int(wrong[0])
                raise CacheError(f"{at}: the frames of video_id {video_id} are not stored in frame_idx order "
                                 f"0..{frames - 1} (row {row} holds frame {int(order[row])})")
        elif start != first_row:
            raise CacheError(f"{at}: start_row is {start}, expected {first_row} (the frames of the videos before)")
        start = start if frames else first_row  # a video of no frames takes no rows, wherever it says it starts
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

    _video_records(raw, where)  # the records' own shape first: cheaper than opening the frames
    column = raw.get("video_column")
    if not isinstance(column, str) or not column:
        raise CacheError(f"{where}: upstream lance-video-frames metadata names no video_column")
    try:
        dataset = open_lance(str(directory))
        schema = dataset.schema
    except Exception as exc:  # Lance raises OSError, ValueError or its own errors for a damaged dataset
        raise CacheError(f"{directory}: not a readable Lance dataset ({type(exc).__name__}: {exc})") from None
    missing = [name for name in ("bytes", "video_id", "frame_idx") if name not in schema.names]
    if missing:
        raise CacheError(f"{directory}: the upstream frame dataset has no {missing[0]!r} column (columns "
                         f"{schema.names})")
    records, others = _video_records(raw, where, dataset, directory)
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

