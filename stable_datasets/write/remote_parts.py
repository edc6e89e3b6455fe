"""Parts that travel through the object store, for builds whose nodes share no disk.

With `engine="ray"` and an object-store cache root, a part may run on a machine whose disk the
driver cannot see. So each task writes its part into its own local folder (the same path on its
own disk), uploads every file of it under the split's parts prefix on the store, and uploads the
part's record (`_part.json`) last: a record on the store means the whole part is there. The
driver reads the parts from the store (downloading only those its own disk does not hold) and
merges them as it merges local parts; the merged cache is then published as any other, except that
a merged file whose bytes a part uploaded already is copied on the store (`store_copies`), not
uploaded again: each byte of the cache is uploaded once.

The parts prefix is `<split>/attempts/<id>/parts/`, where `<id>` hashes the jobs (and so the
fingerprint): a build that failed leaves its finished parts there, and the next build of the same
jobs reuses them instead of running them again. The driver deletes the prefix once it published.
An `attempts/<id>/` no `_metadata.json` names is what `prune` removes as an abandoned attempt, so
a build that is never run again leaves nothing prune cannot explain.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.cache.journal import JOURNAL_FILE
from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.errors import StableDatasetsError, StorageError
from stable_datasets.write.engines import ray_node_id
from stable_datasets.write.parts import KEY_RANGES_DIR, KEYS_FILE, PART_FILE, PartResult, part_dir

ATTEMPTS = "attempts"  # the object-store protocol's attempt folder (storage.publish.ATTEMPTS)
PARTS = "parts"


@dataclass(frozen=True)
class RemoteParts:
    """Where a split's parts go on the store: `store` (an ObjectStore, pickled by its URL and options)
    and the split's prefix on it."""

    store: Any
    split_prefix: str
    driver_node: str = ""  # the Ray node of the driver: a part written there stays on its disk too

    def prefix(self, jobs_identity: str) -> str:
        attempt = hashlib.sha256(jobs_identity.encode()).hexdigest()[:32]
        return f"{self.split_prefix}/{ATTEMPTS}/{attempt}/{PARTS}"

    def url(self, key: str) -> str:
        return str(self.store.url(key))


def part_key(prefix: str, index: int, relative: str = "") -> str:
    name = part_dir(Path("."), index).name
    return f"{prefix}/{name}/{relative}" if relative else f"{prefix}/{name}"


def finished_remote_part(remote: RemoteParts, prefix: str, index: int) -> PartResult | None:
    """The part a previous attempt uploaded whole (its record, each shard it lists at its size, its key files),
    else None."""
    data = remote.store.get(part_key(prefix, index, PART_FILE))
    if data is None:
        return None
    try:
        result = PartResult.from_dict(json.loads(data))
    except (ValueError, KeyError, TypeError):
        return None
    sizes = {o.key: o.size for o in remote.store.list(part_key(prefix, index) + "/")}
    if any(sizes.get(part_key(prefix, index, s.path)) != s.num_bytes for s in result.shards):
        return None
    if any(part_key(prefix, index, path) not in sizes for path in result.key_paths()):
        return None  # the key check's jobs read them there
    return result


