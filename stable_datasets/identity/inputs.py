"""The identity of a builder's input files, for its fingerprint: what the files are, not what was typed.

`data_files` and `data_dir` are resolved to the files they name today (globs expanded, folders
walked, paths made absolute). Each local file enters by size and mtime (ns), or with
`input_identity="sha256"` by size and content hash (memoized per path/size/mtime/ctime/inode, so an
unchanged file is read once; touching it then does not rebuild). A remote file enters by the
ETag/Last-Modified its server reports to a HEAD request, else by the checksum of its download.
So adding, removing, editing or touching an input gives a new fingerprint, and nothing stale is
served; an unchanged input costs one `stat` per file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from stat import S_ISLNK
from typing import Any

from loguru import logger

from stable_datasets.cache.content_hashes import ContentHashes
from stable_datasets.cache.paths import cache_root as default_root
from stable_datasets.cache.paths import downloads_dir
from stable_datasets.download.http import FatalURLError, RetryableError, head
from stable_datasets.download.inputs import is_object_url, object_identity, options_for
from stable_datasets.download.manager import DownloadManager
from stable_datasets.errors import DownloadError

IDENTITY_MODES = ("stat", "sha256")
#: Splits with at most this many files list them in the recorded inputs (`stable-datasets info`).
LISTED_FILES = 32


def identity_of(config: Any, entries: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fingerprint's summary of `input_entries`."""
    if entries is None:
        return None
    identity: dict[str, Any] = {"mode": getattr(config, "input_identity", "stat")}
    if "data_files" in entries:
        identity["data_files"] = {split: _summary(found) for split, found in entries["data_files"].items()}
    if "data_dir" in entries:
        identity["data_dir"] = _summary(entries["data_dir"])
    return identity


def input_entries(config: Any, cache_root: Path, builder: str, resolve: Callable[[], dict[str, list[str]]],
                  input_options: dict[str, dict[str, Any]] | None = None, *, local_only: bool = False
                  ) -> dict[str, Any] | None:
    """Per-file identity entries ([path, size, mtime or "sha256:..." or validators]) of `config.data_files` and
    `config.data_dir` (None when the builder reads neither): {"data_files": {split: entries}, "data_dir":
    entries}. `resolve()` gives `config.data_files` resolved to files by split (the builder resolves them:
    builder.data_files), called only when there are data_files and the mode is valid; `input_options`: storage
    options of object-store URLs by scheme (download.inputs.options_for). With `local_only`, remote files are
    left out (`changed_input` re-checks what is on this disk)."""
    data_files = getattr(config, "data_files", None)
    data_dir = getattr(config, "data_dir", None)
    if not data_files and not data_dir:
        return None
    mode = getattr(config, "input_identity", "stat")
    if mode not in IDENTITY_MODES:
        raise ValueError(f"builder '{builder}': input_identity must be one of {IDENTITY_MODES}, got {mode!r}")
    found: dict[str, Any] = {}
    with ContentHashes(cache_root if mode == "sha256" else None) as hashes:
        if data_files:
            splits = resolve()
            found["data_files"] = {
                split: _files_identity([p for p in paths if not local_only or _is_local(p)], mode, hashes,
                                       cache_root, input_options)
                for split, paths in splits.items()}
        if data_dir:
            found["data_dir"] = _local_identities(_walk(os.path.abspath(os.fspath(data_dir)), builder), mode, hashes)
    return found


def _is_local(path: str) -> bool:
    return path.startswith("file://") or "://" not in path


def local_entries(entries: dict[str, Any] | None) -> dict[str, Any] | None:
    """`entries` without remote files (as `input_entries(..., local_only=True)` gives them)."""
    if entries is None:
        return None
    out = dict(entries)
    if "data_files" in entries:
        out["data_files"] = {split: [e for e in found if _is_local(e[0])]
                             for split, found in entries["data_files"].items()}
    return out


def object_store_versions(entries: dict[str, Any] | None) -> dict[str, list[Any]]:
    """{url: [size, version]} of the remote data files in `entries` that parts fetch on their own nodes: object-store
    URLs (`s3://`, `gs://`, ...) and `http(s)://` ones whose HEAD gave validators (ETag, Last-Modified): what the
    fingerprint identified, so the part that reads one on its own node refuses another version of it. (An http
    file without validators was identified by its download, on the driver: it is read from there.)"""
    found = (entries or {}).get("data_files", {})
    return {e[0]: list(e[1:]) for group in found.values() for e in group
            if is_object_url(e[0]) or (e[0].startswith(("http://", "https://")) and isinstance(e[2], dict))}


