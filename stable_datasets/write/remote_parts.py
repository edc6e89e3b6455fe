"""Parts that travel through the object store, for builds whose nodes share no disk.

With `engine="ray"` and an object-store cache root, a part may run on a machine whose disk the
driver cannot see. So each task writes its part into its own local folder (the same path on its
own disk), adds what a merge that cannot read the part's data needs (the layout's `seal_part`:
Lance blob digests), uploads every file of it under the split's parts prefix on the store, and
uploads the part's record (`_part.json`) last: a record on the store means the whole part is there.

The driver never brings the parts' data through itself. It lists the parts prefix once, checks
that each part's files are there at the sizes its record gives (`StoreParts`), and runs the
layout's merge against the store (layouts.part_files): a cache file that is a part's file under
another name (a renumbered shard, a Lance data file) is only noted, and the publish copies that
object on the store, server-side, to its final name; the merge reads the few small files it needs
(a part's video records table), and the duplicate-key check's jobs, on the nodes, read the parts' key
files there (write.key_check). The cache's `_metadata.json` is built from the part records (paths,
rows, sizes, checksums). A driver's disk and network carry records and manifests, not the cache.

The parts prefix is `<split>/attempts/<id>/parts/`, where `<id>` hashes the jobs (and so the
fingerprint): a build that failed leaves its finished parts there, and the next build of the same
jobs reuses them instead of running them again. The driver deletes the prefix once it published.
An `attempts/<id>/` no `_metadata.json` names is what `prune` removes as an abandoned attempt, so
a build that is never run again leaves nothing prune cannot explain.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stable_datasets.cache.journal import JOURNAL_FILE
from stable_datasets.errors import StableDatasetsError, StorageError
from stable_datasets.layouts import layout_module
from stable_datasets.write.engines import ray_node_id
from stable_datasets.write.parts import PART_FILE, PartResult, part_dir

ATTEMPTS = "attempts"  # the object-store protocol's attempt folder (storage.publish.ATTEMPTS)
PARTS = "parts"


@dataclass(frozen=True)
class RemoteParts:
    """Where a split's parts go on the store: `store` (an ObjectStore, pickled by its URL and options)
    and the split's prefix on it."""

    store: Any
    split_prefix: str

    def prefix(self, jobs_identity: str) -> str:
        attempt = hashlib.sha256(jobs_identity.encode()).hexdigest()[:32]
        return f"{self.split_prefix}/{ATTEMPTS}/{attempt}/{PARTS}"

    def url(self, key: str) -> str:
        return str(self.store.url(key))


def part_key(prefix: str, index: int, relative: str = "") -> str:
    name = part_dir(Path("."), index).name
    return f"{prefix}/{name}/{relative}" if relative else f"{prefix}/{name}"


def shards_listed(sizes: dict[str, int], prefix: str, part: PartResult) -> bool:
    """Whether a listing ({key: size}) of the parts prefix holds each shard the part's record lists, at its size."""
    return all(sizes.get(part_key(prefix, part.index, s.path)) == s.num_bytes for s in part.shards)


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
    if not shards_listed(sizes, prefix, result):
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
        directory = part_dir(staging, index)
        result = layout_module(plan.layout).seal_part(directory, replace(result, node=node))
        result.save(directory)  # with the node that wrote it
        try:
            upload_part(remote, prefix, directory, result)
        except StorageError as exc:
            raise unreachable(exc, "upload it to") from exc
        shutil.rmtree(directory, ignore_errors=True)  # the driver merges from the store, on any node
        return result

    return write_and_upload


class StoreParts:
    """The parts of a build on the store, as a merge sees them (layouts.part_files.PartFiles): made with one
    listing of the parts prefix, which must hold every part's record and each file it lists at its size.
    `place` notes {cache file: the part's object} in `copies`, for the publish to copy on the store;
    `local` downloads one small file into the part's folder of the staging directory (`downloaded` bytes)."""

    on_disk = False

    def __init__(self, remote: RemoteParts, prefix: str, parts: list[PartResult]):
        self.remote, self.prefix = remote, prefix
        self.copies: dict[str, str] = {}
        self.downloaded = 0
        sizes = {o.key: o.size for o in remote.store.list(prefix + "/")}
        for part in parts:
            record = part_key(prefix, part.index, PART_FILE)
            if record not in sizes:
                raise StableDatasetsError(f"part {part.index} of {len(parts)} (node {part.node or 'unknown'}) is not "
                                          f"on the store: no {remote.url(record)}")
            if not shards_listed(sizes, prefix, part):
                raise StableDatasetsError(f"part {part.index} of {len(parts)} (node {part.node or 'unknown'}): its "
                                          f"files on {remote.url(part_key(prefix, part.index))}/ do not match its "
                                          "record")

    def place(self, staging: Path, part: PartResult, relative: str, name: str) -> None:
        self.copies[name] = part_key(self.prefix, part.index, relative)

    def local(self, staging: Path, part: PartResult, relative: str) -> Path:
        path = part.folder(staging) / relative
        if not path.is_file():
            size, _ = self.remote.store.download(part_key(self.prefix, part.index, relative), path)
            self.downloaded += size
        return path


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


def remove_prefix(remote: RemoteParts, prefix: str) -> None:
    """Every object of the attempt `prefix` is in (`<split>/attempts/<id>/...`)."""
    attempt = prefix.rsplit("/", 1)[0] + "/"
    keys = [o.key for o in remote.store.list(attempt)]
    if keys:
        remote.store.delete(keys)
