"""Input files named by URL (`s3://`, `gs://`, any fsspec scheme, `https://`): local verified copies.

Readers of input files (packed SFT Parquet, WebDataset tars, interleaved Parquet) map or seek
files, so a remote input is first copied to `<local base>/inputs/` and read from there. Rules:

- Object stores go through `storage.resolve.open_store` (the same client, retries and errors
  as remote cache roots); `http(s)://` through the download manager (ETag/Last-Modified checks).
- A copy appears whole: downloaded beside its place, its size checked against the object's,
  the object asked again after the download (size and ETag, or modification time) and then
  renamed. An object that changed while it was copied is an error naming it, so a reader
  never gets bytes mixed from two versions. One process per node downloads a file (a lock).
- A copy is reused while the object still has the size and ETag recorded with it; an object
  that changed since is copied again, one that vanished is an error naming its URL.
- A URL may end in a glob (`s3://b/packs/*.parquet`, matched as `glob.glob(recursive=True)` matches
  local paths: `*` within one folder, `**/` across folders) or name a prefix (`s3://b/packs/`): the
  objects directly under it (as a local folder's files, not its subfolders') whose names end in one
  of the reader's suffixes, sorted.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import filelock

from stable_datasets.cache.publish import file_sha256
from stable_datasets.errors import DownloadError, InputChangedError, MissingObjectError, StorageError
from stable_datasets.storage.resolve import open_store
from stable_datasets.storage.root import local_base
from stable_datasets.storage.store import ObjectInfo, ObjectStore
from stable_datasets.urls import ObjectURL, is_url

HTTP_SCHEMES = ("http", "https")


class RemoteInputNotFoundError(StorageError, FileNotFoundError):
    """A remote input (or pattern) names no object."""


def inputs_root() -> Path:

    return local_base() / "inputs"


def local_inputs(items: list[Any], suffixes: tuple[str, ...] = (),
                 storage_options: dict[str, Any] | None = None) -> list[Any]:
    """`items` with every URL replaced by the local copies of the objects it names (local paths kept as given).

    A pattern or prefix expands to its objects ending in `suffixes` (any object when empty)."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, str) and is_url(item):
            out.extend(str(path) for path in fetch_inputs(item, suffixes, storage_options))
        else:
            out.append(item)
    return out


def options_for(url: str, input_options: dict[str, dict[str, Any]] | None) -> dict[str, Any] | None:
    """The storage options for an input URL out of {scheme: options} ("*": any scheme); None: the environment's.

    `load_dataset(storage_options=...)` gives one set of options: those of the cache root's scheme, or
    of every object-store input when the root is local (builder.Builder.input_storage_options).
    """
    if not input_options:
        return None
    scheme = url.split("://", 1)[0].lower()
    return input_options.get(scheme, input_options.get("*"))


def is_object_url(text: Any) -> bool:
    """An object-store URL (`s3://`, `gs://`, ...), not `http(s)://` nor a local path."""
    return is_url(text) and text.split("://", 1)[0].lower() not in HTTP_SCHEMES


def object_identity(url: str, storage_options: dict[str, Any] | None = None) -> list[Any]:
    """[url, size, its version (ETag, or modification time)] of one object: a data file's part of a fingerprint."""
    _store, info = _one_object(url, storage_options)
    return [url, info.size, _version(info)]


def fetch_object(url: str, storage_options: dict[str, Any] | None = None,
                 expected: list[Any] | None = None) -> tuple[Path, str]:
    """(a local verified copy of the one object `url` names, its sha256): builder downloads and data files.

    `expected` ([size, version] as `object_identity` gave them when the build's fingerprint was made): the object
    must still be that version, else InputChangedError. A part fetches its inputs on its own node, after the driver
    identified them: rows of another version would be published under the first one's fingerprint."""
    store, info = _one_object(url, storage_options)
    if expected is not None and [info.size, _version(info)] != list(expected):
        raise InputChangedError(f"data file {url} changed since the build identified it (size and version "
                                f"{list(expected)} -> {[info.size, _version(info)]}); nothing was published. Run "
                                "again once it is no longer being written")
    path = _fetch_object(store, info)
    try:
        digest = json.loads(path.with_name(f".{path.name}.version.json").read_text(encoding="utf-8"))["sha256"]
    except (OSError, ValueError, KeyError):

        digest = file_sha256(path)
    return path, digest