def changed_input(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    """What differs between two `input_entries(..., local_only=True)`: a line naming the first file that changed,
    appeared or went away, else None."""
    if before == after:
        return None
    groups = [(f"data_files[{split!r}]", entries, (after or {}).get("data_files", {}).get(split, []))
              for split, entries in (before or {}).get("data_files", {}).items()]
    if before and "data_dir" in before:
        groups.append(("data_dir", before["data_dir"], (after or {}).get("data_dir", [])))
    for where, old, new in groups:
        old_by_path, new_by_path = {e[0]: e for e in old}, {e[0]: e for e in new}
        for path, entry in old_by_path.items():
            if path not in new_by_path:
                return f"data file {path} was removed"
            if new_by_path[path] != entry:
                was, now = entry[1:], new_by_path[path][1:]
                return f"data file {path} changed (size and {'content' if 'sha256:' in str(was) else 'mtime'} " \
                       f"{was} -> {now})"
        added = sorted(set(new_by_path) - set(old_by_path))
        if added:
            return f"data file {added[0]} appeared in {where}"
    return "the data files changed"


def files_identity(paths: list[str | os.PathLike], *, mode: str = "stat", cache_root: Path | None = None,
                   ) -> dict[str, Any]:
    """The identity of files a builder reads from somewhere other than `data_files`/`data_dir`.

    Return it from `_fingerprint_extra()` (e.g. `{"labels_csv": files_identity([self.config.labels])}`)
    so that editing those files rebuilds too. `cache_root` holds the sha256 memo and downloads.
    """
    if mode not in IDENTITY_MODES:
        raise ValueError(f"mode must be one of {IDENTITY_MODES}, got {mode!r}")

    root = cache_root or default_root()
    with ContentHashes(root if mode == "sha256" else None) as hashes:
        return _summary(_files_identity([os.fspath(p) for p in paths], mode, hashes, root))


def _summary(entries: list[list[Any]]) -> dict[str, Any]:
    """Count, bytes and a digest of the per-file entries; the entries themselves when they are few."""
    text = json.dumps(entries, separators=(",", ":"), ensure_ascii=False)
    summary: dict[str, Any] = {"files": len(entries),
                               "bytes": sum(e[1] for e in entries if isinstance(e[1], int)),
                               "sha256": hashlib.sha256(text.encode()).hexdigest()}
    if len(entries) <= LISTED_FILES:
        summary["entries"] = entries
    return summary


def _files_identity(paths: list[str], mode: str, hashes: ContentHashes, cache_root: Path,
                    input_options: dict[str, dict[str, Any]] | None = None) -> list[list[Any]]:
    """One entry per path, in order; local files are stat'ed (and hashed) together."""
    entries: list[list[Any] | None] = []
    local: list[tuple[int, tuple[str, os.stat_result]]] = []
    real_folders: dict[str, str] = {}
    for path in paths:
        if path.startswith("file://"):
            path = path[len("file://"):]
        elif "://" in path:
            entries.append(_remote_identity(path, cache_root, input_options))
            continue
        absolute = path if os.path.isabs(path) else os.path.abspath(path)  # glob results of an absolute pattern
        try:
            real, stat = _real_file(absolute, real_folders)
        except FileNotFoundError:
            raise FileNotFoundError(f"data file {path} does not exist") from None
        local.append((len(entries), (real, stat)))
        entries.append(None)
    for (position, _), entry in zip(local, _local_identities([item for _, item in local], mode, hashes)):
        entries[position] = entry
    return entries  # type: ignore[return-value]


def _real_file(path: str, real_folders: dict[str, str]) -> tuple[str, os.stat_result]:
    """(the resolved path, its stat) of a file: a symlink (or a linked folder) swapped to another
    file with the same size and mtime is another input. One lstat per file, one realpath per folder."""
    stat = os.lstat(path)
    if S_ISLNK(stat.st_mode):
        real = os.path.realpath(path)
        return real, os.stat(real)
    folder = path.rpartition(os.sep)[0]
    real = real_folders.get(folder)
    if real is None:
        real = real_folders[folder] = os.path.realpath(folder)
    return (path if real == folder else real + path[len(folder):]), stat


def _local_identities(files: list[tuple[str, os.stat_result]], mode: str, hashes: ContentHashes) -> list[list[Any]]:
    if mode == "sha256":
        digests = hashes.sha256_many(files)
        return [[path, stat.st_size, "sha256:" + digest] for (path, stat), digest in zip(files, digests)]
    return [[path, stat.st_size, stat.st_mtime_ns] for path, stat in files]


def _walk(root: str, builder: str) -> list[tuple[str, os.stat_result]]:
    """Every non-hidden file under `root`, by its resolved path, in sorted order, with its stat; a
    folder reached again through a symlink is walked once."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"builder '{builder}': data_dir {root} is not a folder")
    found: list[tuple[str, os.stat_result]] = []
    stack = [os.path.realpath(root)]
    walked = set(stack)
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                path = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                if entry.is_dir():
                    if path not in walked:
                        walked.add(path)
                        stack.append(path)
                elif entry.is_file():
                    found.append((path, entry.stat()))
    found.sort(key=lambda item: item[0])
    return found


def _remote_identity(url: str, cache_root: Path, input_options: dict[str, dict[str, Any]] | None = None
                     ) -> list[Any]:
    if url.startswith(("http://", "https://")):
        manager = DownloadManager(downloads_dir(cache_root))
        try:
            headers = head(url)
        except (RetryableError, FatalURLError) as exc:
            record = manager.record(url)
            if isinstance(exc, FatalURLError) or not record:
                raise DownloadError(f"cannot identify data file {url}: {exc}") from None
            # offline: the validators recorded with the download we already have
            logger.warning("{} is unreachable ({}); identifying it by its downloaded copy", url, exc)
            validators = record.get("validators") or {}
            return [url, record.get("size"), validators] if validators else \
                [url, record.get("size"), "sha256:" + str(record.get("sha256"))]
        if "ETag" in headers or "Last-Modified" in headers:
            size = int(headers["Content-Length"]) if headers.get("Content-Length", "").isdigit() else None
            return [url, size, {k: v for k, v in headers.items() if k != "Content-Length"}]
        # No validators: the content itself, downloaded once into the shared downloads folder.
        local = Path(manager.download(url))
        with ContentHashes(cache_root) as hashes:
            return [url, local.stat().st_size, "sha256:" + hashes.sha256(str(local), local.stat())]

    # through the store client of cache roots: same credentials, retries, errors
    return object_identity(url, options_for(url, input_options))
