"""Where caches live: `<root>/<name>/<config>/<version>/<fingerprint>/<split>`.

Split and config names become folder names one-to-one (`split_folder_name`): letters,
digits and `_ - + .` stay as they are, every other character is percent-encoded as its
UTF-8 bytes (`%XX`), and so is a leading dot. Decoding is unambiguous, so two names never
share a folder, and no encoded name starts with a dot or holds an `@`: names of that shape
are the cache's own (staging, locks, media, per-build folders `<split>@<id>`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from stable_datasets.env import env_text
from stable_datasets.errors import CacheError, StableDatasetsError
from stable_datasets.urls import is_url, local_path_text

DEFAULT_CACHE_ROOT = Path("~/.cache/stable_datasets")
#: the split names a builder recorded in a fingerprint folder (hidden: no split folder name starts with a dot)
SPLITS_FILE = ".splits.json"
#: longest encoded folder name: leaves room under the usual 255-byte limit for our prefixes and suffixes
MAX_FOLDER_NAME = 200


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The local cache root: an explicit argument, else $STABLE_DATASETS_CACHE_DIR, else the default.

    An object-store URL is refused here, never taken as a folder named `s3:`: callers that can
    serve remote roots resolve them with `roots.resolve_root` first.
    """
    env = env_text("STABLE_DATASETS_CACHE_DIR")
    location = cache_dir if cache_dir is not None else env
    if is_url(location):
        source = "cache_dir" if cache_dir is not None else "STABLE_DATASETS_CACHE_DIR"
        raise StableDatasetsError(f"{source}={location!r} is an object-store URL, which this operation cannot use "
                                  "(it needs a local folder)")
    if location:  # absolute: an open dataset keeps reading its files after os.chdir, in workers too
        return Path(local_path_text(location)).expanduser().absolute()
    return DEFAULT_CACHE_ROOT.expanduser().absolute()


_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
_KEPT = "_-+."  # besides letters and digits: urllib.parse.quote keeps "_.-~", we keep "+" and escape "~"


def safe_name(name: str) -> str:
    """A path component that cannot escape its folder (for builder names and versions; not one-to-one)."""
    cleaned = _UNSAFE.sub("_", name).strip(".")
    return cleaned or "_"


def split_folder_name(name: str, what: str = "split") -> str:
    """The folder of a split (or config) name: one-to-one and reversible (see `folder_name_to_split`)."""
    if not isinstance(name, str):
        raise StableDatasetsError(f"{what} name must be a string, got {type(name).__name__} {name!r}")
    if not name:
        raise StableDatasetsError(f"{what} name must not be empty")
    if "\x00" in name:
        raise StableDatasetsError(f"{what} name {name!r} holds a NUL character, which no folder name can")
    try:
        encoded = urllib.parse.quote(name, safe="+", errors="strict").replace("~", "%7E")
    except UnicodeEncodeError as exc:
        raise StableDatasetsError(f"{what} name {name!r} is not valid Unicode text ({exc.reason} at "
                                  f"position {exc.start})") from None
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded.encode()) > MAX_FOLDER_NAME:
        raise StableDatasetsError(f"{what} name {name[:40]!r}... is too long to be a folder name: "
                                  f"{len(encoded)} characters once encoded, at most {MAX_FOLDER_NAME}")
    return encoded


def folder_name_to_split(folder: str) -> str:
    """The split (or config) name a folder was made from."""
    return urllib.parse.unquote(folder, errors="strict")


def fingerprint_dir(root: Path, name: str, config: str, version: str, fingerprint: str) -> Path:
    return root / safe_name(name) / split_folder_name(config, "config") / safe_name(version) / fingerprint


def downloads_dir(root: Path) -> Path:
    return root / "downloads"


_ROOT_ERRNOS = {errno.ENOTDIR, errno.EEXIST, errno.EROFS, errno.EACCES, errno.EPERM}


@contextlib.contextmanager
def root_errors(root: Path) -> Iterator[None]:
    """An OSError writing under the cache root `root` (a file where a folder must be, a read-only filesystem,
    another user's files) becomes one CacheError naming the root, the path and what to do."""
    try:
        yield
    except OSError as exc:
        name = getattr(exc, "filename", None)
        if exc.errno not in _ROOT_ERRNOS or not name or not _under(Path(os.fsdecode(name)), root):
            raise
        raise CacheError(_root_problem(root, Path(os.fsdecode(name)), exc)) from None


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _root_problem(root: Path, path: Path, exc: OSError) -> str:
    where = "STABLE_DATASETS_CACHE_DIR (or cache_dir=)"
    blocking = next((p for p in [path, *path.parents] if p.is_file()), None)
    if exc.errno in (errno.ENOTDIR, errno.EEXIST) and blocking is not None:
        return (f"the cache root {root} cannot hold caches: {blocking} is a file, not a folder; point {where} at a "
                "folder")
    if exc.errno == errno.EROFS:
        return (f"the cache root {root} is on a read-only filesystem (writing {path}); point {where} at a writable "
                "folder")
    owner = _owner(path)
    return (f"no permission to write {path} under the cache root {root}{owner}; ask for group write access to the "
            f"root (docs/shared-cache-on-a-cluster.md) or point {where} at a folder of yours")


def _owner(path: Path) -> str:
    for candidate in [path, *path.parents]:
        try:
            uid = candidate.stat().st_uid
        except OSError:
            continue
        try:
            import pwd

            return f" (owned by {pwd.getpwuid(uid).pw_name})"
        except (ImportError, KeyError):
            return f" (owned by uid {uid})"
    return ""
