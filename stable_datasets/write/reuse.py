"""Incremental rebuilds: the parts of a previous cache whose inputs did not change are linked, not built again.

One rule: a part is reused only under the very same *part key*, a hash of everything the part's rows
depend on: the plan's `part_basis` (the fingerprint inputs except the input files: builder code,
config, features, layout and its options, cache format) and the part's own input identity (its
files' paths with size and mtime, or content hash; see `ExampleSource.part_identity`). A published
cache records the key of each part and how many of its shard files that part became
(`extra["parts"]`); the next build of a sibling fingerprint (same builder, config and version) looks
for its parts' keys there and hard-links the old shard files into its own part folders (a copy
where links are impossible) and takes them as finished parts: only the other parts are written. The
merge, the duplicate-key check, the metadata and the publish are those of any build, so the result
holds the rows of a full rebuild, in order, under the same fingerprint.

Keyed sources (image folders, tars) also keep their parts' sorted key files (`_part_keys.arrow`), so
the duplicate-key check still covers the whole split. Layouts whose merge does not report which
files each part became (Lance commits fragments into one dataset) record no parts: their caches are
rebuilt whole. Reused files are checked by size and sha256 (as `verify` and the dedup store check them), so
a rebuild never inherits damage of the old cache: a damaged part is built again. A forced rebuild
(`download_mode="force_rebuild"`, `WritePlan.reuse_parts=False`) reuses nothing. The old cache is pinned
while its files are linked, so `prune` cannot take them away mid-way, and a link cannot be half
made: a build that stops leaves only its staging folder, which is not visible.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.cache.builds import BuildPin
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.cache.publish import STAGING_PREFIX
from stable_datasets.errors import CacheError
from stable_datasets.layouts.checked import read_metadata, read_published
from stable_datasets.write.keys import KEYS_SCHEMA, RangedKeyWriter, sorted_key_count
from stable_datasets.write.parts import PartResult, part_dir
from stable_datasets.write.plan import WritePlan

#: `_metadata.json` extra: one [part key or None, number of shard files] per part, in order
PARTS_KEY = "parts"
#: the staging folder's folder of the files linked from an earlier cache
REUSED_DIR = ".reused"
#: a keyed source's example keys, per part (columns: part, digest, key), kept beside the shards
PART_KEYS_FILE = "_part_keys.arrow"
_PART_KEYS_SCHEMA = pa.schema([("part", pa.int32()), *KEYS_SCHEMA])


def part_keys(basis: str, identities: list[Any]) -> list[str | None]:
    """The key of each part: None where the part's inputs cannot be identified (it is always built)."""
    if not basis:
        return [None] * len(identities)
    out: list[str | None] = []
    for identity in identities:
        try:  # plain JSON already (paths, sizes, mtimes): hashed as it is, without the fingerprint's walk
            text = json.dumps([basis, identity], separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            text = None
        out.append(None if identity is None or text is None else
                   hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32])
    return out


def parts_record(keys: list[str | None], part_files: list[list[str]]) -> list[list[Any]]:
    """`extra["parts"]` of a cache: each part's key and how many of the published shard files it became."""
    return [[key, len(files)] for key, files in zip(keys, part_files)]


def save_part_keys(staging: Path, parts: list[PartResult]) -> bool:
    """Keep a keyed build's part keys in `PART_KEYS_FILE`, part after part, each part's rows as its sorted key file
    holds them (read before the part folders are removed; a record batch at a time, so memory stays bounded)."""
    if not all(part.has_keys for part in parts):
        return False
    with pa.OSFile(str(staging / PART_KEYS_FILE), "wb") as sink, pa.ipc.new_file(sink, _PART_KEYS_SCHEMA) as out:
        for position, part in enumerate(parts):
            if not part.key_counts:
                sorted_key_count(part.keys_file(staging))  # a file an earlier version wrote is sorted first
            for path in part.key_files(staging):  # its digest ranges in order: one sorted run
                with pa.OSFile(str(path)) as source:  # read, not mapped: as write.keys reads key files
                    reader = pa.ipc.open_file(source)
                    for i in range(reader.num_record_batches):
                        batch = reader.get_batch(i)
                        out.write_batch(pa.record_batch([pa.array(np.full(batch.num_rows, position, np.int32)),
                                                         *batch.columns], schema=_PART_KEYS_SCHEMA))
    return True


