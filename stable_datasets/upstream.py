"""Upstream stable-datasets' `cache.py` names, over this library (change one import).

Code written against galilai-group/stable-datasets calls `stable_datasets.cache`'s
functions directly: `write_sharded_arrow_cache(generator, features, cache_dir)`,
`open_cache(cache_dir, features)`, `read_shard(path)`... This module keeps those names,
signatures and result objects, so `from stable_datasets.upstream import open_cache` is the
only change. Underneath, everything is ours: the writers publish our caches through the one
write path (checksums, atomic publish), `open_cache` returns our `StableDataset` as its
`backend`, and it opens both caches written by upstream and ours. docs/upstream-cache-api.md
maps each name to the function it uses.

Where we differ on purpose it is said here and in the page: upstream's schema fingerprint is
the `repr` of its own feature classes, which this library cannot reproduce, so an upstream
cache is checked against `features` by column names; `num_encode_workers`/`workers` are
accepted and not used (the write path picks its workers).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.dataset.open import open_cache as _open_cache
from stable_datasets.features import Features, Video
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, canonical_json, fingerprint
from stable_datasets.layouts import layout_for, layout_for_storage_format, layout_module
from stable_datasets.layouts.checked import read_metadata
from stable_datasets.layouts.upstream import UPSTREAM_FORMATS, UPSTREAM_NAMES, is_upstream
from stable_datasets.version import __version__
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.plan import SplitJobs, WritePlan
from stable_datasets.write.sources import ExampleSource
from stable_datasets.write.split import write_split

__all__ = ["DEFAULT_SHARD_SIZE_BYTES", "CacheOpenResult", "LanceCacheMeta", "ShardedCacheMeta", "cache_fingerprint",
           "detect_cache_format", "detect_cache_layout", "encode_example", "open_cache", "read_lance_cache_meta",
           "read_shard", "read_sharded_cache_meta", "validate_sharded_cache", "write_lance_cache",
           "write_lance_video_frames_cache", "write_sharded_arrow_cache"]

DEFAULT_SHARD_SIZE_BYTES = float("inf")  # upstream's default: one file per split
_CACHE_FORMAT_VERSION = 1  # what upstream's readers accept in an upstream cache
# upstream's LanceVideoFramesBackend keyword -> ours; its defaults serve every frame alone
_VIDEO_DEFAULTS = {"window_length": 1, "frame_skip": 0, "hop_size": 1, "min_video_frames": None}


class ShardedCacheMeta:
    """Upstream's descriptor of a sharded Arrow cache (same slots and `shard_paths`)."""

    __slots__ = (
        "cache_dir",
        "compression",
        "num_rows",
        "num_shards",
        "schema_fingerprint",
        "shard_filenames",
        "shard_row_counts",
    )

    def __init__(self, cache_dir: Path, num_rows: int, num_shards: int, shard_filenames: list[str],
                 shard_row_counts: list[int], schema_fingerprint: str, compression: str | None = None):
        self.cache_dir = Path(cache_dir)
        self.num_rows = num_rows
        self.num_shards = num_shards
        self.shard_filenames = shard_filenames
        self.shard_row_counts = shard_row_counts
        self.schema_fingerprint = schema_fingerprint
        self.compression = compression

    @property
    def shard_paths(self) -> list[Path]:
        return [self.cache_dir / f for f in self.shard_filenames]


class LanceCacheMeta:
    """Upstream's descriptor of a Lance cache (same slots)."""

    __slots__ = ("cache_dir", "num_rows", "schema_fingerprint")

    def __init__(self, cache_dir: Path, num_rows: int, schema_fingerprint: str):
        self.cache_dir = Path(cache_dir)
        self.num_rows = num_rows
        self.schema_fingerprint = schema_fingerprint


