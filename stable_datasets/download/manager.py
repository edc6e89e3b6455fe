"""`DownloadManager`: fetch, verify and extract the files a builder needs, once.

Downloads land in `<cache root>/downloads`, named by a hash of the URL. Each file has its
own lock (never unlinked), is written to `<name>.incomplete` (resumed across attempts and
processes), checked against its sha256 and renamed into place atomically. Each URL is
retried with exponential backoff; then mirrors are tried in order.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from loguru import logger

from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.publish import discard, file_sha256, make_staging_dir
from stable_datasets.download.extract import extract_archive, iter_archive
from stable_datasets.download.http import VALIDATORS, FatalURLError, RetryableError, fetch, head
from stable_datasets.download.inputs import fetch_object, is_object_url, options_for
from stable_datasets.env import env_json_object
from stable_datasets.errors import ChecksumError, DownloadError

#: how many files one `download()` call fetches at once
PARALLEL_DOWNLOADS = 4


@dataclass(frozen=True)
class RemoteFile:
    """A file to download: its URL, expected sha256 and size in bytes, and mirrors to try after it."""

    url: str
    sha256: str | None = None
    mirrors: tuple[str, ...] = field(default_factory=tuple)
    filename: str | None = None
    size: int | None = None


def url_rewrites_from_env() -> dict[str, str]:
    """`STABLE_DATASETS_URL_REWRITES='{"https://a/": "http://mirror/"}'`: prefix substitutions."""
    mapping = env_json_object("STABLE_DATASETS_URL_REWRITES", '{"https://a/": "http://mirror/"}')
    return {str(k): str(v) for k, v in mapping.items()}


def validators_of(headers: dict[str, str]) -> dict[str, str]:
    """Only the ETag and Last-Modified of a response (not its length)."""
    return {k: v for k, v in headers.items() if k in VALIDATORS}


class DownloadManager:
    def __init__(self, download_dir: str | os.PathLike, *, force_download: bool = False,
                 verify_checksums: bool = True, max_retries: int = 4, backoff: float = 0.5,
                 timeout: float = 60.0, url_rewrites: dict[str, str] | None = None,
                 input_options: dict[str, dict[str, Any]] | None = None):
        self.download_dir = Path(download_dir)
        self.force_download = force_download
        self.verify_checksums = verify_checksums
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.url_rewrites = url_rewrites_from_env() if url_rewrites is None else url_rewrites
        #: storage options of object-store URLs by scheme (download.inputs.options_for); None: the environment's
        self.input_options = input_options
        self._done: set[Path] = set()  # files fetched in this session (force_download applies once)
        self.downloaded_files: list[Path] = []

    # -- structure helpers ---------------------------------------------------------------
    @staticmethod
    def _map(fn: Callable[[Any], Any], obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: DownloadManager._map(fn, v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(DownloadManager._map(fn, v) for v in obj)
        return fn(obj)

    def download(self, url_or_urls: Any) -> Any:
        """Download a URL, RemoteFile, or a dict/list of them; returns local paths in the same shape.

        Several files are fetched PARALLEL_DOWNLOADS at a time (each under its own lock, so two specs of one URL
        and other processes still fetch it once); the first failure is raised once the others have ended."""
        leaves: list[Any] = []
        self._map(leaves.append, url_or_urls)
        unique = list(dict.fromkeys(leaves))
        if len(unique) <= 1:
            return self._map(self._download_one, url_or_urls)
        with ThreadPoolExecutor(max_workers=min(PARALLEL_DOWNLOADS, len(unique))) as pool:
            futures = {spec: pool.submit(self._download_one, spec) for spec in unique}
            wait(futures.values())
        paths = {spec: future.result() for spec, future in futures.items()}
        return self._map(paths.__getitem__, url_or_urls)

    def extract(self, path_or_paths: Any) -> Any:
        return self._map(self._extract_one, path_or_paths)

    def download_and_extract(self, url_or_urls: Any) -> Any:
        return self.extract(self.download(url_or_urls))

    def iter_archive(self, path: str | os.PathLike) -> Iterator[tuple[str, IO[bytes]]]:
        return iter_archive(Path(path))

    # -- one file ------------------------------------------------------------------------
    def _rewrite(self, url: str) -> str:
        for prefix, replacement in self.url_rewrites.items():
            if url.startswith(prefix):
                return replacement + url[len(prefix):]
        return url

    def destination(self, spec: str | RemoteFile) -> Path:
        """Where the download of `spec` lives (named by a hash of its URL); its record sits beside it as .json."""
        remote = spec if isinstance(spec, RemoteFile) else RemoteFile(str(spec))
        name = remote.filename or Path(remote.url.split("?")[0]).name or "file"
        return self.download_dir / f"{hashlib.sha256(remote.url.encode()).hexdigest()[:16]}-{name}"

    def record(self, spec: str | RemoteFile) -> dict[str, Any] | None:
        """What was recorded when `spec` was downloaded (url, sha256, size, validators), or None."""
        dest = self.destination(spec)
        try:
            return json.loads(dest.with_name(dest.name + ".json").read_text()) if dest.is_file() else None
        except (OSError, ValueError):
            return None

    def _download_one(self, spec: str | RemoteFile) -> Path:
        remote = spec if isinstance(spec, RemoteFile) else RemoteFile(str(spec))
        if is_object_url(remote.url):  # s3://, gs://: a verified copy in the local inputs folder (download.inputs)
            path, digest = fetch_object(remote.url, options_for(remote.url, self.input_options))
            if remote.sha256 and self.verify_checksums and digest != remote.sha256.lower():
                raise ChecksumError(f"downloaded file has the wrong checksum:\n  {remote.url}: expected sha256 "
                                    f"{remote.sha256}, got {digest}")
            self.downloaded_files.append(path)
            return path
        dest = self.destination(remote)
        if self._usable(dest, remote):
            return dest
        self.download_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(dest.with_name(dest.name + ".lock")):
            if self._usable(dest, remote):  # another process finished it while we waited
                return dest
            self._fetch_any(remote, dest)
        self._done.add(dest)
        self.downloaded_files.append(dest)
        return dest

    def _usable(self, dest: Path, remote: RemoteFile) -> bool:
        if not dest.is_file() or (self.force_download and dest not in self._done):
            return False
        if remote.sha256 and self.verify_checksums:
            recorded = self._recorded_sha256(dest)
            if recorded != remote.sha256.lower():
                return False
        elif not remote.sha256:
            return self._still_current(dest, remote.url)
        return True

    def _still_current(self, dest: Path, url: str) -> bool:
        """A file downloaded without a known checksum is reused while the server's ETag/Last-Modified agree."""
        try:
            recorded = json.loads(dest.with_name(dest.name + ".json").read_text()).get("validators") or {}
        except (OSError, ValueError):
            return True
        if not recorded or not url.startswith(("http://", "https://")):
            return True
        try:
            current = validators_of(head(self._rewrite(url), timeout=self.timeout))
        except (RetryableError, FatalURLError) as exc:
            logger.warning("cannot check whether {} changed ({}); using the downloaded copy", url, exc)
            return True
        if current and current != recorded:
            logger.info("{} changed on the server ({} -> {}); downloading it again", url, recorded, current)
            return False
        return True

    @staticmethod
    def _recorded_sha256(dest: Path) -> str | None:
        try:
            return json.loads(dest.with_name(dest.name + ".json").read_text())["sha256"]
        except (OSError, ValueError, KeyError):
            return file_sha256(dest) if dest.is_file() else None

    def _fetch_any(self, remote: RemoteFile, dest: Path) -> None:
        partial = dest.with_name(dest.name + ".incomplete")
        if self.force_download and partial.exists():
            partial.unlink()
        failures: list[str] = []
        checksum_failures: list[str] = []
        for original in (remote.url, *remote.mirrors):
            url = self._rewrite(original)
            found = self._fetch_with_retries(url, partial, failures)
            if found is None:
                continue
            if remote.size is not None and self.verify_checksums and partial.stat().st_size != remote.size:
                got = partial.stat().st_size
                partial.unlink()
                checksum_failures.append(f"{url}: expected {remote.size} bytes, got {got}")
                logger.warning("size mismatch for {}: expected {} bytes, got {}", url, remote.size, got)
                continue
            digest = file_sha256(partial)
            if remote.sha256 and self.verify_checksums and digest != remote.sha256.lower():
                partial.unlink()
                checksum_failures.append(f"{url}: expected sha256 {remote.sha256}, got {digest}")
                logger.warning("checksum mismatch for {}: expected {}, got {}", url, remote.sha256, digest)
                continue
            os.replace(partial, dest)
            dest.with_name(dest.name + ".json").write_text(
                json.dumps({"url": url, "sha256": digest, "size": dest.stat().st_size, "validators": found}))
            return
        if checksum_failures and not failures:
            raise ChecksumError("downloaded file has the wrong checksum or size:\n  " + "\n  ".join(checksum_failures))
        raise DownloadError(f"could not download {remote.url}:\n  " + "\n  ".join(failures + checksum_failures))

    def _fetch_with_retries(self, url: str, partial: Path, failures: list[str]) -> dict[str, str] | None:
        """The response's validators once `partial` holds all of `url`; None when it failed (reason in failures)."""
        for attempt in range(self.max_retries + 1):
            try:
                return validators_of(fetch(url, partial, timeout=self.timeout))
            except FatalURLError as exc:
                failures.append(str(exc))
                if partial.exists():
                    partial.unlink()
                return None
            except RetryableError as exc:
                if attempt == self.max_retries:
                    failures.append(f"{exc} (gave up after {attempt + 1} attempts)")
                    return None
                delay = self.backoff * (2 ** attempt)
                logger.info("retrying {} in {:.1f}s: {}", url, delay, exc)
                time.sleep(delay)
        return None

    # -- extraction ----------------------------------------------------------------------
    def _extract_one(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        stat = path.stat()
        key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
        root = self.download_dir / "extracted"
        target = root / key
        marker = root / f"{key}.done"
        if marker.exists() and not self.force_download:
            return Path(marker.read_text())
        root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(root / f"{key}.lock"):
            if marker.exists() and not self.force_download:
                return Path(marker.read_text())
            staging = make_staging_dir(target)
            try:
                result = extract_archive(path, staging)
                if target.exists():
                    discard(target)
                os.rename(staging, target)
            except BaseException:
                discard(staging)
                raise
            final = target / result.relative_to(staging) if result != staging else target
            marker.write_text(str(final))
        return final
