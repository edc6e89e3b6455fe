"""`write_split`: a split's parts, merged by its layout, described and published once.

The caller holds the split's build lock. The staging directory has a fixed name beside the
target, so a build that was killed (or whose worker died) finds what it left: finished parts
are kept when the jobs are the same, an unfinished part continues from its shard journal
where the layout keeps one. Bad data discards the staging directory; nothing is published
until `_metadata.json` is written and the directory renamed.

With `engine="ray"` and an object-store root (`write_split_for_store` with write.places.PartsOnStore), the parts
and the work folder travel through the store (write.remote_parts), so the nodes need not share a disk:
the layout merges the parts where they are, on the store (layouts.part_files), and the staging folder
receives only what the merge writes (`_metadata.json`, Lance manifests, small tables); the cache's data
files stay on the store, named in the returned copies, for the publish to copy there.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.cache.dedup import share_identical_files
from stable_datasets.cache.index import record_publish
from stable_datasets.cache.journal import JOURNAL_FILE
from stable_datasets.cache.limit import configured_limit, evict_over_limit, refuse_if_cannot_fit, root_of
from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.cache.publish import OWNER_FILE, STAGING_PREFIX, discard, publish
from stable_datasets.errors import CacheError, ExampleError, StableDatasetsError, WorkerDiedError
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint, hash_text, to_jsonable
from stable_datasets.layouts import layout_module
from stable_datasets.layouts.part_files import PART_FILES_KEY
from stable_datasets.version import __version__
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.key_check import find_duplicate_key, key_ranges
from stable_datasets.write.parts import PART_PREFIX, PartResult
from stable_datasets.write.places import PARTS_ON_DISK, PartsOnDisk
from stable_datasets.write.plan import SplitJobs, WritePlan
from stable_datasets.write.reuse import PARTS_KEY, part_keys, parts_record
from stable_datasets.write.sources import ExampleSource

JOBS_FILE = "_jobs.json"
WORK_DIR = ".work"


def staging_dir(target: Path) -> Path:
    return target.parent / f"{STAGING_PREFIX}{target.name}"


def _jobs_identity(jobs: list[Any]) -> str:
    try:
        return fingerprint({"jobs": to_jsonable(jobs, "jobs")})
    except TypeError:
        return hash_text(repr(jobs))  # objects with addresses in their repr never match: no reuse


def _claim(staging: Path) -> None:
    """Keep what an earlier attempt left in parts; clear anything else from the staging root."""
    staging.mkdir(parents=True, exist_ok=True)
    for entry in staging.iterdir():
        if entry.name.startswith(PART_PREFIX) or entry.name == JOBS_FILE:
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    (staging / OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                  "started": time.time()}))


def _match_jobs(staging: Path, jobs: list[Any]) -> None:
    """Parts an earlier attempt finished are reused only for the very same jobs."""
    identity = _jobs_identity(jobs)
    record = staging / JOBS_FILE
    previous = record.read_text() if record.is_file() else None
    parts = sorted(p for p in staging.iterdir() if p.name.startswith(PART_PREFIX))
    if previous == identity and parts:
        logger.info("resuming the build in {}: {} part folder(s) from an earlier attempt", staging, len(parts))
    elif parts:
        for part in parts:
            shutil.rmtree(part)
    record.write_text(identity)


def _is_infrastructure_failure(exc: BaseException) -> bool:
    """Failures after which the next run should resume rather than start over."""
    return isinstance(exc, (KeyboardInterrupt, OSError, WorkerDiedError))


def refuse_what_cannot_fit(plan: WritePlan) -> None:
    """Before anything is written (a lock, a staging folder): refuse a build whose size is known
    (`plan.expected_bytes`) when it cannot fit under the cache limit (cache.limit). Builds of unknown size
    are left to the eviction after their publish."""
    if plan.expected_bytes is None or not plan.evict:
        return
    limit, root = configured_limit(plan.cache_limit), root_of(plan.target)
    if limit is not None and root is not None:
        refuse_if_cannot_fit(root, limit, plan.expected_bytes, plan.target)


def write_split(plan: WritePlan, source: ExampleSource, runner: JobRunner | None = None) -> CacheMetadata:
    """Build `plan.target` from `source`; returns the published metadata. Every file of the cache is on this
    disk: a build whose parts go through an object store is `write_split_for_store`'s."""
    return _write_split(plan, source, runner, PARTS_ON_DISK)[0]


