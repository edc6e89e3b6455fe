"""The duplicate-key check across parts, run range by range as jobs of the build's JobRunner.

Keys are unique within a part (the part checks them, write.keys.KeyLog); a key two parts both wrote is
found here. Every part cut its sorted keys into the same P digest ranges (write.keys.RangedKeyWriter), and a
key's copies share one digest, so they meet in one range: job r merges range r of every part (a record
batch of each file at a time) and returns its first duplicate in build order, or None. The driver takes
the one with the smallest build order, which is the key one merge of every part would name; it merges no
key itself. The jobs run where the parts ran (forked processes, or Ray tasks on the nodes): on a shared disk
they read the range files in place; parts that travelled through the object store (write.remote_parts)
are read there, each job fetching only its range's files, so the driver downloads no key file.
"""

from __future__ import annotations

import bisect
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.errors import StableDatasetsError, StorageError
from stable_datasets.write.engines import JobRunner, ray_node_id
from stable_datasets.write.keys import Duplicate, merge_sorted, range_bounds, range_file_name, sorted_key_count
from stable_datasets.write.parts import KEY_RANGES_DIR, KEY_RUNS_DIR, PartResult
from stable_datasets.write.remote_parts import RemoteParts, part_key

#: at most this many digest ranges (jobs of the check), whatever the parallelism: a keyed part writes a file a range
MAX_KEY_RANGES = 256


def key_ranges(runner: JobRunner) -> int:
    """How many digest ranges keyed parts cut their keys into (WritePlan.key_ranges): one check job per worker."""
    return max(1, min(runner.parallelism, MAX_KEY_RANGES))


@dataclass(frozen=True)
class RangeCheck:
    """One job of the check: the digests [lo, hi) of every part that has keys there. `files` are (a local path,
    or a key on the store; the order offset of its part; whether it is one whole-part file of an earlier
    version, which is sorted before it is read)."""

    index: int
    ranges: int
    lo: int
    hi: int
    files: tuple[tuple[str, int, bool], ...]

    @property
    def name(self) -> str:
        return f"key range {self.index + 1} of {self.ranges}"


class KeyFilesOnDisk:
    """Key files of parts in the staging folder (on this disk, or a filesystem every worker shares): read in
    place; a whole-part file of an earlier version is sorted where it is before it is counted."""

    def whole_count(self, staging: Path, part: PartResult) -> int:
        return sorted_key_count(part.keys_file(staging))

    def whole_file(self, staging: Path, part: PartResult) -> tuple[str, bool]:
        return str(part.keys_file(staging)), False  # sorted already by `whole_count`

    def range_file(self, staging: Path, part: PartResult, index: int) -> str:
        return str(part.key_range_file(staging, index))

    def readable(self, check: RangeCheck, folder: Path) -> list[Path]:
        return [Path(location) for location, _, _ in check.files]


@dataclass(frozen=True)
class StoredKeyFiles:
    """Key files of parts that travelled through the object store (write.remote_parts), under `prefix` (the
    parts prefix): each range job fetches its range's files (`FETCH_THREADS` at a time) into its scratch folder."""

    remote: RemoteParts
    prefix: str

    def whole_count(self, staging: Path, part: PartResult) -> int:
        return part.num_rows  # a keyed part writes one key per row; its file is on the store, not here

    def whole_file(self, staging: Path, part: PartResult) -> tuple[str, bool]:
        return part_key(self.prefix, part.index, part.key_paths()[0]), True

    def range_file(self, staging: Path, part: PartResult, index: int) -> str:
        return part_key(self.prefix, part.index, f"{KEY_RANGES_DIR}/{range_file_name(index)}")

    def readable(self, check: RangeCheck, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)  # on another node, nothing of the staging folder exists
        paths = [folder / f"{number:05d}.arrow" for number in range(len(check.files))]
        with ThreadPoolExecutor(FETCH_THREADS) as pool:
            list(pool.map(lambda pair: self._fetch(check, *pair), zip(check.files, paths)))
        return paths

    def _fetch(self, check: RangeCheck, file: tuple[str, int, bool], path: Path) -> None:
        try:
            self.remote.store.download(file[0], path)
        except StorageError as exc:
            raise StableDatasetsError(f"duplicate-key check, {check.name} (node {ray_node_id() or 'unknown'}): could "
                                      f"not read {self.remote.url(file[0])}: {exc}") from None


