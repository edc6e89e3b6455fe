"""Convert caches of the upstream stable-datasets into ours (`stable-datasets migrate`).

`open_cache` already serves an upstream cache read-only (layouts/upstream.py), but without
checksums, and every open rebuilds its features from the Arrow schema. Migrating writes the
rows once through the one write path: encoded by those features, written by one of our
layouts, published atomically with sizes and checksums. The upstream folder is only read.

An upstream folder is named `<builder>_<config>_<split>_<16 hex digits>`; when the name has
that shape the migrated cache records the builder, config and split it names (for `ls`).
Its fingerprint hashes what the rows came from (the upstream metadata and the files' sizes),
so migrating the same cache twice gives the same fingerprint.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_datasets.cache.limit import root_of
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.cache.paths import cache_root
from stable_datasets.dataset.open import open_cache
from stable_datasets.errors import CacheError
from stable_datasets.features import Features
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint
from stable_datasets.layouts import frames_video_column, layout_for, layout_module
from stable_datasets.layouts.lance.video_frames import STORED_FRAMES, stored_frames_ref
from stable_datasets.layouts.upstream import is_upstream
from stable_datasets.version import __version__
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.plan import SplitJobs, WritePlan
from stable_datasets.write.sources import ExampleSource
from stable_datasets.write.split import refuse_what_cannot_fit, write_split

_UPSTREAM_NAME = re.compile(r"(?P<builder>.+)_(?P<config>[^_]+)_(?P<split>[^_]+)_[0-9a-f]{16}")
_ROWS_PER_JOB_BATCH = 1000


@dataclass(frozen=True)
class Migration:
    source: Path  # the upstream cache folder
    dest: Path  # where our cache is published


def is_upstream_cache(directory: Path) -> bool:
    import json


    try:
        return is_upstream(json.loads((directory / METADATA_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def plan_migrations(source: Path, dest: Path) -> list[Migration]:
    """One upstream cache folder -> `dest`; a folder of them -> `dest/<folder name>` each."""
    source = Path(source).expanduser()
    dest = Path(dest).expanduser()
    if (source / METADATA_FILE).is_file():
        if not is_upstream_cache(source):
            raise CacheError(f"{source}: not a cache of the upstream stable-datasets (its {METADATA_FILE} has "
                             "another form); nothing to migrate")
        return [Migration(source, dest)]
    if not source.is_dir():
        raise CacheError(f"{source}: no such folder")
    found = sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".") and is_upstream_cache(p))
    if not found:
        raise CacheError(f"{source}: holds no cache of the upstream stable-datasets (no folder with an upstream "
                         f"{METADATA_FILE})")
    return [Migration(p, dest / p.name) for p in found]


class UpstreamRows(ExampleSource):
    """The rows of an upstream cache, in order, as stored (images stay their encoded bytes)."""

    keyed = False

    def __init__(self, directory: Path, num_rows: int):
        self.directory = str(directory)
        self.num_rows = num_rows

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        bounds = [round(i * self.num_rows / num_jobs) for i in range(num_jobs + 1)]
        return SplitJobs([(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo] or [(0, 0)])

    def examples(self, job: tuple[int, int]) -> Iterator[tuple[int, dict[str, Any]]]:
        lo, hi = job
        rows = open_cache(self.directory).with_format("python", decode=False).select(range(lo, hi))
        yield from enumerate(rows, start=lo)

    def describe(self) -> str:
        return f"migrate {Path(self.directory).name}"


class UpstreamVideos(ExampleSource):
    """The videos of an upstream lance-video-frames cache, as cells whose frames the frames layout copies
    as stored (STORED_FRAMES: nothing is decoded or re-encoded), with each video's scalar columns.

    One job: the frames are read through Lance in the writing process, which a forked part must not do.
    """

    keyed = False
    columnar = True

    def __init__(self, directory: Path, metadata: CacheMetadata, schema: Any):
        self.directory, self.schema = str(directory), schema
        self.extra = metadata.extra

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        return SplitJobs([None])

    def examples(self, job: Any) -> Iterator[Any]:
        import pyarrow as pa


        column, videos = self.extra["video_column"], self.extra["videos"]
        others = self.extra.get("others") or [{} for _ in videos]
        for lo in range(0, len(videos), _ROWS_PER_JOB_BATCH):
            chunk = range(lo, min(lo + _ROWS_PER_JOB_BATCH, len(videos)))
            cells = [{"path": stored_frames_ref(str(Path(self.directory) / self.extra.get("dataset_dir", ".")),
                                                self.extra.get("frame_column", "frame"), videos[i]["first_row"],
                                                videos[i]["frames"], videos[i]["height"], videos[i]["width"],
                                                videos[i]["source"]),
                      "bytes": None, "extension": STORED_FRAMES, "size": 0, "sha256": videos[i]["source_sha256"]}
                     for i in chunk]
            arrays = [pa.array(cells, self.schema.field(column).type) if name == column else
                      pa.array([others[i].get(name) for i in chunk], self.schema.field(name).type)
                      for name in self.schema.names]
            yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def describe(self) -> str:
        return f"migrate {Path(self.directory).name}"


def migrate_cache(source: Path, dest: Path, *, storage_format: str = "arrow",
                  num_proc: int | None = None) -> CacheMetadata:
    """Write the upstream cache `source` as our cache at `dest` (published atomically); its metadata."""

    source, dest = Path(source).expanduser().resolve(), Path(dest).expanduser().absolute()
    if dest == source or source in dest.parents:
        raise CacheError(f"{dest}: the destination must be outside the upstream cache {source}, which is only read")
    if (dest / METADATA_FILE).exists() or dest.is_symlink():
        raise CacheError(f"{dest}: a cache is already published there; remove it (stable-datasets rm {dest}) or "
                         "choose another --dest")
    upstream = open_cache(source).cache_metadata[0]
    features = Features.from_dict(upstream.features)
    layout = layout_for(features, storage_format)
    options = {**layout_module(layout).DEFAULT_OPTIONS, "batch_rows": _ROWS_PER_JOB_BATCH}
    named = _UPSTREAM_NAME.fullmatch(source.name)
    names = named.groupdict() if named else {"builder": source.name, "config": "default", "split": "train"}
    inputs = {"migrated_from": {"upstream": upstream.extra.get("upstream", {}), "num_rows": upstream.num_rows,
                                "files": [[s.path, s.num_bytes] for s in upstream.shards],
                                "schema_fingerprint": upstream.fingerprint},
              "features": upstream.features, "storage_format": storage_format, "layout_options": options,
              "cache_format_version": CACHE_FORMAT_VERSION, "library_version": __version__}
    plan = WritePlan(target=dest, layout=layout, options=options, fingerprint=fingerprint(inputs),
                     fingerprint_inputs=inputs, builder_name=names["builder"], config_name=names["config"],
                     version="", split=names["split"], info={"description": f"migrated from {source}"},
                     features=features, resumable=True, media_root=dest.parent,
                     expected_bytes=sum(s.num_bytes for s in upstream.shards),
                     # root-wide work (limit, eviction, shared files) only for a destination laid out in the root
                     evict=root_of(dest) == cache_root())
    refuse_what_cannot_fit(plan)  # before any folder is made
    dest.parent.mkdir(parents=True, exist_ok=True)
    rows: ExampleSource = UpstreamRows(source, upstream.num_rows) if frames_video_column(features) is None else \
        UpstreamVideos(source, upstream, features.arrow_schema)
    return write_split(plan, rows, JobRunner(num_proc=num_proc))
