"""`_metadata.json`: everything needed to open, check and describe a published cache."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stable_datasets.cache import upstream
from stable_datasets.cache.publish import file_sha256
from stable_datasets.errors import CacheError

METADATA_FILE = "_metadata.json"


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
    shards: list[ShardInfo]
    fingerprint: str = ""
    fingerprint_inputs: dict[str, Any] = field(default_factory=dict)
    builder_name: str = ""
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

    @property
    def num_bytes(self) -> int:
        return sum(s.num_bytes for s in self.shards)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["num_bytes"] = self.num_bytes
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheMetadata:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["shards"] = [ShardInfo.from_dict(s) for s in data.get("shards", [])]
        kwargs["extra_files"] = [ShardInfo.from_dict(s) for s in data.get("extra_files", [])]
        return cls(**kwargs)

    def write(self, directory: Path) -> Path:
        path = directory / METADATA_FILE
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        return path

    @classmethod
    def read(cls, directory: str | os.PathLike) -> CacheMetadata:
        path = Path(directory) / METADATA_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CacheError(f"{directory}: not a stable-datasets cache (no {METADATA_FILE})") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CacheError(f"{path}: unreadable cache metadata ({exc})") from None
        if upstream.is_upstream(data):  # a cache written by the upstream stable-datasets: opened read-only
            return upstream.upstream_metadata(Path(directory), data)
        try:
            return cls.from_dict(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise CacheError(f"{path}: unreadable cache metadata ({exc})") from None

    def check_shard_sizes(self, directory: Path) -> None:
        """Cheap integrity check on open: every shard and extra file exists with its recorded size."""
        for shard in [*self.shards, *self.extra_files]:
            path = directory / shard.path
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                raise CacheError(f"{path}: shard listed in {METADATA_FILE} is missing") from None
            if size != shard.num_bytes:
                raise CacheError(f"{path}: shard is {size} bytes but {METADATA_FILE} records "
                                 f"{shard.num_bytes}; the cache is truncated or corrupt (rebuild it with "
                                 "download_mode='force_rebuild')")