def upload_part(remote: RemoteParts, prefix: str, directory: Path, result: PartResult) -> None:
    """Every file of the part's folder, then its record last."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name not in (PART_FILE, JOURNAL_FILE))
    for path in files:
        remote.store.put_file(path, part_key(prefix, result.index, path.relative_to(directory).as_posix()))
    remote.store.put_bytes(part_key(prefix, result.index, PART_FILE), json.dumps(result.to_dict()).encode())


def remote_part_writer(write: Callable[..., PartResult], remote: RemoteParts, prefix: str,
                       node_id: Callable[[], str]) -> Callable[..., PartResult]:
    """`write` (write_part's signature) wrapped: reuse a part on the store, else write it locally and upload it."""

    def write_and_upload(plan: Any, source: Any, job: Any, index: int, num_parts: int, staging: Path) -> PartResult:
        node = node_id()

        def unreachable(exc: Exception, doing: str) -> StableDatasetsError:
            return StableDatasetsError(f"part {index} of {num_parts} (node {node or 'unknown'}): could not {doing} "
                                       f"{remote.url(part_key(prefix, index))}: {exc}")

        try:
            finished = finished_remote_part(remote, prefix, index)
        except StorageError as exc:  # this node cannot reach the store the driver reached
            raise unreachable(exc, "look for it on") from exc
        if finished is not None:
            return finished
        result = write(plan, source, job, index, num_parts, staging)
        result = replace(result, node=node)
        directory = part_dir(staging, index)
        result.save(directory)  # with the node that wrote it
        try:
            upload_part(remote, prefix, directory, result)
        except StorageError as exc:
            raise unreachable(exc, "upload it to") from exc
        if node != remote.driver_node:  # this machine's copy is of no use to the driver
            shutil.rmtree(directory, ignore_errors=True)
        return result

    return write_and_upload


def fetch_parts(remote: RemoteParts, prefix: str, staging: Path, parts: list[PartResult]) -> None:
    """Bring into `staging` every part this disk does not hold whole (it was written on another node)."""
    for part in parts:
        directory = part_dir(staging, part.index)
        if PartResult.load(directory) is not None:
            continue
        if directory.exists():
            shutil.rmtree(directory)
        base = part_key(prefix, part.index) + "/"
        listed = [o for o in remote.store.list(base)  # key files stay there: the key check's jobs read them
                  if not o.key[len(base):].startswith(f"{KEY_RANGES_DIR}/") and o.key[len(base):] != KEYS_FILE]
        if not any(o.key.endswith(f"/{PART_FILE}") for o in listed):
            raise StableDatasetsError(f"part {part.index} of {len(parts)} (node {part.node or 'unknown'}) is not on "
                                      f"the store: no {remote.url(part_key(prefix, part.index, PART_FILE))}")
        for item in sorted(listed, key=lambda o: o.key.endswith(f"/{PART_FILE}")):  # the record last
            remote.store.download(item.key, directory / item.key[len(base):])
        if PartResult.load(directory) is None:
            raise StableDatasetsError(f"part {part.index} of {len(parts)} (node {part.node or 'unknown'}): its "
                                      f"files on {remote.url(base)} do not match its record")
    logger.debug("parts of {} are in {}", remote.url(prefix), staging)


@dataclass(frozen=True)
class SharedWorkdir:
    """The split's work folder (intermediate files of a step before the parts, such as the `sft` builders'
    token files) mirrored through the store: a task pulls it before it runs and pushes what it wrote there
    after, and the driver pulls it once the tasks are done, so every node reads the same files."""

    remote: RemoteParts
    prefix: str  # `<split>/attempts/<id>/work`
    local: Path

    def _listed(self) -> dict[str, int]:
        return {o.key[len(self.prefix) + 1:]: o.size for o in self.remote.store.list(self.prefix + "/")}

    def pull(self) -> None:
        for relative, size in self._listed().items():
            path = self.local / relative
            if not (path.is_file() and path.stat().st_size == size):
                self.remote.store.download(f"{self.prefix}/{relative}", path)

    def push(self) -> None:
        if not self.local.is_dir():
            return
        listed = self._listed()
        for path in sorted(p for p in self.local.rglob("*") if p.is_file()):
            relative = path.relative_to(self.local).as_posix()
            if listed.get(relative) != path.stat().st_size:
                self.remote.store.put_file(path, f"{self.prefix}/{relative}")

    def around(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` with the work folder pulled before and pushed after; it takes the call's name ("<desc> 2 of 5")
        first, for an error naming the call and its node when the store cannot be reached from there."""

        def mirrored(call: str, *args: Any) -> Any:
            self.local.mkdir(parents=True, exist_ok=True)  # on another node, nothing of the staging folder exists
            self._mirror(self.pull, call, "read")
            result = fn(*args)
            self._mirror(self.push, call, "write")
            return result

        return mirrored

    def _mirror(self, step: Callable[[], None], call: str, doing: str) -> None:
        try:
            step()
        except StorageError as exc:  # this node cannot reach the store the driver reached
            raise StableDatasetsError(f"{call} (node {ray_node_id() or 'unknown'}): could not {doing} the split's "
                                      f"work folder {self.remote.url(self.prefix)}/: {exc}") from None


def shared_workdir(remote: RemoteParts, fingerprint: str, local: Path) -> SharedWorkdir:
    attempt = hashlib.sha256(f"work/{fingerprint}".encode()).hexdigest()[:32]
    return SharedWorkdir(remote, f"{remote.split_prefix}/{ATTEMPTS}/{attempt}/work", local)


def store_copies(prefix: str, parts: list[PartResult], files: list[ShardInfo]) -> dict[str, str]:
    """{path of a merged file: key of a part's object on the store with the same bytes (same sha256 and size)}: the
    publish copies those on the store (storage.publish) rather than uploading them a second time. Arrow and Parquet
    shards are the parts' files renamed; Lance data files too (the merge writes only new manifests)."""
    uploaded = {(s.sha256, s.num_bytes): part_key(prefix, part.index, s.path)
                for part in parts for s in part.shards if _DIGEST.fullmatch(s.sha256 or "")}
    return {f.path: uploaded[(f.sha256, f.num_bytes)] for f in files if (f.sha256, f.num_bytes) in uploaded}


_DIGEST = re.compile(r"[0-9a-f]{64}")  # a real sha256: a record without one is never taken for another file


def remove_prefix(remote: RemoteParts, prefix: str) -> None:
    """Every object of the attempt `prefix` is in (`<split>/attempts/<id>/...`)."""
    attempt = prefix.rsplit("/", 1)[0] + "/"
    keys = [o.key for o in remote.store.list(attempt)]
    if keys:
        remote.store.delete(keys)
