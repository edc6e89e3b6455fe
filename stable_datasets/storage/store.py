"""What the cache needs from an object store: whole-object reads and writes, listing, deletion,
and one conditional write (create only if absent) that makes publishing safe without rename.

Keys are bucket-relative (`prefix/name/.../_metadata.json`). Every method raises
`StorageError` with one line naming the URL and what to set; transient failures are retried
first (see storage.retry).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from stable_datasets.errors import MissingObjectError, StableDatasetsError, StorageError
from stable_datasets.urls import ObjectURL

CHUNK = 8 << 20


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    modified: float  # seconds since the epoch
    etag: str = ""  # the store's version tag of the object, when it gives one


class ObjectStore(ABC):
    """One bucket of one object store, with its credentials and endpoint resolved."""

    scheme: str
    bucket: str
    storage_options: dict[str, Any]  # as given when it was set up: a pickled store is set up again from them
    #: True when `get_range(..., etag)` refuses another version itself (S3's If-Match); else callers check `head`
    conditional_reads: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        """DataLoader workers started by "spawn"/"forkserver" get a stream pickled: the client is set up again
        there (once per process, bucket and options) rather than pickled."""
        from stable_datasets.storage.resolve import open_store  # local: resolve imports this module

        return open_store, (ObjectURL(self.scheme, self.bucket, ""), self.storage_options)

    def url(self, key: str) -> str:
        return str(ObjectURL(self.scheme, self.bucket, key))

    @abstractmethod
    def check(self) -> None:
        """Fail fast (StorageError) when the bucket is missing, unreachable or refuses our credentials."""

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The object's bytes, None when there is no such object."""

    @abstractmethod
    def _open_stream(self, key: str) -> BinaryIO | None:
        """A stream over the object (None when missing), unretried: callers wrap it in their retries."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def put_file(self, path: Path, key: str) -> None: ...

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create the object only if no object has that key (If-None-Match: *); False if one exists."""

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        """(the object's bytes, a tag of this version) or None: `put_if_match` replaces exactly this version.
        The default tag is the bytes' sha256; stores with version tags (S3's ETag) give theirs."""
        data = self.get(key)
        return None if data is None else (data, hashlib.sha256(data).hexdigest())

    def put_if_match(self, key: str, data: bytes, tag: str) -> bool:
        """Replace the object only if it is still the version `tag` names (`get_tagged`); False if it changed or is
        gone. The default checks, then writes (a narrow race); stores with conditional writes override it."""
        current = self.get_tagged(key)
        if current is None or current[1] != tag:
            return False
        self.put_bytes(key, data)
        return True

    @abstractmethod
    def copy(self, source: str, key: str, size: int) -> None:
        """Make `key` a copy of the object `source` (`size` bytes) of this bucket, on the store where it can
        (S3's CopyObject), so the bytes never travel through this machine."""

    @abstractmethod
    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with `prefix` (recursively)."""

    @abstractmethod
    def delete(self, keys: list[str]) -> None: ...

    def head(self, key: str) -> ObjectInfo | None:
        return next((o for o in self.list(key) if o.key == key), None)

    def lance_location(self, key: str) -> tuple[str, dict[str, str]] | None:
        """(URI, storage_options) for Lance to read `key` in place, or None: download it first."""
        return None

    def download(self, key: str, destination: Path) -> tuple[int, str]:
        """Copy the object to `destination` (written beside it, then renamed); (size, sha256).

        Raises MissingObjectError when the object is missing. Stores wrap this in their retries.
        """

        stream = self._open_stream(key)
        if stream is None:
            raise MissingObjectError(f"{self.url(key)}: object is missing")
        return save_stream(stream, destination)

    @abstractmethod
    def get_range(self, key: str, start: int, stop: int, etag: str = "") -> bytes:
        """Bytes [start, stop) of the object (fewer past its end): a part reads only its range of a large input.
        `etag` (the version the caller identified): stores with conditional reads (S3's If-Match) refuse another
        version with ObjectChangedError; elsewhere the caller compares `head` after reading. MissingObjectError
        when the object is missing."""

    def describe(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "bucket": self.bucket}


class ObjectChangedError(StorageError):
    """A conditional read found another version of the object than the one asked for."""


#: errors of the local disk (full, over quota, a file size limit, read-only, refused), not of the store
LOCAL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES)


class LocalWriteError(StableDatasetsError, OSError):
    """The local copy of an object could not be written: the store is not at fault (stores let it through)."""


def save_stream(stream: BinaryIO, destination: Path) -> tuple[int, str]:
    """Write `stream` to `destination` (beside it, then renamed); (size, sha256)."""
    temporary = destination.parent / f".{destination.name}.{uuid.uuid4().hex[:8]}.part"
    digest, size = hashlib.sha256(), 0
    try:
        with local_writes():
            destination.parent.mkdir(parents=True, exist_ok=True)
            out = open(temporary, "wb")  # noqa: SIM115  (closed by the `with` below; its open errors are local)
        with stream, out:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
                with local_writes():
                    out.write(chunk)
                size += len(chunk)
            with local_writes():
                out.flush()
        with local_writes():
            os.replace(temporary, destination)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return size, digest.hexdigest()


@contextlib.contextmanager
def local_writes() -> Iterator[None]:
    """An OSError of the local disk inside becomes a LocalWriteError (same errno and text)."""
    try:
        yield
    except LocalWriteError:
        raise
    except OSError as exc:
        if exc.errno not in LOCAL_ERRNOS:
            raise
        raise LocalWriteError(exc.errno, exc.strerror, exc.filename) from exc
