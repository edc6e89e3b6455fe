"""Publishing a cache to an object store, where there is no rename.

The rule: **a remote cache is visible only through its `_metadata.json`, written last, with a
conditional put.** A split's prefix `<root>/<name>/<config>/<version>/<fingerprint>/<split>/` holds

    _metadata.json          the commit: lists `attempt` and every object under it (size, sha256)
    _lease.json             who builds it now (storage.lease)
    attempts/<id>/...       the data objects of one build attempt, never modified once written
    attempts/<id>/parts/    a Ray build's parts, uploaded by the nodes that wrote them (write.remote_parts):
                            deleted once published; left by a failed build for the next one

A build runs the local write path into a local staging folder (write.split), then
`publish_attempt` uploads every file `_metadata.json` lists under a fresh attempt prefix and
puts `_metadata.json` with `If-None-Match: *`. A file that is already on the store (a Ray build's
part file, uploaded by the node that wrote it; the driver merged the parts there and never
downloaded it) is copied there server-side instead (`copies`: S3 CopyObject, or UploadPartCopy
part by part above 5 GB; gcsfs's rewrite), so each byte of the cache is uploaded once and the
driver moves only metadata. Exactly one builder's put succeeds; a loser
deletes its attempt and uses the winner's cache. A reader resolves `_metadata.json` once and
then reads only inside the attempt it names, so it sees no cache or a whole one, and keeps
reading its attempt whatever is published later. Objects of an attempt no `_metadata.json`
names (a killed build, a lost race) are removed by `prune` once no lease protects them.

A rebuild (`download_mode="force_rebuild"`) replaces `_metadata.json` under the lease and
marks the attempt it replaced `_superseded.json`: `prune` removes a superseded attempt only
after a grace period, so datasets other nodes opened before keep their files that long.

Lance caches are uploaded the same way (a finished Lance dataset is a folder of files with
relative paths), and read in place from the attempt prefix: Lance's own object-store commit
would make the dataset visible by itself, beside `_metadata.json`, and needs a commit store
for concurrent writers; one protocol for every layout keeps "visible only through
`_metadata.json`" true for all of them.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata
from stable_datasets.errors import CacheError, StableDatasetsError
from stable_datasets.layouts.checked import parse_metadata
from stable_datasets.storage import shard_cache
from stable_datasets.storage.store import ObjectStore

ATTEMPTS = "attempts"
ATTEMPT_RECORD = "_attempt.json"  # {"host", "pid", "started"}: uploaded first, names the attempt's builder
SUPERSEDED = "_superseded.json"  # {"at"}: written when a rebuild replaced this attempt's _metadata.json
UPLOAD_THREADS = 8
#: server-side copies in flight at once: a copy moves no bytes through this process, only waits on the store, so a
#: publish of many copied shards (a Ray build merged on the store) keeps as many going as the S3 client's
#: connection pool allows (storage.s3: 32)
COPY_THREADS = 32


@dataclass(frozen=True)
class RemoteSplit:
    """One split's prefix on a store."""

    store: ObjectStore
    prefix: str

    @property
    def url(self) -> str:
        return self.store.url(self.prefix)

    def key(self, *relative: str) -> str:
        return "/".join([self.prefix, *relative])

    def metadata_text(self) -> str | None:
        data = self.store.get(self.key(METADATA_FILE))
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return "\x00not utf-8"  # parse refuses it, naming the object

    def read_metadata(self) -> CacheMetadata | None:
        """The published metadata (checked), None when nothing is published; CacheError when it is damaged."""
        text = self.metadata_text()
        return None if text is None else parse_remote_metadata(text, self.store.url(self.key(METADATA_FILE)))

    def fetch_shard_list(self, metadata: CacheMetadata) -> CacheMetadata:
        """`metadata` with its shard list readable: a cache of many shards lists them in an object of its attempt
        (`_shards.arrow`, cache.shard_list), fetched into this node's shard cache (checked by size and sha256)."""
        listed = metadata.shard_list_file
        if listed is not None:
            attempt_key = self.key(metadata.attempt)
            local = shard_cache.attempt_dir(self.store, attempt_key)
            shard_cache.fetch(self.store, f"{attempt_key}/{listed.path}", local / listed.path, listed)
            metadata.attach_shard_list(local)
        return metadata


def parse_remote_metadata(text: str, url: str) -> CacheMetadata:
    """Checked metadata of a remote cache; it must name the attempt its objects are under."""
    try:
        metadata = parse_metadata(text, PurePosixPath("/remote") / METADATA_FILE,  # type: ignore[arg-type]
                                       attach=False)  # a shard-list file is fetched when needed: fetch_shard_list
    except CacheError as exc:
        raise CacheError(str(exc).replace(f"/remote/{METADATA_FILE}", url)) from None
    if not metadata.attempt:
        raise CacheError(f"{url}: invalid cache metadata: names no attempt (not published by stable-datasets' "
                         "object-store protocol)")
    outside = next((f.path for f in metadata.extra_files if ".." in PurePosixPath(f.path).parts), None)
    if outside is not None:  # local caches may point at a shared media folder; a remote one never does
        raise CacheError(f"{url}: invalid cache metadata: extra file {outside!r} leaves the cache's attempt prefix")
    return metadata


def files_of(metadata: CacheMetadata) -> list:
    """Every object of the cache's attempt: its shard list file first when it has one (cache.shard_list)."""
    listed = metadata.shard_list_file
    return [*([listed] if listed is not None else []), *metadata.shards, *metadata.extra_files]


def publish_attempt(split: RemoteSplit, build_dir: Path, metadata: CacheMetadata, attempt_id: str, *,
                    replace: bool = False, copies: Mapping[str, str] | None = None) -> tuple[CacheMetadata, bool]:
    """Upload a locally built cache under `attempts/<attempt_id>` and commit its `_metadata.json`.

    Returns (the published metadata, whether ours won). With `replace` (a rebuild under the
    lease) ours replaces what was published and the replaced attempt is marked superseded.
    `copies`: {path of a file of the cache: key of an object of the same store with the same bytes}: those are
    copied on the store, not uploaded (their size is checked before the commit).
    """
    outside = [f.path for f in files_of(metadata) if ".." in PurePosixPath(f.path).parts]
    if outside:
        raise StableDatasetsError(f"{split.url}: files outside the cache folder ({outside[0]!r}: path-stored "
                                  "videos) cannot be published to an object store; use Video(storage='bytes') or "
                                  "Video(storage='frames')")
    attempt = f"{ATTEMPTS}/{attempt_id}"
    store = split.store
    store.put_bytes(split.key(attempt, ATTEMPT_RECORD), json.dumps(
        {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}).encode())
    copies = copies or {}
    with ThreadPoolExecutor(COPY_THREADS) as copying, ThreadPoolExecutor(UPLOAD_THREADS) as uploading:
        done = [copying.submit(store.copy, copies[f.path], split.key(attempt, f.path), f.num_bytes) if f.path in copies
                else uploading.submit(store.put_file, build_dir / f.path, split.key(attempt, f.path))
                for f in files_of(metadata)]
        for future in done:
            future.result()
    _check_uploaded(split, attempt, metadata, set(copies))
    metadata.attempt = attempt
    body = json.dumps(metadata.to_dict(), indent=2, sort_keys=True).encode()
    if replace:
        previous = split.metadata_text()
        store.put_bytes(split.key(METADATA_FILE), body)
        old = _attempt_named(previous)
        if old and old != attempt:
            store.put_bytes(split.key(old, SUPERSEDED), json.dumps({"at": time.time()}).encode())
        return metadata, True
    if store.put_if_absent(split.key(METADATA_FILE), body):
        return metadata, True
    remove_attempt(split, attempt)  # another builder published first: use theirs
    winner = split.read_metadata()
    if winner is None:
        raise CacheError(f"{split.url}: another builder's {METADATA_FILE} was there and then gone; run again")
    return winner, False


#: `_metadata.json` extra: {path: the store's ETag of the uploaded object}, for objects read in place (Lance)
ETAGS = "object_etags"


def missing_objects(split: RemoteSplit, attempt: str, metadata: CacheMetadata, sized: Set[str] = frozenset()
                    ) -> tuple[list[str], dict[str, str]]:
    """(paths `metadata` lists that are not under the attempt, or for those in `sized`, not at their size; the
    ETags of those there): one listing."""
    prefix = split.key(attempt) + "/"
    listed = {o.key[len(prefix):]: o for o in split.store.list(prefix)}
    missing = [f.path for f in files_of(metadata)
               if f.path not in listed or (f.path in sized and listed[f.path].size != f.num_bytes)]
    return missing, {path: o.etag for path, o in listed.items() if o.etag}


def _check_uploaded(split: RemoteSplit, attempt: str, metadata: CacheMetadata, copied: set[str] = frozenset()) -> None:
    """Every uploaded object is still there before the commit names it (a `prune` that ran while this builder's
    lease was lost may have removed them: then nothing is published), a copied one with its size, and its ETag is
    noted (_record_etags)."""
    missing, etags = missing_objects(split, attempt, metadata, copied)
    if missing:
        remove_attempt(split, attempt)
        raise CacheError(f"{split.store.url(split.key(attempt, missing[0]))}: uploaded object is gone before "
                         f"{METADATA_FILE} was written ({len(missing)} of {len(files_of(metadata))} missing; removed "
                         "while this build ran, e.g. by a prune on another node after this builder lost its lease); "
                         "nothing was published: run the build again")
    _record_etags(metadata, etags)


def _record_etags(metadata: CacheMetadata, etags: dict[str, str]) -> None:
    """Note the ETag of every uploaded object (stores that give none: nothing). Lance is read in
    place, without a sha256 check, so opening it compares these: a replaced object is an error, not wrong rows."""
    # a cache of many shards notes only its shard list's and extra files' (a million ETags would make
    # `_metadata.json` grow with the shards again): its in-place objects are then checked by size only
    files = files_of(metadata) if metadata.shard_list_file is None else [metadata.shard_list_file,
                                                                          *metadata.extra_files]
    listed = {f.path: etags[f.path] for f in files if f.path in etags}
    if listed:
        metadata.extra[ETAGS] = listed


def _attempt_named(text: str | None) -> str | None:
    try:
        value = json.loads(text).get("attempt") if text else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value.startswith(f"{ATTEMPTS}/") else None


def remove_attempt(split: RemoteSplit, attempt: str) -> int:
    """Delete every object of one attempt; how many."""
    keys = [o.key for o in split.store.list(split.key(attempt) + "/")]
    split.store.delete(keys)
    return len(keys)