#: key files of parts on this disk (the default)
KEYS_ON_DISK = KeyFilesOnDisk()


def plan_range_checks(staging: Path, parts: list[PartResult], keys: KeyFilesOnDisk | StoredKeyFiles = KEYS_ON_DISK
                      ) -> list[RangeCheck]:
    """The jobs of the check: one per digest range where two parts or more have keys (keys are unique within a
    part, so a range only one part reaches holds no duplicate). Parts cut into the same ranges normally; a part
    cut otherwise (finished by an earlier attempt of another parallelism) gives each job the files that overlap
    its range, of which the job keeps the range's digests."""
    keyed = [p for p in parts if p.has_keys]
    if len(keyed) < 2:
        return []
    ranges = max(len(p.key_counts) for p in keyed) or 1
    bounds = range_bounds(ranges)
    offsets, offset = [], 0
    for part in keyed:
        offsets.append(offset)
        offset += sum(part.key_counts) if part.key_counts else keys.whole_count(staging, part)
    cuts = [range_bounds(len(p.key_counts)) if p.key_counts else [] for p in keyed]  # each part's, once
    checks = []
    for index in range(ranges):
        lo, hi = bounds[index], bounds[index + 1]
        files: list[tuple[str, int, bool]] = []
        reached = 0
        for part, start, own in zip(keyed, offsets, cuts):
            found = _files_in(staging, part, own, lo, hi, keys)
            files.extend((location, start, legacy) for location, legacy in found)
            reached += bool(found)
        if reached > 1:
            checks.append(RangeCheck(index, ranges, lo, hi, tuple(files)))
    return checks


def _files_in(staging: Path, part: PartResult, own: list[int], lo: int, hi: int,
              keys: KeyFilesOnDisk | StoredKeyFiles) -> list[tuple[str, bool]]:
    """The part's key files that hold digests in [lo, hi) (`own`: the part's range bounds): (where, whether it is an
    earlier version's file). Only the part's ranges from the one holding `lo` are looked at, so planning P ranges
    over N parts costs about P x N steps, not P x P x N."""
    if not part.key_counts:
        return [keys.whole_file(staging, part)]
    found = []
    for index in range(max(0, bisect.bisect_right(own, lo) - 1), len(part.key_counts)):
        if own[index] >= hi:
            break
        if part.key_counts[index] and lo < own[index + 1]:
            found.append((keys.range_file(staging, part, index), False))
    return found


#: key files a job fetches from the store at once (one per part that has keys in its range)
FETCH_THREADS = 8


def check_range(check: RangeCheck, scratch: Path, keys: KeyFilesOnDisk | StoredKeyFiles = KEYS_ON_DISK
                ) -> Duplicate | None:
    """A job of the check (in a worker): the first duplicate of its range in build order, or None. Files on the
    store are fetched into `scratch` first (this range's only) and removed after."""
    folder = scratch / f"range-{check.index:05d}"
    try:
        paths = keys.readable(check, folder)
        for path, (_, _, legacy) in zip(paths, check.files):
            if legacy:
                sorted_key_count(path)
        files = [(path, offset) for path, (_, offset, _) in zip(paths, check.files)]
        return merge_sorted(files, None, folder / "merge", digest_range=(check.lo, check.hi))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def find_duplicate_key(staging: Path, parts: list[PartResult], runner: JobRunner | None = None,
                       keys: KeyFilesOnDisk | StoredKeyFiles = KEYS_ON_DISK, desc: str = "key range") -> Any | None:
    """A key that two parts both wrote, else None: the first such in build order. The ranges are checked as
    jobs of `runner` (in this process without one); the parts' key files are where `keys` says (on this disk, or
    on the store, StoredKeyFiles: read there by the jobs, not by this process)."""
    checks = plan_range_checks(staging, parts, keys)
    if not checks:
        return None
    runner = runner or JobRunner()
    scratch = staging / KEY_RUNS_DIR
    logger.debug("duplicate-key check: {} range job(s) over {} part(s)", len(checks), len(parts))
    try:
        found = runner(check_range, [(check, scratch, keys) for check in checks], desc=desc, mirrored=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    duplicates = [d for d in found if d is not None]
    if not duplicates:
        return None
    return json.loads(min(duplicates, key=lambda d: d.order).key)