class CacheOpenResult:
    """What `open_cache` returns: the backend (here our StableDataset), its rows, layout and metadata."""

    __slots__ = ("backend", "layout", "metadata", "num_rows")

    def __init__(self, *, backend: Any, num_rows: int, layout: str, metadata: Any):
        self.backend = backend
        self.num_rows = int(num_rows)
        self.layout = layout
        self.metadata = metadata


# -- names, fingerprints, encoding -----------------------------------------------------------
def encode_example(example: dict, features: Features, *, cache_dir: Path | None = None) -> dict:
    """One example encoded by `features` (our encoders); keys without a feature pass through,
    numpy scalars as Python values, as upstream does. `cache_dir` is accepted for upstream's
    signature: our encoders keep media inline or by path and write nothing there."""
    del cache_dir
    encoded = {}
    for key, value in example.items():
        feature = features.get(key)
        if feature is not None:
            encoded[key] = feature.encode(value, key)
        else:
            encoded[key] = value.item() if hasattr(value, "item") else value
    return encoded


def cache_fingerprint(cls_name: str, version: str, config_name: str, split: str,
                      storage_format: str = "arrow") -> str:
    """Upstream's cache directory name for a dataset variant and split, character for character, so
    paths computed by upstream code still find the same folders."""
    key = f"{cls_name}:{version}:{config_name}:{split}:{storage_format}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{cls_name.lower()}_{config_name}_{split}_{digest}"


def _features_fingerprint(features: Features) -> str:
    """Our schema fingerprint: the canonical JSON of the features (what our caches record)."""
    return hashlib.sha256(canonical_json(features.to_dict()).encode()).hexdigest()[:16]


def _raw_metadata(cache_dir: Path) -> dict[str, Any]:
    path = Path(cache_dir) / METADATA_FILE
    if not path.exists():
        raise FileNotFoundError(f"No metadata file at {path}")
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"Cache metadata at {path} is not a JSON object")
    return raw


def detect_cache_format(cache_dir: Path) -> str:
    """`"arrow"`, `"lance"` (or `"parquet"`, ours only) from the cache's metadata."""
    raw = _raw_metadata(cache_dir)
    if is_upstream(raw) or "format" in raw:
        if "format" not in raw:
            raise ValueError(f"Cache metadata at {Path(cache_dir) / METADATA_FILE} is missing required 'format'. "
                             "Rebuild the cache with the current stable-datasets version.")
        return raw["format"]
    return UPSTREAM_FORMATS[read_metadata(cache_dir).layout]


def detect_cache_layout(cache_dir: Path) -> str:
    """Upstream's layout name ("arrow-shards", "lance-rows", "lance-video-frames") of an upstream
    cache or of ours (our "parquet_shards" is "parquet-shards")."""
    raw = _raw_metadata(cache_dir)
    if "layout" not in raw:
        raise ValueError(f"Cache metadata at {Path(cache_dir) / METADATA_FILE} is missing required 'layout'. "
                         "Rebuild the cache with the current stable-datasets version.")
    return raw["layout"] if is_upstream(raw) else UPSTREAM_NAMES.get(raw["layout"], raw["layout"])


# -- reading ---------------------------------------------------------------------------------
def read_shard(shard_path: Path) -> pa.Table:
    """Memory-map one Arrow IPC shard (upstream's or our arrow_shards') and return its table."""
    with pa.memory_map(str(shard_path), "r") as source:
        return pa.ipc.open_file(source).read_all()