def write_split_for_store(plan: WritePlan, source: ExampleSource, runner: JobRunner | None = None,
                          parts_at: PartsOnDisk = PARTS_ON_DISK) -> tuple[CacheMetadata, dict[str, str]]:
    """`write_split` for a cache that is then published to an object store, its parts written where `parts_at`
    says (write.places: through the store with engine="ray"): also {path of a file of the cache: key of the
    part's object on the store that is that file}. Those files are NOT in the published folder (the driver never
    downloads them): the publish copies them on the store (storage.publish), and the caller removes the parts once
    published (storage.remote_cache does). {} for a build whose parts did not go through the store (then every file is
    in the folder)."""
    return _write_split(plan, source, runner, parts_at)


def _write_split(plan: WritePlan, source: ExampleSource, runner: JobRunner | None,
                 parts_at: PartsOnDisk) -> tuple[CacheMetadata, dict[str, str]]:

    runner = runner or JobRunner()  # the caller's is never changed: this build's modules go to a copy
    runner = dataclasses.replace(runner, modules=[*runner.modules, *source.code_modules()])
    limit = configured_limit(plan.cache_limit) if plan.evict else None  # a bad limit fails before any work
    staging = staging_dir(plan.target)
    # INFO says what is built; where (an absolute path, long and private) only when asked: at TRACE, below loguru's
    # default DEBUG (LOGURU_LEVEL=TRACE, or a standard logger at level 5, shows it)
    logger.info("building {} [{}] split '{}'", plan.builder_name, plan.config_name, plan.split)
    logger.trace("building {} '{}' into {}", plan.builder_name, plan.split, plan.target)
    _claim(staging)
    try:
        work = staging / WORK_DIR
        work.mkdir()
        runner = dataclasses.replace(runner, shared=parts_at.start(plan, runner, work))
        split_jobs: SplitJobs = source.plan_jobs(max(1, runner.parallelism), runner, work)
        plan = dataclasses.replace(plan, key_ranges=key_ranges(runner))  # a key check job per worker
        jobs = split_jobs.jobs or [None]
        if runner.parallelism > 1 and len(jobs) == 1:
            logger.info("{} '{}': one job only (nothing to divide), so it is built in one part",
                        plan.builder_name, plan.split)
        _match_jobs(staging, jobs)
        keys = part_keys(plan.part_basis, [source.part_identity(job) for job in jobs]) if plan.part_basis else []
        keyed_parts = source.keyed and len(jobs) > 1  # such parts write their keys (write_part)
        reused = parts_at.reuse(plan, staging, keys, keyed_parts)
        calls = [(plan, source, job, index, len(jobs), staging) for index, job in enumerate(jobs)
                 if index not in reused]
        desc = f"{plan.builder_name} '{plan.split}' part"
        parts, files, key_files = parts_at.write(runner, plan, staging, calls, desc,
                                                 f"{plan.fingerprint}/{_jobs_identity(jobs)}", reused)
        duplicate = find_duplicate_key(staging, parts, runner, key_files,  # as jobs of the runner
                                       desc=f"{plan.builder_name} '{plan.split}' key range")
        if duplicate is not None:
            raise ExampleError(plan.builder_name, plan.split, duplicate, None, "duplicate example key within the split")
        features = _agreed_features(plan, parts)
        shards, extra = layout_module(plan.layout).merge_parts(staging, parts, files)
        part_files = extra.pop(PART_FILES_KEY, None)
        if any(keys) and part_files is not None and not any(p.media for p in parts) \
                and (not keyed_parts or parts_at.keep_keys(staging, parts)):
            extra[PARTS_KEY] = parts_record(keys, part_files)  # so a later build can reuse these parts
        media = {m.path: m for part in parts for m in part.media}
        nodes = parts_at.nodes(parts)  # where each part was written
        for name, content in split_jobs.files.items():  # small files a builder ships with the split
            data = content.encode() if isinstance(content, str) else content
            (staging / name).write_bytes(data)
            media[name] = ShardInfo(path=name, num_rows=0, num_bytes=len(data), sha256=hash_text(data))
        _remove_all([work, *dict.fromkeys(p.folder(staging) for p in parts)])
        for bookkeeping in (JOURNAL_FILE, OWNER_FILE, JOBS_FILE):
            (staging / bookkeeping).unlink(missing_ok=True)
        metadata = _split_metadata(plan, features, sum(p.num_rows for p in parts), shards,
                                   {**extra, **split_jobs.extra, **nodes}, list(media.values()))
        source.check_before_publish(metadata.num_rows)
        metadata.write(staging, sync=False)  # publish fsyncs every file of the staging directory
        if plan.evict and root_of(plan.target) is not None:  # in a cache root: shards identical to ones stored
            share_identical_files(root_of(plan.target), staging,  # already become links to them
                                  [(s.path, s.num_bytes, s.sha256) for s in metadata.shards])
        publish(staging, plan.target)
        if plan.evict and root_of(plan.target) is not None:
            record_publish(root_of(plan.target), plan.target, metadata)  # the root's index (cache.index)
        copies = parts_at.published(plan, parts)
    except BaseException as exc:
        if not _is_infrastructure_failure(exc):
            parts_at.failed()  # bad data: what the parts left on the store is of no use to a next build
            discard(staging)
        full = _full_disk_error(exc, plan, staging)
        if full is not None:
            raise full from exc
        raise
    logger.info("published {} rows of {} '{}'", metadata.num_rows, plan.builder_name, plan.split)
    logger.trace("published {} '{}' to {}", plan.builder_name, plan.split, plan.target)
    if limit is not None and root_of(plan.target) is not None:
        evict_over_limit(root_of(plan.target), limit, plan.target.parent)
    return metadata, copies


