"""Where a build's parts are written and how the rest of the write path reaches them: one seam with two sides.

`PARTS_ON_DISK` (the default): each part in its folder of the staging directory, on this disk or a
filesystem every worker shares; an earlier build's parts there may be reused (write.reuse). `PartsOnStore`:
with engine="ray" and an object-store root, whose nodes may share no disk, parts travel through the store
(write.remote_parts), the split's work folder is mirrored there, and the merge leaves the data on the store for
the publish to copy. The cache root chooses the side (roots.remote); `write_split` only calls it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.errors import CacheError
from stable_datasets.layouts.part_files import ON_DISK, PartFiles
from stable_datasets.write.engines import JobRunner, ensure_ray, ray_node_id
from stable_datasets.write.key_check import KEYS_ON_DISK, KeyFilesOnDisk, StoredKeyFiles
from stable_datasets.write.parts import PartResult, write_part
from stable_datasets.write.plan import WritePlan
from stable_datasets.write.remote_parts import (
    RemoteParts,
    SharedWorkdir,
    StoreParts,
    remote_part_writer,
    remove_prefix,
    shared_workdir,
)
from stable_datasets.write.reuse import reuse_previous, save_part_keys


class PartsOnDisk:
    """Parts in the staging folder's part folders: on this disk, or on storage every worker shares."""

    def start(self, plan: WritePlan, runner: JobRunner, work: Path) -> SharedWorkdir | None:
        """Before the jobs are planned: the work folder every worker reaches (None: the staging folder's)."""
        return None

    def reuse(self, plan: WritePlan, staging: Path, keys: list[Any], keyed_parts: bool) -> dict[int, PartResult]:
        """Parts of an earlier build of the same inputs, by index, that this build need not write again."""
        return reuse_previous(plan, staging, keys, keyed_parts) if keys and plan.reuse_parts else {}

    def write(self, runner: JobRunner, plan: WritePlan, staging: Path, calls: list[tuple[Any, ...]], desc: str,
              jobs_identity: str, reused: dict[int, PartResult]
              ) -> tuple[list[PartResult], PartFiles, KeyFilesOnDisk | StoredKeyFiles]:
        """Run the part calls: the parts in order, where the merge finds their files, where their keys are."""
        parts = runner(write_part, calls, desc=desc)
        if reused:
            parts = sorted([*parts, *reused.values()], key=lambda p: p.index)
        _check_parts_visible(plan, staging, parts)
        return parts, ON_DISK, KEYS_ON_DISK

    def keep_keys(self, staging: Path, parts: list[PartResult]) -> bool:
        """Keep the parts' key files for a later build that reuses them (write.reuse); whether they were kept."""
        return save_part_keys(staging, parts)

    def nodes(self, parts: list[PartResult]) -> dict[str, Any]:
        """What `_metadata.json` records of where each part was written."""
        return {}

    def published(self, plan: WritePlan, parts: list[PartResult]) -> dict[str, str]:
        """After the publish: {cache file: the object it is on the store}, for the publish on the store to copy."""
        return {}

    def failed(self) -> None:
        """After bad data: what the parts left outside the staging folder is of no use to a next build."""
        return None


PARTS_ON_DISK = PartsOnDisk()


class PartsOnStore(PartsOnDisk):
    """Parts that travel through the object store split `remote` (one build: it holds its parts prefix)."""

    def __init__(self, remote: RemoteParts):
        self.remote = remote
        self.prefix = ""
        self.shared: SharedWorkdir | None = None
        self.files: StoreParts | None = None

    def start(self, plan: WritePlan, runner: JobRunner, work: Path) -> SharedWorkdir:
        ensure_ray(runner.ray_address)  # connected, so the driver's node is known
        self.shared = shared_workdir(self.remote, plan.fingerprint, work)
        return self.shared

    def reuse(self, plan: WritePlan, staging: Path, keys: list[Any], keyed_parts: bool) -> dict[int, PartResult]:
        return {}  # finished parts on the store are reused by the part writer itself

    def write(self, runner: JobRunner, plan: WritePlan, staging: Path, calls: list[tuple[Any, ...]], desc: str,
              jobs_identity: str, reused: dict[int, PartResult]) -> tuple[list[PartResult], PartFiles, StoredKeyFiles]:
        self.prefix = self.remote.prefix(jobs_identity)
        parts = runner(remote_part_writer(write_part, self.remote, self.prefix, ray_node_id), calls, desc=desc)
        self.files = StoreParts(self.remote, self.prefix, parts)  # one listing: every part whole on the store
        return parts, self.files, StoredKeyFiles(self.remote, self.prefix)

    def keep_keys(self, staging: Path, parts: list[PartResult]) -> bool:
        return False

    def nodes(self, parts: list[PartResult]) -> dict[str, Any]:
        return {"part_nodes": [p.node for p in parts]}

    def published(self, plan: WritePlan, parts: list[PartResult]) -> dict[str, str]:
        copies = self.files.copies if self.files is not None else {}
        logger.info("merged {} part(s) of {} '{}' on the store: {} file(s) to copy there, {} bytes of small files "
                    "downloaded", len(parts), plan.builder_name, plan.split, len(copies),
                    self.files.downloaded if self.files is not None else 0)
        self._remove("" if copies else self.prefix)
        return copies

    def failed(self) -> None:
        with contextlib.suppress(Exception):
            self._remove(self.prefix)

    def _remove(self, parts_prefix: str) -> None:
        """The parts and the shared work folder on the store, once they are merged (or of no use)."""
        if parts_prefix:
            remove_prefix(self.remote, parts_prefix)
        if self.shared is not None:
            remove_prefix(self.remote, self.shared.prefix)


def _check_parts_visible(plan: WritePlan, staging: Path, parts: list[PartResult]) -> None:
    """Workers write their parts by the staging folder's path: one that ran on another machine wrote to that
    machine's disk when the folder is not on shared storage (parts of an object-store root come through the
    store instead). Say so, instead of failing inside a merge."""
    for part in parts:
        folder = part.folder(staging)
        if not folder.is_dir():
            raise CacheError(
                f"{plan.builder_name} '{plan.split}': part {part.index} of {len(parts)} was written where this "
                f"machine cannot see it (no {folder}): with engine='ray' on several machines, the cache root must "
                "be on storage every node shares (NFS, Lustre), or on an object store (s3://..., gs://...), through "
                "which the parts then travel")