def read_sharded_cache_meta(cache_dir: Path) -> ShardedCacheMeta:
    """The shards of a sharded Arrow cache, checked for consistency (ValueError as upstream)."""
    cache_dir = Path(cache_dir)
    raw = _raw_metadata(cache_dir)
    if not is_upstream(raw):
        metadata = read_metadata(cache_dir)
        if UPSTREAM_NAMES.get(metadata.layout) != "arrow-shards":
            raise ValueError(f"Not an Arrow sharded cache: {cache_dir} (layout={metadata.layout!r})")
        meta = _sharded_meta(cache_dir, metadata)
        for name in meta.shard_filenames:
            if not (cache_dir / name).exists():
                raise ValueError(f"Missing shard file: {cache_dir / name}")
        return meta
    if raw.get("format") != "arrow":
        raise ValueError(f"Not an Arrow sharded cache: {cache_dir} (format={raw.get('format')!r})")
    if raw.get("layout") != "arrow-shards":
        raise ValueError(f"Not an Arrow sharded cache: {cache_dir} (layout={raw.get('layout')!r})")
    if raw.get("cache_format_version") != _CACHE_FORMAT_VERSION:
        raise ValueError(f"Unsupported cache format version {raw.get('cache_format_version')} "
                         f"(expected {_CACHE_FORMAT_VERSION})")
    names, counts = raw["shard_filenames"], raw["shard_row_counts"]
    num_rows, num_shards = raw["num_rows"], raw["num_shards"]
    if len(names) != num_shards:
        raise ValueError(f"Metadata claims {num_shards} shards but lists {len(names)} filenames")
    if len(counts) != num_shards:
        raise ValueError(f"Metadata claims {num_shards} shards but has {len(counts)} row counts")
    if sum(counts) != num_rows:
        raise ValueError(f"Sum of shard_row_counts ({sum(counts)}) != num_rows ({num_rows})")
    for name in names:
        if not (cache_dir / name).exists():
            raise ValueError(f"Missing shard file: {cache_dir / name}")
    return ShardedCacheMeta(cache_dir, num_rows, num_shards, names, counts, raw.get("schema_fingerprint", ""),
                            raw.get("compression"))


def validate_sharded_cache(cache_dir: Path, features: Features) -> ShardedCacheMeta:
    """`read_sharded_cache_meta`, and the cache must hold `features`: our caches by their schema
    fingerprint; upstream's by column names (its fingerprint hashes its own classes' repr)."""
    meta = read_sharded_cache_meta(cache_dir)
    if is_upstream(_raw_metadata(cache_dir)):
        stored = read_shard(meta.shard_paths[0]).schema.names if meta.shard_paths else list(features)
        if sorted(stored) != sorted(features):
            raise ValueError(f"Schema fingerprint mismatch: cache has columns {stored}, expected {list(features)}.  "
                             "Delete the cache and rebuild.")
        return meta
    expected = _features_fingerprint(Features(dict(features)))
    if meta.schema_fingerprint != expected:
        raise ValueError(f"Schema fingerprint mismatch: cache has {meta.schema_fingerprint}, expected {expected}.  "
                         "Delete the cache and rebuild.")
    return meta


def read_lance_cache_meta(cache_dir: Path) -> LanceCacheMeta:
    """Row count and fingerprint of a Lance cache, from its metadata only (Lance is not opened)."""
    cache_dir = Path(cache_dir)
    raw = _raw_metadata(cache_dir)
    if is_upstream(raw):
        if raw.get("format") != "lance":
            raise ValueError(f"Not a Lance cache: {cache_dir} (format={raw.get('format')!r})")
        return LanceCacheMeta(cache_dir, raw["num_rows"], raw.get("schema_fingerprint", ""))
    metadata = read_metadata(cache_dir)
    if UPSTREAM_FORMATS.get(metadata.layout) != "lance":
        raise ValueError(f"Not a Lance cache: {cache_dir} (format={UPSTREAM_FORMATS.get(metadata.layout)!r})")
    return LanceCacheMeta(cache_dir, metadata.num_rows, metadata.fingerprint)