def expand_object_pattern(url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The URLs of the objects a glob URL (`s3://b/train-*.csv`) matches, sorted; [] when none."""

    parsed = ObjectURL.parse(url)
    try:
        found = _objects_named(open_store(parsed, storage_options), parsed, url, ())
    except RemoteInputNotFoundError:
        return []
    return [f"{parsed.scheme}://{parsed.bucket}/{o.key}" for o in found]


def _one_object(url: str, storage_options: dict[str, Any] | None) -> tuple[ObjectStore, ObjectInfo]:

    parsed = ObjectURL.parse(url)
    store = open_store(parsed, storage_options)
    info = store.head(parsed.key) if parsed.key else None
    if info is None:
        raise RemoteInputNotFoundError(f"{url}: no such object")
    return store, info


def fetch_inputs(url: str, suffixes: tuple[str, ...] = (),
                 storage_options: dict[str, Any] | None = None) -> list[Path]:
    """Local verified copies of the object(s) `url` names (see the module docstring)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in HTTP_SCHEMES:
        return [_fetch_http(url)]

    parsed = ObjectURL.parse(url)
    store = open_store(parsed, storage_options)
    objects = _objects_named(store, parsed, url, suffixes)
    return [_fetch_object(store, info) for info in objects]


def _objects_named(store: ObjectStore, parsed: ObjectURL, url: str, suffixes: tuple[str, ...]) -> list[ObjectInfo]:
    key = parsed.key
    if any(ch in key for ch in "*?["):
        fixed = key[:min(key.index(ch) for ch in "*?[" if ch in key)]
        pattern = key.split("/")
        found = [o for o in store.list(fixed) if glob_matches(o.key.split("/"), pattern)]
        if not found:
            raise RemoteInputNotFoundError(f"no objects match the pattern {url}")
        return sorted(found, key=lambda o: o.key)
    single = store.head(key) if key and not url.endswith("/") else None
    if single is not None:
        return [single]
    folder = f"{key}/" if key else ""  # its direct objects, as a local folder's files (a glob with ** goes deeper)
    under = [o for o in store.list(folder)
             if "/" not in o.key[len(folder):] and (not suffixes or o.key.endswith(suffixes))]
    if not under:
        kinds = f" {'/'.join(suffixes)}" if suffixes else ""
        raise RemoteInputNotFoundError(f"{url}: no such object, and no{kinds} objects under it")
    return sorted(under, key=lambda o: o.key)


def glob_matches(names: list[str], pattern: list[str]) -> bool:
    """Whether a key's names match a glob's, as glob.glob(recursive=True) matches paths: `*`, `?` and `[...]`
    inside one name, `**` as a whole name for zero or more names, and a hidden name (".x") only where the
    pattern's name starts with a dot too."""
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        for taken in range(len(names) + 1):
            if taken and names[taken - 1].startswith("."):
                return False
            if glob_matches(names[taken:], rest):
                return True
        return False
    if not names or (names[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], head) and glob_matches(names[1:], rest)


def _version(info: ObjectInfo) -> dict[str, Any]:
    return {"size": info.size, "etag": info.etag} if info.etag else {"size": info.size, "modified": info.modified}


def _fetch_object(store: ObjectStore, info: ObjectInfo) -> Path:
    names = info.key.split("/")
    if any(name in ("", ".", "..") for name in names):  # keys are any text: such a one would leave the folder
        raise StorageError(f"{store.url(info.key)}: the object's key has an empty, '.' or '..' name, so it has no "
                           "local copy; rename the object")
    destination = inputs_root().joinpath(store.scheme, store.bucket, *names)
    record = destination.with_name(f".{destination.name}.version.json")
    if _current(destination, record, info):
        return destination
    destination.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(destination.with_name(f".{destination.name}.lock")), mode=0o664):
        if _current(destination, record, info):
            return destination
        temporary = destination.with_name(f".{destination.name}.{uuid.uuid4().hex[:8]}.download")
        try:
            try:
                size, digest = store.download(info.key, temporary)
            except MissingObjectError:
                raise RemoteInputNotFoundError(f"{store.url(info.key)}: input vanished while it was being "
                                               "read") from None
            after = store.head(info.key)
            if after is None:
                raise RemoteInputNotFoundError(f"{store.url(info.key)}: input vanished while it was being read")
            if size != info.size or _version(after) != _version(info):
                raise StorageError(f"{store.url(info.key)}: input changed while it was being read ({info.size} "
                                   f"bytes listed, {size} read, {after.size} now); read it again once it is "
                                   "no longer being written")
            os.replace(temporary, destination)
            text = json.dumps({**_version(info), "sha256": digest, "url": store.url(info.key)})
            record_temporary = record.with_name(f"{record.name}.{uuid.uuid4().hex[:8]}")
            record_temporary.write_text(text, encoding="utf-8")
            os.replace(record_temporary, record)
        finally:
            temporary.unlink(missing_ok=True)
    return destination


def _current(destination: Path, record: Path, info: ObjectInfo) -> bool:
    """The copy here is of the object's present version (same size and ETag / modification time)."""
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
        if destination.stat().st_size != info.size:
            return False
    except (OSError, ValueError):
        return False
    saved.pop("sha256", None)
    saved.pop("url", None)
    if saved != _version(info):
        return False
    with contextlib.suppress(OSError):
        os.utime(destination)
    return True


def _fetch_http(url: str) -> Path:
    from stable_datasets.download.manager import DownloadManager  # local: it imports this module

    folder = inputs_root() / "http" / hashlib.sha256(url.encode()).hexdigest()[:2]
    try:
        return Path(DownloadManager(folder).download(url))
    except DownloadError as exc:
        if "HTTP 404" in str(exc) or "HTTP 410" in str(exc):
            raise RemoteInputNotFoundError(f"{url}: no such input ({exc})") from None
        raise