@dataclass
class _OldPart:
    position: int  # the part's place in the old cache
    shards: list[ShardInfo]


@dataclass
class _Previous:
    """A published sibling cache whose recorded parts share keys with this build."""

    directory: Path  # its split folder (as published)
    metadata: CacheMetadata
    parts: dict[str, _OldPart]
    matches: int


def _recorded_parts(metadata: CacheMetadata) -> dict[str, _OldPart] | None:
    """Key -> the old part and its shard files, from `extra["parts"]`; None when it records none (or they do not
    add up to its shards)."""
    record = metadata.extra.get(PARTS_KEY)
    if not isinstance(record, list) or any(f.path.startswith("..") for f in metadata.extra_files):
        return None  # path-stored videos live in the old fingerprint folder: such parts are built again
    parts: dict[str, _OldPart] = {}
    start = 0
    try:
        for position, (key, count) in enumerate(record):
            files = metadata.shards[start:start + int(count)]
            start += int(count)
            if isinstance(key, str) and files and key not in parts:  # a part without files is cheaper to build
                parts[key] = _OldPart(position, files)
    except (TypeError, ValueError):
        return None
    return parts if start == len(metadata.shards) else None


#: the newest sibling caches looked at (a dataset edited a hundred times and never pruned has a hundred)
MAX_SIBLINGS = 8


def _siblings(target: Path) -> list[Path]:
    """Published split folders of the same name in the other fingerprint folders of this builder, config and
    version (`<root>/<name>/<config>/<version>/<fingerprint>/<split>`), the newest `MAX_SIBLINGS` first."""
    here = target.parent
    try:
        folders = [f for f in here.parent.iterdir() if f != here and not f.name.startswith((".", STAGING_PREFIX))]
    except OSError:
        return []
    found = []
    for folder in folders:
        try:
            found.append(((folder / target.name / METADATA_FILE).stat().st_mtime_ns, folder / target.name))
        except OSError:
            continue
    return [path for _, path in sorted(found, reverse=True)[:MAX_SIBLINGS]]


def find_previous(plan: WritePlan, keys: list[str | None]) -> tuple[_Previous | None, int]:
    """The sibling cache with the most parts this build can reuse (the newest among equals), and how many
    sibling caches were looked at. Unreadable caches are skipped: they only cost a rebuild."""
    wanted = {k for k in keys if k is not None}
    best: _Previous | None = None
    looked = 0
    for folder in _siblings(plan.target):
        try:
            metadata = read_metadata(folder)
        except (CacheError, OSError):
            continue
        if metadata.split != plan.split or metadata.layout != plan.layout:
            continue
        looked += 1
        parts = _recorded_parts(metadata)
        if not parts:
            continue
        matches = len(wanted & set(parts))
        if matches and (best is None or (matches, metadata.created_at) > (best.matches, best.metadata.created_at)):
            best = _Previous(folder, metadata, parts, matches)
    return best, looked


def reuse_previous(plan: WritePlan, staging: Path, keys: list[str | None], keyed: bool) -> dict[int, PartResult]:
    """Link the parts of the best previous cache whose keys this build's parts have into their part folders of
    the staging folder; the finished parts by index (the others are built). Logs "reused N of M parts from
    <old cache>"."""
    reused: dict[int, PartResult] = {}
    if not any(keys):
        return reused
    previous, looked = find_previous(plan, keys)
    if previous is None:
        if looked:
            logger.debug("{} '{}': no part of the {} earlier cache(s) beside {} can be reused (their layout {} keeps "
                         "no parts, or every input changed): a full build", plan.builder_name, plan.split, looked,
                         plan.target.parent, plan.layout)
        return reused
    try:
        pin, metadata = read_published(previous.directory)
    except (CacheError, OSError) as exc:  # pruned or damaged since it was looked at
        logger.info("cannot reuse the parts of {} ({}): a full build", previous.directory, exc)
        return reused
    try:
        if metadata.fingerprint != previous.metadata.fingerprint:  # republished meanwhile: read its parts again
            previous = _Previous(previous.directory, metadata, _recorded_parts(metadata) or {}, 0)
        has_keys = keyed and _readable_part_keys(pin)
        olds: dict[int, _OldPart] = {}
        for index, key in enumerate(keys):
            old = previous.parts.get(key) if key is not None else None
            if old is None or PartResult.load(part_dir(staging, index)) is not None:  # a resumed build finished it
                continue
            if keyed and not has_keys:
                continue
            part = _link_part(pin, metadata, old, staging, index, has_keys)
            if part is not None:
                reused[index], olds[index] = part, old
        if has_keys and reused and not _split_part_keys(pin, staging, {i: olds[i].position for i in reused},
                                                        reused, plan.key_ranges):
            for part in reused.values():  # keys that cannot be split out: these parts are built instead
                for shard in part.shards:
                    (part.folder(staging) / shard.path).unlink(missing_ok=True)
            reused.clear()
    finally:
        pin.release()
    logger.info("reused {} of {} parts from {}", len(reused), len(keys), previous.directory)
    return reused