def _video_options(backend_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Upstream's LanceVideoFramesBackend keywords as our window options (frame_skip=k is a stride of k+1)."""
    unknown = sorted(set(backend_kwargs) - {*_VIDEO_DEFAULTS, "batch_readahead"})
    if unknown:
        raise TypeError(f"open_cache: unknown backend_kwargs {unknown} for a lance-video-frames cache; "
                        f"known: {sorted([*_VIDEO_DEFAULTS, 'batch_readahead'])}")
    given = {**_VIDEO_DEFAULTS, **{k: v for k, v in backend_kwargs.items() if k != "batch_readahead"}}
    return {"window_length": int(given["window_length"]), "frame_stride": int(given["frame_skip"]) + 1,
            "hop": int(given["hop_size"]), "min_video_frames": given["min_video_frames"]}


def open_cache(cache_dir: Path, features: Features, *, backend_kwargs: dict | None = None) -> CacheOpenResult:
    """Open a cache (upstream's or ours) read-only: the backend is our StableDataset.

    For a video-frames cache `backend_kwargs` takes upstream's window keywords (`window_length`,
    `frame_skip`, `hop_size`, `min_video_frames`) with upstream's defaults (every frame alone);
    `batch_readahead` is accepted for Lance caches and not needed.
    """
    cache_dir = Path(cache_dir)
    backend_kwargs = dict(backend_kwargs or {})
    layout = detect_cache_layout(cache_dir)
    if layout == "arrow-shards":
        meta: Any = validate_sharded_cache(cache_dir, features)
        dataset = _open_cache(cache_dir)
    elif layout == "lance-rows":
        meta = read_lance_cache_meta(cache_dir)
        dataset = _open_cache(cache_dir)
    elif layout == "lance-video-frames":
        dataset = _open_cache(cache_dir, **_video_options(backend_kwargs))
        raw = _raw_metadata(cache_dir)
        meta = raw if is_upstream(raw) else dataset.cache_metadata[0].to_dict()
    elif layout == "parquet-shards":
        dataset = _open_cache(cache_dir)
        meta = dataset.cache_metadata[0].to_dict()
    else:
        raise ValueError(f"Unknown cache layout {layout!r} in {cache_dir}")
    return CacheOpenResult(backend=dataset, num_rows=len(dataset), layout=layout, metadata=meta)


# -- writing (our caches) ----------------------------------------------------------------------
class _UpstreamExamples(ExampleSource):
    """Upstream's generator of (key, example) pairs, written in one job (a generator cannot be split)."""

    keyed = False

    def __init__(self, pairs: Iterable[Any], label: str):
        self.pairs, self.label = pairs, label

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        return SplitJobs([None])

    def examples(self, job: Any) -> Iterator[tuple[int, Any]]:
        for index, pair in enumerate(self.pairs):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"{self.label}: the generator must yield (key, example) pairs, item {index} is "
                                f"{type(pair).__name__}")
            yield index, pair[1]

    def describe(self) -> str:
        return self.label


def _write(label: str, generator: Iterable[Any], features: Features, cache_dir: Path, layout: str,
           options: dict[str, Any], lineage: dict | None) -> CacheMetadata:
    """Publish `generator`'s examples as our cache at `cache_dir`, replacing a cache of ours already
    there (upstream replaces it too); a reader of the old build keeps its files until it closes them."""

    features = features if isinstance(features, Features) else Features(dict(features))
    target = Path(cache_dir).expanduser().absolute()
    options = {**layout_module(layout).DEFAULT_OPTIONS, **options}
    inputs = {"written_by": f"stable_datasets.upstream.{label}", "write_id": uuid.uuid4().hex,
              "features": features.to_dict(), "layout": layout, "layout_options": options,
              "lineage": lineage or {}, "cache_format_version": CACHE_FORMAT_VERSION, "library_version": __version__}
    plan = WritePlan(target=target, layout=layout, options=options, fingerprint=fingerprint(inputs),
                     fingerprint_inputs=inputs, builder_name=target.name, config_name="default", version="",
                     split="train", info={"description": f"written by stable_datasets.upstream.{label}"},
                     features=features, media_root=target.parent, evict=False)  # a folder the caller names
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target.parent / f".{target.name}.lock"):  # write_split's caller holds the build lock
        return write_split(plan, _UpstreamExamples(generator, label), JobRunner(num_proc=None))


