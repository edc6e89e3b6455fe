"""Any other fsspec filesystem (`gs://` through gcsfs, `az://` through adlfs, `memory://` ...).

Conditional create uses fsspec's exclusive mode (`"xb"`) where the filesystem implements it;
where it does not, the check-then-write fallback is logged: the lease still keeps builders
apart, but two builders racing past an expired lease could both publish (the last one wins,
whole). Lance datasets on these stores are downloaded into the local shard cache.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from loguru import logger

from stable_datasets.errors import ConfigurationError, MissingObjectError, StorageError
from stable_datasets.storage.retry import with_retries
from stable_datasets.storage.store import LocalWriteError, ObjectInfo, ObjectStore

T = TypeVar("T")
#: seconds the bucket check may take in all, on filesystems that retry by themselves (gcsfs: 6 tries over ~1 min)
CHECK_TIMEOUT = 20.0


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, (TimeoutError, ConnectionError)) and not isinstance(exc, FileNotFoundError)


def _bounded(make: Callable[[], T], url: str) -> T:
    """`make()` within CHECK_TIMEOUT: setting up a filesystem may look for credentials (gcsfs asks the cloud's
    metadata server, retrying for 10 s and more where nothing answers), which must not add to the bucket check."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append((True, make()))
        except BaseException as exc:  # handed to the caller's thread
            result.append((False, exc))

    worker = threading.Thread(target=run, name=f"set up {url}", daemon=True)
    worker.start()
    worker.join(CHECK_TIMEOUT)
    if not result:
        raise StorageError(f"{url}: cannot set up the filesystem within {CHECK_TIMEOUT:g} s (looking for credentials "
                           "or the endpoint); pass them in storage_options (e.g. token= for gcsfs, or set "
                           "GOOGLE_APPLICATION_CREDENTIALS), or check the network")
    ok, value = result[0]
    if not ok:
        raise value
    return value


class FsspecStore(ObjectStore):
    def __init__(self, scheme: str, bucket: str, storage_options: dict[str, Any] | None = None,
                 url: str | None = None):
        url = url or f"{scheme}://{bucket}"
        try:
            import fsspec
        except ImportError:
            raise ConfigurationError(f"{url}: {scheme}:// cache roots need fsspec: pip install fsspec") from None
        if scheme not in fsspec.available_protocols():
            raise ConfigurationError(f"{url}: unsupported scheme {scheme!r}; use s3://, gs://, az:// (or another "
                                     "fsspec protocol, with its package installed) or a local folder")
        self._started = time.monotonic()  # setting up and the first check share CHECK_TIMEOUT
        try:
            self.fs = _bounded(lambda: fsspec.filesystem(scheme, **(storage_options or {})), url)
        except ImportError as exc:
            raise ConfigurationError(f"{url}: the {scheme}:// filesystem needs a package that is not installed "
                                     f"({exc}); e.g. pip install gcsfs for gs://, adlfs for az://") from None
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"{url}: cannot set up the {scheme}:// filesystem ({exc}); check "
                                     "storage_options") from None
        self.scheme, self.bucket = scheme, bucket
        self.storage_options = dict(storage_options or {})
        self._exclusive = True

    def _path(self, key: str) -> str:
        return f"{self.bucket}/{key}" if key else self.bucket

    def _call(self, what: str, key: str, call: Callable[[], T]) -> T:
        try:
            return with_retries(call, _is_transient, f"{what} {self.url(key)}")
        except (StorageError, LocalWriteError):
            raise
        except PermissionError as exc:
            raise StorageError(f"{self.url(key)}: access denied ({exc}); check the credentials in storage_options "
                               "or the environment") from None
        except Exception as exc:
            raise StorageError(f"{self.url(key)}: {what} failed ({type(exc).__name__}: {exc})") from None

    def check(self) -> None:
        def exists() -> bool:
            if not getattr(self.fs, "async_impl", False):
                return self.fs.exists(self._path(""))
            from fsspec.exceptions import FSTimeoutError

            left = max(CHECK_TIMEOUT - (time.monotonic() - self._started), 1.0)  # what setting up left of it
            try:  # fsspec's sync wrapper takes `timeout`: the whole call, the filesystem's own retries included
                return self.fs.exists(self._path(""), timeout=left)
            except FSTimeoutError:
                raise StorageError(f"{self.url('')}: cannot reach the store (no answer within {CHECK_TIMEOUT:g} s); "
                                   "check its endpoint (storage_options, or STORAGE_EMULATOR_HOST for gcsfs), the "
                                   "credentials and the network") from None

        if not self._call("check", "", exists) and self.scheme != "memory":
            raise StorageError(f"{self.url('')}: bucket {self.bucket!r} does not exist; create it or fix the URL")

    def _open_stream(self, key: str) -> BinaryIO | None:
        try:
            return self.fs.open(self._path(key), "rb")
        except FileNotFoundError:
            return None

    def get(self, key: str) -> bytes | None:
        def fetch() -> bytes | None:
            try:
                return self.fs.cat_file(self._path(key))
            except FileNotFoundError:
                return None

        return self._call("read", key, fetch)

    def download(self, key: str, destination: Path) -> tuple[int, str]:
        return self._call("download", key, lambda: ObjectStore.download(self, key, destination))

    def get_range(self, key: str, start: int, stop: int, etag: str = "") -> bytes:
        """`cat_file(start, end)`: the filesystem's ranged read (no conditional read: the caller checks `head`)."""

        def fetch() -> bytes:
            try:
                return self.fs.cat_file(self._path(key), start=start, end=stop)
            except FileNotFoundError:
                raise MissingObjectError(f"{self.url(key)}: object is missing") from None

        return self._call("read", key, fetch)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call("write", key, lambda: self.fs.pipe_file(self._path(key), data))

    def put_file(self, path: Path, key: str) -> None:
        self._call("upload", key, lambda: self.fs.put_file(str(path), self._path(key)))

    def copy(self, source: str, key: str, size: int) -> None:
        """The filesystem's own copy (server-side on gcsfs, s3fs, adlfs)."""
        self._call("copy", key, lambda: self.fs.copy(self._path(source), self._path(key)))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        def put() -> bool:
            if self._exclusive:
                try:
                    with self.fs.open(self._path(key), "xb") as fh:
                        fh.write(data)
                    return True
                except FileExistsError:
                    return False
                except (ValueError, NotImplementedError, TypeError):
                    self._exclusive = False
                    logger.warning("{} has no exclusive create; publishing checks, then writes", self.url(""))
            if self.fs.exists(self._path(key)):
                return False
            self.fs.pipe_file(self._path(key), data)
            return True

        return self._call("conditional write", key, put)

    def list(self, prefix: str) -> list[ObjectInfo]:
        def listing() -> list[ObjectInfo]:
            base = self._path(prefix.rsplit("/", 1)[0] if "/" in prefix else "")
            try:
                found = self.fs.find(base, detail=True)
            except FileNotFoundError:
                return []
            out = []
            for path, info in found.items():
                key = path.lstrip("/").removeprefix(f"{self.bucket}/")
                if key.startswith(prefix) and info.get("type", "file") == "file":
                    modified = info.get("mtime") or info.get("created") or info.get("LastModified") or 0
                    stamp = modified.timestamp() if hasattr(modified, "timestamp") else float(modified or 0)
                    out.append(ObjectInfo(key, int(info.get("size") or 0), stamp))
            return sorted(out, key=lambda o: o.key)

        return self._call("list", prefix, listing)

    def delete(self, keys: list[str]) -> None:
        if keys:
            self._call("delete", keys[0], lambda: self.fs.rm([self._path(k) for k in keys]))