def _readable_part_keys(pin: BuildPin) -> bool:
    try:
        with pa.memory_map(str(pin.directory / PART_KEYS_FILE)) as source:
            return pa.ipc.open_file(source).schema.equals(_PART_KEYS_SCHEMA)
    except (OSError, pa.ArrowInvalid):
        return False


def _split_part_keys(pin: BuildPin, staging: Path, positions: dict[int, int], parts: dict[int, PartResult],
                     ranges: int) -> bool:
    """Each reused part's keys cut into `ranges` digest ranges as a part writes them (write.keys.RangedKeyWriter),
    from the old cache's `PART_KEYS_FILE` (the old parts' rows come one part after another, each sorted, so one
    output is open at a time); False when it cannot be read."""
    wanted = {position: parts[index] for index, position in positions.items()}
    writer: RangedKeyWriter | None = None
    current = -1
    written: set[int] = set()
    try:
        with pa.OSFile(str(pin.directory / PART_KEYS_FILE)) as source:  # read a batch at a time, not mapped
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                column = batch.column(0).to_numpy()
                starts = np.flatnonzero(np.diff(column, prepend=-1)) if len(column) else np.zeros(0, np.int64)
                for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(column)]):
                    position = int(column[lo])
                    if position != current:
                        if writer is not None:
                            writer.close()
                            wanted[current].key_counts = writer.counts
                            written.add(current)
                            writer = None
                        current = position
                        if position in wanted:
                            writer = RangedKeyWriter(wanted[position].key_folder(staging), ranges)
                    if writer is not None:
                        writer.write_batch(pa.record_batch(batch.columns[1:], schema=KEYS_SCHEMA).slice(lo, hi - lo))
        if writer is not None:
            writer.close()
            wanted[current].key_counts = writer.counts
            written.add(current)
            writer = None
    except (OSError, pa.ArrowInvalid, ValueError) as exc:
        logger.debug("cannot split the part keys of {}: {}", pin.directory, exc)
        return False
    finally:
        if writer is not None:
            writer.abort()
    return written == set(wanted)


def _link_part(pin: BuildPin, metadata: CacheMetadata, old: _OldPart, staging: Path, index: int,
               has_keys: bool) -> PartResult | None:
    """The old part's files as a finished part in the staging folder's `REUSED_DIR` (hard links, else copies; one
    folder for every reused part, so a build of many parts makes and removes one folder, not one each); None when
    a file is gone or not as recorded (that part is then built). Its keys (`has_keys`) come after, for every
    reused part at once (`_split_part_keys`)."""
    folder = staging / REUSED_DIR
    folder.mkdir(exist_ok=True)
    part = PartResult(index=index, num_rows=0, shards=[], features=metadata.features, has_keys=has_keys,
                      location=REUSED_DIR)
    made: list[Path] = []
    try:
        for number, shard in enumerate(old.shards):
            name = re.sub(r"\d+", f"{index:05d}{number:05d}", shard.path, count=1)  # the merge renumbers it
            source, destination = pin.directory / shard.path, folder / name
            destination.unlink(missing_ok=True)
            try:
                os.link(source, destination)
            except OSError:  # another filesystem, or one without links
                shutil.copyfile(source, destination)
            made.append(destination)
            linked = dataclasses.replace(shard, path=name)
            if problem := linked.problem(folder):  # size and sha256, as verify and the dedup store check them
                raise OSError(f"{source} (linked as {problem})")
            part.shards.append(linked)
    except OSError as exc:
        logger.info("not reusing part {} of {}: {}; it is built again", old.position, pin.directory, exc)
        for path in made:
            path.unlink(missing_ok=True)
        return None
    part.num_rows = sum(s.num_rows for s in part.shards)
    return part