def write_sharded_arrow_cache(generator: Iterable[Any], features: Features, cache_dir: Path, *,
                              shard_size_bytes: float = DEFAULT_SHARD_SIZE_BYTES, batch_size: int = 1000,
                              compression: str | None = None, num_encode_workers: int = 0,
                              single_file: bool = False, lineage: dict | None = None) -> ShardedCacheMeta:
    """Our arrow_shards cache from upstream's generator contract; `shard_size_bytes` is our
    `max_shard_size` (infinite or `single_file=True`: one file), `compression` the IPC codec."""
    del num_encode_workers
    limit = shard_size_bytes if not single_file and shard_size_bytes != float("inf") else 1 << 62
    metadata = _write("write_sharded_arrow_cache", generator, features, cache_dir, layout_for_storage_format("arrow"),
                      {"max_shard_size": int(limit), "compression": compression, "batch_rows": int(batch_size)},
                      lineage)
    return _sharded_meta(Path(cache_dir), metadata)


def _sharded_meta(cache_dir: Path, metadata: CacheMetadata) -> ShardedCacheMeta:
    """Upstream's descriptor of our arrow_shards cache: the IPC codec it was written with, and no shards for
    no rows (upstream writes none; our layout keeps one empty file for the schema, not listed here)."""
    shards = [s for s in metadata.shards if s.num_rows] if metadata.num_rows == 0 else list(metadata.shards)
    return ShardedCacheMeta(cache_dir, metadata.num_rows, len(shards), [s.path for s in shards],
                            [s.num_rows for s in shards], _features_fingerprint(Features.from_dict(metadata.features)),
                            (metadata.layout_options or {}).get("compression"))


def write_lance_cache(generator: Iterable[Any], features: Features, cache_dir: Path, *, batch_size: int = 1000,
                      num_encode_workers: int = 0, lineage: dict | None = None) -> LanceCacheMeta:
    """Our lance_rows cache from upstream's generator contract."""
    del num_encode_workers
    metadata = _write("write_lance_cache", generator, features, cache_dir, layout_for_storage_format("lance"),
                      {"batch_rows": int(batch_size)}, lineage)
    return LanceCacheMeta(Path(cache_dir), metadata.num_rows, metadata.fingerprint)


def write_lance_video_frames_cache(generator: Iterable[Any], features: Features, cache_dir: Path, *,
                                   video_column: str | None = None, quality: int = 65, resize: int | None = None,
                                   workers: int | None = None, skip_corrupt: bool = True,
                                   lineage: dict | None = None) -> LanceCacheMeta:
    """Our lance_video_frames cache (one WebP frame per row) from upstream's generator contract.

    `quality` is our `webp_quality`; `resize` our `frame_resize` (ours keeps the aspect ratio,
    `resize` being the shorter side; upstream squares frames whose longer side passes it).
    `num_rows` is the frames stored, as upstream reports it.
    """
    del workers
    features = features if isinstance(features, Features) else Features(dict(features))
    columns = [n for n, f in features.items() if isinstance(f, Video) and f.storage == "frames"]
    if video_column is None:
        if len(columns) != 1:
            raise ValueError("write_lance_video_frames_cache requires exactly one Video(storage='frames') column "
                             "or an explicit video_column.")
        video_column = columns[0]
    feature = features.get(video_column)
    if not isinstance(feature, Video) or feature.storage != "frames":
        raise TypeError(f"{video_column!r} must be a Video(storage='frames') feature.")
    pairs = iter(generator)
    first = next(pairs, None)
    if first is None:
        raise ValueError("Cannot build a lance-video-frames cache from an empty generator.")
    metadata = _write("write_lance_video_frames_cache", _chain(first, pairs), features, cache_dir,
                      layout_for(features, "lance"), {"webp_quality": int(quality), "frame_resize": resize,
                                             "skip_corrupt": bool(skip_corrupt)}, lineage)
    frames = sum(int(v["frames"]) for v in metadata.extra["videos"])
    return LanceCacheMeta(Path(cache_dir), frames, metadata.fingerprint)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest

