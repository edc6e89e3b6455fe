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
  that changed since is copied again, one that vanished is an error naming its URL. Reuse marks
  only the copy's access time: its size and modification time are the identity streams opened on
  it check, so opening the same files again (another rank, an eval loop) never stops a stream.
- A part that reads one range of a large data file fetches that range only (`object_range`: a ranged
  GET with If-Match on the ETag on S3, a `Range` request with If-Match / If-Unmodified-Since over
  http(s); `fetch_object_range` keeps it as `<key>.ranges/<start>-<stop>`), and refuses another
  version of the file than the one the fingerprint identified (InputChangedError naming it).
- A URL may end in a glob (`s3://b/packs/*.parquet`, matched as `glob.glob(recursive=True)` matches
  local paths: `*` within one folder, `**/` across folders) or name a prefix (`s3://b/packs/`): the
  objects directly under it (as a local folder's files, not its subfolders') whose names end in one
  of the reader's suffixes, sorted.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import filelock

from stable_datasets.cache.publish import file_sha256
from stable_datasets.download.http import head as http_head
from stable_datasets.download.http import validators as http_validators
from stable_datasets.errors import (
    DownloadError,
    InputChangedError,
    MissingObjectError,
    StableDatasetsError,
    StorageError,
)
from stable_datasets.storage.resolve import open_store
from stable_datasets.storage.retry import with_retries
from stable_datasets.storage.root import local_base
from stable_datasets.storage.store import ObjectChangedError, ObjectInfo, ObjectStore
from stable_datasets.urls import ObjectURL, is_url
from stable_datasets.version import __version__

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
        raise _changed(url, expected, [info.size, _version(info)])
    path = _fetch_object(store, info)
    try:
        digest = json.loads(path.with_name(f".{path.name}.version.json").read_text(encoding="utf-8"))["sha256"]
    except (OSError, ValueError, KeyError):

        digest = file_sha256(path)
    return path, digest


def remote_size(url: str, storage_options: dict[str, Any] | None = None) -> int:
    """The size of a remote data file not identified yet (inference reads before the fingerprint): a HEAD."""
    if url.split("://", 1)[0].lower() in HTTP_SCHEMES:
        try:
            return int(http_head(url).get("Content-Length") or 0)
        except StableDatasetsError as exc:
            raise DownloadError(f"cannot read data file {url}: {exc}") from None
    return _one_object(url, storage_options)[1].size


def object_range(url: str, start: int, stop: int, storage_options: dict[str, Any] | None = None,
                 expected: list[Any] | None = None) -> bytes:
    """Bytes [start, stop) of the object `url` names (a ranged GET): a part that reads one range of a large data
    file fetches that range only. `expected` as in `fetch_object`: another version is InputChangedError (S3 asks
    with If-Match on the ETag; other stores are asked for the object's version after the read). An `http(s)://`
    URL is asked with a Range header (see `_http_range`)."""
    if url.split("://", 1)[0].lower() in HTTP_SCHEMES:
        return _http_range(url, start, stop, expected)
    parsed = ObjectURL.parse(url)
    store = open_store(parsed, storage_options)
    version = expected[1] if expected and len(expected) > 1 and isinstance(expected[1], dict) else {}
    etag = str(version.get("etag") or "")
    try:
        data = store.get_range(parsed.key, start, stop, etag)
    except ObjectChangedError:
        raise _changed(url, expected, None) from None
    except MissingObjectError:
        raise RemoteInputNotFoundError(f"{url}: input vanished while it was being read") from None
    if expected is not None and not (etag and store.conditional_reads):  # asked after the read, then
        info = store.head(parsed.key)
        if info is None:
            raise RemoteInputNotFoundError(f"{url}: input vanished while it was being read")
        if [info.size, _version(info)] != list(expected):
            raise _changed(url, expected, [info.size, _version(info)])
    return data


def _changed(url: str, expected: list[Any] | None, now: list[Any] | None) -> InputChangedError:
    seen = f" -> {now}" if now is not None else " -> another version"
    return InputChangedError(f"data file {url} changed since the build identified it (size and version "
                             f"{list(expected or [])}{seen}); nothing was published. Run again once it is no "
                             "longer being written")


#: bytes one ranged GET of `fetch_object_range` and `count_object_lines` asks for
RANGE_CHUNK = 16 << 20


def fetch_object_range(url: str, start: int, stop: int, storage_options: dict[str, Any] | None = None,
                       expected: list[Any] | None = None) -> Path:
    """A local copy of bytes [start, stop) of the object `url` names, of the version `expected` identifies (see
    `object_range`), in this node's inputs folder (`<key>.ranges/<start>-<stop>`): a part reads its range of a
    large data file without the rest of it. Written beside its place and renamed; reused while its record says
    it holds that version."""
    if url.split("://", 1)[0].lower() in HTTP_SCHEMES:
        name = url.split("?")[0].rstrip("/").rsplit("/", 1)[-1] or "file"
        folder = inputs_root() / "http" / hashlib.sha256(url.encode()).hexdigest()[:16] / f"{name}.ranges"
    else:
        parsed = ObjectURL.parse(url)
        copy = _object_copy(parsed.scheme, parsed.bucket, parsed.key, url)
        folder = copy.with_name(f"{copy.name}.ranges")
    destination = folder / f"{start}-{stop}"
    record = folder / f".{start}-{stop}.version.json"
    wanted = json.dumps(expected, sort_keys=True, default=str)
    with contextlib.suppress(OSError):
        if expected is not None and record.read_text(encoding="utf-8") == wanted and \
                destination.stat().st_size == stop - start:
            return destination
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".{start}-{stop}.{uuid.uuid4().hex[:8]}.download"
    try:
        with open(temporary, "wb") as fh:
            for lo in range(start, stop, RANGE_CHUNK):
                hi = min(lo + RANGE_CHUNK, stop)
                data = object_range(url, lo, hi, storage_options, expected)
                if len(data) != hi - lo:
                    raise InputChangedError(f"data file {url}: bytes {lo}..{hi} read {len(data)} bytes (the object "
                                            "is shorter than the build identified); nothing was published")
                fh.write(data)
        os.replace(temporary, destination)
        if expected is not None:
            record.write_text(wanted, encoding="utf-8")
    finally:
        temporary.unlink(missing_ok=True)
    return destination


def count_object_lines(url: str, stop: int, storage_options: dict[str, Any] | None = None,
                       expected: list[Any] | None = None) -> int:
    """Line ends in bytes [0, stop) of the object: the line number a range starting at `stop` begins at, which
    an error in that range needs (read only then, a chunk at a time)."""
    return sum(object_range(url, lo, min(lo + RANGE_CHUNK, stop), storage_options, expected).count(b"\n")
               for lo in range(0, stop, RANGE_CHUNK))


class ObjectReader(io.RawIOBase):
    """A seekable binary file over one object, each read a ranged GET of the version `expected` identifies (see
    `object_range`): Parquet's reader reads the footer and the row groups a part asks for, nothing else."""

    def __init__(self, url: str, size: int, storage_options: dict[str, Any] | None = None,
                 expected: list[Any] | None = None):
        super().__init__()
        self.url, self.size, self.options, self.expected = url, size, storage_options, expected
        self.position = 0
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), max(self.size - self.position, 0))
        if n <= 0:
            return 0
        data = object_range(self.url, self.position, self.position + n, self.options, self.expected)
        buffer[:len(data)] = data
        self.position += len(data)
        self.bytes_read += len(data)
        return len(data)


def open_object(url: str, storage_options: dict[str, Any] | None = None,
                expected: list[Any] | None = None) -> ObjectReader:
    """`ObjectReader` over `url` (its size from `expected`, else asked). Unbuffered: Parquet's reader asks for
    exactly the column chunks it needs (a buffer would read past them)."""
    size = int(expected[0]) if expected else remote_size(url, storage_options)
    return ObjectReader(url, size, storage_options, expected)


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
        return [fetch_http_input(url)]

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


def _object_copy(scheme: str, bucket: str, key: str, url: str) -> Path:
    """Where this node keeps its copy of the object `key` (the inputs folder mirrors the store's keys)."""
    names = key.split("/")
    if any(name in ("", ".", "..") for name in names):  # keys are any text: such a one would leave the folder
        raise StorageError(f"{url}: the object's key has an empty, '.' or '..' name, so it has no local copy; "
                           "rename the object")
    return inputs_root().joinpath(scheme, bucket, *names)


def _fetch_object(store: ObjectStore, info: ObjectInfo) -> Path:
    destination = _object_copy(store.scheme, store.bucket, info.key, store.url(info.key))
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
    with contextlib.suppress(OSError):  # marks its use, access time only: the size and modification time are
        os.utime(destination, ns=(time.time_ns(), destination.stat().st_mtime_ns))  # what open streams check
    return True


def fetch_http_input(url: str, expected: list[Any] | None = None) -> Path:
    """This node's copy of an `http(s)://` data file (the download manager's, in its inputs folder): parts fetch
    such files on their own nodes, as they do object-store ones. With `expected` ([size, validators] as the
    fingerprint's HEAD gave them), the copy must be of that version, else InputChangedError."""
    from stable_datasets.download.manager import DownloadManager  # local: it imports this module

    folder = inputs_root() / "http" / hashlib.sha256(url.encode()).hexdigest()[:2]
    manager = DownloadManager(folder)
    try:
        path = Path(manager.download(url))
    except DownloadError as exc:
        if "HTTP 404" in str(exc) or "HTTP 410" in str(exc):
            raise RemoteInputNotFoundError(f"{url}: no such input ({exc})") from None
        raise
    if expected is not None and len(expected) > 1 and isinstance(expected[1], dict):
        record = manager.record(url) or {}
        got = record.get("validators") or {}
        now = [record.get("size"), got]
        if any(got.get(k) != v for k, v in expected[1].items()) or \
                (expected[0] is not None and record.get("size") != expected[0]):
            raise _changed(url, expected, now)
    return path


def _http_range(url: str, start: int, stop: int, expected: list[Any] | None) -> bytes:
    """Bytes [start, stop) of an http(s) resource: a GET with `Range` and, with `expected`, a precondition on the
    validators the fingerprint recorded (If-Match on the ETag, else If-Unmodified-Since), and the answer's
    validators compared to them too (a server that ignores preconditions). 412, or other validators, is
    InputChangedError. A server that ignores Range answers the whole body: the bytes before `start` are skipped."""
    if stop <= start:
        return b""
    wanted = expected[1] if expected and len(expected) > 1 and isinstance(expected[1], dict) else {}
    headers = {"User-Agent": f"stable-datasets/{__version__}", "Range": f"bytes={start}-{stop - 1}"}
    if wanted.get("ETag"):
        headers["If-Match"] = wanted["ETag"]
    elif wanted.get("Last-Modified"):
        headers["If-Unmodified-Since"] = wanted["Last-Modified"]

    def fetch() -> bytes:
        request = urllib.request.Request(url, headers=headers)
        try:
            response = urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as exc:
            if exc.code == 412:
                raise _changed(url, expected, None) from None
            if exc.code == 416:
                return b""
            if exc.code in (404, 410):
                raise RemoteInputNotFoundError(f"{url}: input vanished while it was being read (HTTP {exc.code})"
                                               ) from None
            if exc.code == 429 or exc.code >= 500:
                raise ConnectionError(f"{url}: HTTP {exc.code} {exc.reason}") from None
            raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        with response:
            got = http_validators(response.headers)
            if any(got.get(k) is not None and got.get(k) != v for k, v in wanted.items()):
                raise _changed(url, expected, [None, got])
            skip = start if response.status != 206 else 0
            while skip:
                chunk = response.read(min(skip, 1 << 20))
                if not chunk:
                    return b""
                skip -= len(chunk)
            return response.read(stop - start)

    try:
        return with_retries(fetch, lambda exc: isinstance(exc, (ConnectionError, TimeoutError,
                                                                urllib.error.URLError)), f"read {url}")
    except (ConnectionError, TimeoutError, urllib.error.URLError) as exc:
        raise DownloadError(f"cannot read bytes {start}..{stop} of data file {url} ({getattr(exc, 'reason', exc)})"
                            ) from None