def _split_metadata(plan: WritePlan, features: dict[str, Any], num_rows: int, shards: list[ShardInfo],
                    extra: dict[str, Any], media: list[ShardInfo]) -> CacheMetadata:
    """The `_metadata.json` of a split written by `plan` (its files written, merged and checked)."""
    return CacheMetadata(
        layout=plan.layout, features=features, num_rows=num_rows, shards=shards,
        fingerprint=plan.fingerprint, fingerprint_inputs=plan.fingerprint_inputs,
        builder_name=plan.builder_name, config_name=plan.config_name, version=plan.version, split=plan.split,
        layout_options=plan.writer_options, info=plan.info, extra=extra,
        extra_files=sorted(media, key=lambda m: m.path), cache_format_version=CACHE_FORMAT_VERSION,
        library_version=__version__, created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        builder_source=plan.builder_source, made_by=plan.made_by)


def _full_disk_error(exc: BaseException, plan: WritePlan, staging: Path) -> CacheError | None:
    """A disk that filled (or a file past its size limit) during a build, said in one line with what to do."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return CacheError(f"no space left on device while building {plan.builder_name} '{plan.split}' in "
                          f"{staging}; nothing was published. Free space (or point STABLE_DATASETS_CACHE_DIR "
                          "elsewhere) and run again: finished parts and journaled shards will be reused")
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return CacheError(f"a file grew past the largest size allowed (the process's file size limit, ulimit -f, "
                          f"or the filesystem's) while building {plan.builder_name} '{plan.split}' in {staging}; "
                          "nothing was published. Raise the limit, or lower layout_options max_shard_size, and run "
                          "again: finished parts and journaled shards will be reused")
    return None


def _remove_all(folders: list[Path]) -> None:
    """The work and part folders, several at once (each removal waits on the filesystem's journal)."""
    if len(folders) < 3:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        return
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda folder: shutil.rmtree(folder, ignore_errors=True), folders))


def _agreed_features(plan: WritePlan, parts: list[PartResult]) -> dict[str, Any]:
    """The features every part wrote. Parts that inferred their own (a transform without
    `features=`) must agree; a part with no rows takes the others' features."""
    if plan.features is not None:
        return plan.features.to_dict()
    written = [p.features for p in parts if p.num_rows and p.features is not None]
    if not written:
        return parts[0].features or {}
    first = written[0]
    for part in parts:
        if part.num_rows and part.features != first:
            raise StableDatasetsError(
                f"{plan.builder_name} '{plan.split}': parallel parts inferred different features ({first} in the "
                f"first part, {part.features} in part {part.index}); pass features= to describe the output")
    return first
