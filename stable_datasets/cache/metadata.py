"""`_metadata.json`: everything needed to open, check and describe a published cache."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from stable_datasets.cache.builds import BuildPin, pin_current
from stable_datasets.cache.publish import file_sha256
from stable_datasets.cache.shard_list import (
    SHARD_LIST_FORMAT,
    ShardList,
    ShardListProblem,
    ShardListRef,
    shard_bytes,
    shard_rows,
    write_shard_list,
)
from stable_datasets.env import shard_list_file_above
from stable_datasets.errors import CacheError, StableDatasetsError

METADATA_FILE = "_metadata.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ATTEMPT = re.compile(r"attempts/[0-9a-f]{8,64}")
# field -> JSON type every _metadata.json must (required) or may hold
_REQUIRED = {"layout": str, "features": dict, "num_rows": int, "shards": (list, dict)}
_OPTIONAL = {"fingerprint": str, "fingerprint_inputs": dict, "builder_name": str, "builder_source": str,
             "config_name": str, "version": str,
             "split": str, "layout_options": dict, "info": dict, "extra": dict, "extra_files": list,
             "cache_format_version": int, "library_version": str, "created_at": str, "attempt": str,
             "made_by": dict}
_JSON_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "a list",
               (list, dict): "a list or an object naming its shard-list file"}
#: the newest cache format this version reads: 3 lists the shards of a cache of many shards in `_shards.arrow`
#: (cache.shard_list); caches of fewer shards are still written as format 2, byte for byte as before
READABLE_FORMAT = SHARD_LIST_FORMAT

# How a `_metadata.json` is checked against its layout and features (`check`), and how the metadata of a cache
# written by another program is read (`foreign`), are the caller's to pass: cache/ sits below layouts/ and
# features/ and never imports them. `stable_datasets.layouts.checked` reads with both (every reader that opens
# a cache); without them a read checks the JSON's shape only (what listing files needs).
#: check(metadata): what in it contradicts its layout or features, else None
LayoutCheck = Callable[["CacheMetadata"], "str | None"]
#: foreign(folder, data): the metadata of a cache another program wrote, or None when `data` is ours
ForeignReader = Callable[[Path, Any], "CacheMetadata | None"]


class MetadataProblem(StableDatasetsError, ValueError):
    """What is wrong in a `_metadata.json` (CacheMetadata.read adds the file's path)."""


def _require_count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MetadataProblem(f"{where} must be a non-negative integer, got {value!r:.80}")
    return value


@dataclass
class ShardInfo:
    path: str  # relative to the cache directory
    num_rows: int
    num_bytes: int
    sha256: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShardInfo:
        return cls(path=data["path"], num_rows=int(data["num_rows"]), num_bytes=int(data["num_bytes"]),
                   sha256=data["sha256"])

    @classmethod
    def checked(cls, data: Any, where: str, *, inside: bool) -> ShardInfo:
        """A shard entry from untrusted JSON; `inside`: its path must stay inside the cache directory."""
        if not isinstance(data, dict):
            raise MetadataProblem(f"{where} must be an object, got {type(data).__name__}")
        for key in ("path", "num_rows", "num_bytes", "sha256"):
            if key not in data:
                raise MetadataProblem(f"{where} has no {key!r}")
        path = data["path"]
        if not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path:
            raise MetadataProblem(f"{where}.path must be a relative file name, got {path!r}")
        if inside and ".." in path.split("/"):  # a str split: Path() costs more than the rest of the check
            raise MetadataProblem(f"{where}.path {path!r} leaves the cache directory")
        for key in ("num_rows", "num_bytes"):
            _require_count(data[key], f"{where}.{key}")
        if not (isinstance(data["sha256"], str) and _SHA256.fullmatch(data["sha256"])):
            raise MetadataProblem(f"{where}.sha256 must be 64 hex digits, got {data['sha256']!r:.80}")
        return cls.from_dict(data)

    @classmethod
    def checked_list(cls, entries: list[Any], name: str, *, inside: bool) -> list[ShardInfo]:
        """`checked` for every entry of a list, with a fast path for the well-formed ones (a million-shard
        `_metadata.json` is read by every process that opens the cache); an entry the fast path does not
        pass goes through `checked`, which names what is wrong with it."""
        out = []
        fullmatch = _SHA256.fullmatch
        for i, data in enumerate(entries):
            try:
                path, rows, size, sha = data["path"], data["num_rows"], data["num_bytes"], data["sha256"]
                fine = (type(data) is dict and type(path) is str and path and path[0] != "/" and "\x00" not in path
                        and not (inside and ".." in path and ".." in path.split("/"))
                        and type(rows) is int and rows >= 0 and type(size) is int and size >= 0
                        and type(sha) is str and fullmatch(sha) is not None)
            except (KeyError, TypeError, IndexError):
                fine = False
            out.append(cls(path, rows, size, sha) if fine else cls.checked(data, f"{name}[{i}]", inside=inside))
        return out

    def problem(self, directory: Path) -> str | None:
        """What is wrong with this file under `directory` (missing, wrong size, wrong sha256), else None."""
        path = directory / self.path
        if not path.is_file():
            return f"{path}: missing"
        size = path.stat().st_size
        if size != self.num_bytes:
            return f"{path}: {size} bytes, expected {self.num_bytes}"
        digest = file_sha256(path)
        if self.sha256 and digest != self.sha256:  # upstream caches record no checksums
            return f"{path}: sha256 {digest}, expected {self.sha256}"
        return None


@dataclass
class CacheMetadata:
    layout: str
    features: dict[str, Any]
    num_rows: int
    #: a list, or past STABLE_DATASETS_SHARD_LIST_FILE_ABOVE shards a ShardList over the mapped `_shards.arrow`
    #: (cache.shard_list): read it whole through `shard_rows()`/`shard_bytes()`, not a ShardInfo per shard
    shards: list[ShardInfo] | ShardList
    fingerprint: str = ""
    fingerprint_inputs: dict[str, Any] = field(default_factory=dict)
    builder_name: str = ""
    #: the builder's script path or module:qualname; "" in caches written before it was recorded
    builder_source: str = ""
    config_name: str = ""
    version: str = ""
    split: str = ""
    layout_options: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    #: other files the cache depends on, relative to its directory: path-stored videos in the shared
    #: media store, packing metadata beside packed shards. Checked on open and by verify like shards.
    extra_files: list[ShardInfo] = field(default_factory=list)
    cache_format_version: int = 1
    library_version: str = ""
    created_at: str = ""
    #: object-store caches only: the attempt prefix (`attempts/<id>`) the files are under, relative to the
    #: metadata's own prefix (see storage.publish); "" for a local cache, whose files are beside it
    attempt: str = ""
    #: what made the cache, for `stable-datasets ls` and `prune`: "kind" (builder, loader, in_memory, map,
    #: column_op), its inputs as given and resolved, the parent cache of a map, and "spec": what a newer
    #: cache must share to supersede this one (builder source, config, data-file spec; see manage.inventory).
    #: {} in caches written before it was recorded.
    made_by: dict[str, Any] = field(default_factory=dict)

    @property
    def num_bytes(self) -> int:
        if isinstance(self.shards, ShardList):
            return self.shards.ref.shard_bytes
        return sum(s.num_bytes for s in self.shards)

    def shard_rows(self) -> np.ndarray:
        """The rows of every shard in order, as int64: what a reader needs of all of them, without a ShardInfo
        each (mapped from `_shards.arrow` in a cache of many shards)."""
        return shard_rows(self.shards)

    def shard_bytes(self) -> np.ndarray:
        """The byte size of every shard file in order, as int64."""
        return shard_bytes(self.shards)

    def shard_path(self, index: int) -> str:
        """The path of shard `index`, relative to the cache folder (no ShardInfo made from `_shards.arrow`)."""
        if isinstance(self.shards, ShardList):
            return self.shards.name(index)
        return self.shards[index].path

    def shard_paths(self) -> list[str]:
        """The path of every shard, relative to the cache folder."""
        if isinstance(self.shards, ShardList):
            return self.shards.names()
        return [s.path for s in self.shards]

    @property
    def shard_list_file(self) -> ShardInfo | None:
        """The `_shards.arrow` this cache's shards are listed in (a file of the cache like its shards), or None."""
        if not isinstance(self.shards, ShardList):
            return None
        ref = self.shards.ref
        return ShardInfo(ref.file, 0, ref.file_bytes, ref.sha256)

    def attach_shard_list(self, directory: Path, check: LayoutCheck | None = None) -> None:
        """Read the shard list from `directory/_shards.arrow` (fetched there for a remote cache), checked now (by
        `check`, else by the check the metadata was read with)."""
        if check is not None:
            self._layout_check = check
        if isinstance(self.shards, ShardList):
            self.shards.attach(directory)
            self.shards.open()
            try:
                self._check_layout()  # e.g. the rows it lists against num_rows: a damaged count is found here
            except MetadataProblem as exc:
                raise CacheError(f"{self.shards.path}: damaged shard list: {exc}; the cache cannot be trusted "
                                 "(rebuild it with download_mode='force_rebuild')") from None

    def to_dict(self) -> dict[str, Any]:
        """The `_metadata.json` object (a deep copy); a cache of many shards names its shard-list file."""
        data = {f.name: None if f.name in ("shards", "extra_files") else copy.deepcopy(getattr(self, f.name))
                for f in dataclasses.fields(self)}
        data["extra_files"] = [dataclasses.asdict(s) for s in self.extra_files]
        self._put_shards(data)
        return data

    def _put_shards(self, data: dict[str, Any]) -> None:
        if isinstance(self.shards, ShardList):
            data["shards"] = self.shards.ref.to_json()
            data["cache_format_version"] = max(SHARD_LIST_FORMAT, self.cache_format_version)
        else:
            data["shards"] = [dataclasses.asdict(s) for s in self.shards]
        data["num_bytes"] = self.num_bytes
        if not self.attempt:
            del data["attempt"]

    def _fields_for_json(self) -> dict[str, Any]:
        """`to_dict` without its deep copy (2 ms for 67 columns' features), for serializing at once."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["extra_files"] = [dataclasses.asdict(s) for s in self.extra_files]
        self._put_shards(data)
        return data

    @classmethod
    def checked(cls, data: Any, check: LayoutCheck | None = None) -> CacheMetadata:
        """Metadata from untrusted JSON: types, shard entries, and with `check`, a known layout whose row counts
        agree.

        Raises MetadataProblem naming the field and what is wrong.
        """
        if not isinstance(data, dict):
            raise MetadataProblem(f"must hold a JSON object, got a {type(data).__name__}")
        for key, kind in {**_REQUIRED, **_OPTIONAL}.items():
            if key not in data:
                if key in _REQUIRED:
                    raise MetadataProblem(f"has no {key!r}")
                continue
            value = data[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise MetadataProblem(f"{key} must be {_JSON_NAMES[kind]}, got {type(value).__name__} {value!r:.80}")
        _require_count(data["num_rows"], "num_rows")
        if data.get("cache_format_version", 1) > READABLE_FORMAT:
            raise MetadataProblem(f"cache format {data['cache_format_version']} is newer than this version of "
                                  f"stable-datasets reads (up to {READABLE_FORMAT}): upgrade stable-datasets")
        if "attempt" in data and not _ATTEMPT.fullmatch(data["attempt"]):
            raise MetadataProblem(f"attempt must be 'attempts/<hex id>', got {data['attempt']!r:.80}")
        if isinstance(data["shards"], dict):
            try:
                shards: list[ShardInfo] | ShardList = ShardList(ShardListRef.from_json(data["shards"]), None,
                                                                ShardInfo)
            except ShardListProblem as exc:
                raise MetadataProblem(str(exc)) from None
        else:
            shards = ShardInfo.checked_list(data["shards"], "shards", inside=True)
        extra_files = ShardInfo.checked_list(data.get("extra_files", []), "extra_files", inside=False)
        metadata = cls.from_dict({**data, "shards": [], "extra_files": []})
        metadata.shards, metadata.extra_files = shards, extra_files
        metadata._layout_check = check
        if not isinstance(shards, ShardList):  # else checked once its file is read (attach_shard_list)
            metadata._check_layout()
        return metadata

    #: the layout check this metadata was read with (not a field: never written to `_metadata.json`)
    _layout_check: ClassVar[LayoutCheck | None] = None

    def _check_layout(self) -> None:
        if self._layout_check is None:
            return
        problem = self._layout_check(self)
        if problem:
            raise MetadataProblem(problem)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheMetadata:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        shards = data.get("shards", [])
        kwargs["shards"] = ShardList(ShardListRef.from_json(shards), None, ShardInfo) if isinstance(shards, dict) \
            else [ShardInfo.from_dict(s) for s in shards]
        kwargs["extra_files"] = [ShardInfo.from_dict(s) for s in data.get("extra_files", [])]
        return cls(**kwargs)

    def write(self, directory: Path, sync: bool = True) -> Path:
        """`sync=False` for a staging directory that `publish` fsyncs file by file anyway.

        Past `STABLE_DATASETS_SHARD_LIST_FILE_ABOVE` shards the shard list is written first, to
        `_shards.arrow` (cache.shard_list), and `_metadata.json`, written last, names it."""
        if isinstance(self.shards, ShardList) or len(self.shards) > shard_list_file_above():
            self.shards = ShardList(write_shard_list(directory, self.shards, sync=sync), Path(directory), ShardInfo)
            self.shards.open()  # mapped now: still read after the folder is renamed (a staging folder published)
        path = directory / METADATA_FILE
        with open(path, "w", encoding="utf-8") as fh:
            # keys in the order they were given: features keep their declared column order
            json.dump(self._fields_for_json(), fh, indent=2)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        return path

    @classmethod
    def read(cls, directory: str | os.PathLike, *, check: LayoutCheck | None = None,
             foreign: ForeignReader | None = None) -> CacheMetadata:
        """Read and validate `directory/_metadata.json`; a CacheError names the file and what is wrong."""
        path = Path(directory) / METADATA_FILE
        try:
            text = _read_untouched(path).decode("utf-8")
        except (FileNotFoundError, NotADirectoryError):
            raise CacheError(f"{directory}: not a stable-datasets cache (no {METADATA_FILE})") from None
        except UnicodeDecodeError as exc:
            raise CacheError(f"{path}: invalid cache metadata: not UTF-8 text ({exc})") from None
        except OSError as exc:
            raise CacheError(f"{path}: cannot read cache metadata ({exc})") from None
        return cls.parse(text, path, check=check, foreign=foreign)

    @classmethod
    def parse(cls, text: str, path: Path, *, attach: bool = True, check: LayoutCheck | None = None,
              foreign: ForeignReader | None = None) -> CacheMetadata:
        """Validate the text of `path` (see `checked`). Python's cyclic garbage collector is paused meanwhile:
        the objects made (a dict and a ShardInfo per shard) hold no cycles, and a million shards' worth of them
        set off its full collections over and over (3.7 s instead of 10 s at 1 M shards).

        A shard list in `_shards.arrow` is read from beside `path` and checked, unless `attach` is False (the
        metadata of an object-store cache, whose file is fetched first: `attach_shard_list`)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            metadata = cls._parse(text, path, check, foreign)
        finally:
            if collecting:
                gc.enable()
        if attach:
            metadata.attach_shard_list(Path(path).parent)
        return metadata

    @classmethod
    def _parse(cls, text: str, path: Path, check: LayoutCheck | None, foreign: ForeignReader | None
               ) -> CacheMetadata:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CacheError(f"{path}: invalid cache metadata: not JSON ({exc})") from None
        if foreign is not None and (theirs := foreign(path.parent, data)) is not None:
            return theirs  # e.g. the upstream stable-datasets': opened read-only
        try:
            return cls.checked(data, check)
        except MetadataProblem as exc:
            raise CacheError(f"{path}: invalid cache metadata: {exc}; the cache cannot be trusted (load_dataset "
                             "rebuilds it)") from None

    def check_shard_sizes(self, directory: Path) -> None:
        """Cheap integrity check on open: every shard and extra file exists with its recorded size.

        A cache of many shards (a ShardList) checks here its first and last shard and its extra files: a stat
        per shard would make every open grow with the shards again (5 s at 1 M shards); the layouts check a
        shard's size and rows when they first read it (see `shard_bytes`), and `verify` checks them all."""
        if isinstance(self.shards, ShardList):
            ends = sorted({0, len(self.shards) - 1}) if len(self.shards) else []
            sizes = self.shards.byte_counts()
            for i in ends:
                _check_size(directory / self.shards.name(i), int(sizes[i]))
        else:
            for shard in self.shards:
                _check_size(directory / shard.path, shard.num_bytes)
        for shard in self.extra_files:
            _check_size(directory / shard.path, shard.num_bytes)


def _check_size(path: Path, recorded: int) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CacheError(f"{path}: shard listed in {METADATA_FILE} is missing") from None
    if size != recorded:
        raise CacheError(f"{path}: shard is {size} bytes but {METADATA_FILE} records {recorded}; the cache is "
                         "truncated or corrupt (rebuild it with download_mode='force_rebuild')")


def _read_untouched(path: Path) -> bytes:
    """The file's bytes, read without updating its access time where the system lets us (O_NOATIME, for the
    file's owner): listing caches is no use of them (see cache.builds: readers mark the time they open)."""
    flags = os.O_RDONLY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | getattr(os, "O_NOATIME", 0))
    except PermissionError:
        fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_published(directory: str | os.PathLike, *, check: LayoutCheck | None = None,
                   foreign: ForeignReader | None = None) -> tuple[BuildPin, CacheMetadata]:
    """Pin the build `directory` points to (see cache.builds) and return its checked metadata.

    The metadata is valid (see `CacheMetadata.checked`) and every file it lists has its recorded
    size. The caller releases the pin (or hands the build to a backend, which pins it itself).
    """
    pin = pin_current(Path(directory))
    try:
        metadata = CacheMetadata.parse(pin.read_text(), pin.directory / METADATA_FILE, check=check, foreign=foreign)
        metadata.check_shard_sizes(pin.directory)
    except BaseException:
        pin.release()
        raise
    return pin, metadata
