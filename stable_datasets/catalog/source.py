"""`DatasetSource` and `DownloadInfo`: where a catalog dataset comes from, in upstream stable-datasets' spelling.

A builder states its provenance once (homepage, citation, license) and the files it downloads, each with the
official URL first, mirrors after it, and the sha256 and size from a public record. `DownloadInfo.remote_file()`
is the `RemoteFile` the download manager fetches and checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from stable_datasets.download import RemoteFile

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class DownloadInfo:
    """One file: `url` first, then `fallbacks` in order; `checksum` as "sha256:<hex>" (upstream's spelling) or a
    bare sha256 hex; `filename` names the local copy; `size` in bytes."""

    url: str
    fallbacks: list[str] | tuple[str, ...] = field(default_factory=tuple)
    checksum: str | None = None
    filename: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url:
            raise TypeError("DownloadInfo.url must be a non-empty string")
        if isinstance(self.fallbacks, str) or not all(isinstance(u, str) and u for u in self.fallbacks):
            raise TypeError("DownloadInfo.fallbacks must be a list of non-empty URL strings")
        object.__setattr__(self, "fallbacks", tuple(self.fallbacks))
        if self.checksum is not None and self.sha256 is None:
            raise ValueError(f"DownloadInfo({self.url!r}): checksum must be 'sha256:<64 hex digits>' or the bare "
                             f"digest, got {self.checksum!r}")
        if self.size is not None and (not isinstance(self.size, int) or self.size < 0):
            raise ValueError(f"DownloadInfo({self.url!r}): size must be a whole number of bytes, got {self.size!r}")

    @property
    def sha256(self) -> str | None:
        """The expected sha256 hex digest, or None when the checksum is not one."""
        if self.checksum is None:
            return None
        digest = self.checksum.lower().removeprefix("sha256:")
        return digest if _SHA256.match(digest) else None

    def all_urls(self) -> list[str]:
        return [self.url, *self.fallbacks]

    def remote_file(self) -> RemoteFile:
        return RemoteFile(self.url, sha256=self.sha256, mirrors=tuple(self.fallbacks), filename=self.filename,
                          size=self.size)


@dataclass(frozen=True)
class DatasetSource(Mapping[str, Any]):
    """Provenance and downloads of one dataset; readable as a mapping too (`SOURCE["homepage"]`), as upstream's.

    `assets` maps a name (a split name, for the usual one-file-per-split datasets) to a URL or `DownloadInfo`.
    """

    homepage: str
    assets: Mapping[str, DownloadInfo | str]
    citation: str
    license: str = ""
    checksums: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.homepage, str) or not self.homepage:
            raise TypeError("DatasetSource.homepage must be a non-empty string")
        if not isinstance(self.citation, str) or not self.citation:
            raise TypeError("DatasetSource.citation must be a non-empty string")
        if not isinstance(self.assets, Mapping):
            raise TypeError("DatasetSource.assets must be a mapping of name -> URL or DownloadInfo")
        assets: dict[str, DownloadInfo] = {}
        for key, value in self.assets.items():
            if not isinstance(key, str) or not key:
                raise TypeError("DatasetSource asset names must be non-empty strings")
            if isinstance(value, str):
                value = DownloadInfo(value)
            if not isinstance(value, DownloadInfo):
                raise TypeError(f"DatasetSource.assets[{key!r}] must be a URL or a DownloadInfo, "
                                f"got {type(value).__name__}")
            checksum = (self.checksums or {}).get(key)
            if checksum and value.checksum is None:  # upstream's separate checksums mapping
                value = DownloadInfo(value.url, value.fallbacks, checksum, value.filename, value.size)
            assets[key] = value
        object.__setattr__(self, "assets", assets)

    def __getitem__(self, key: str) -> Any:
        if key not in _FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_FIELDS)

    def __len__(self) -> int:
        return len(_FIELDS)

    def remote_files(self) -> dict[str, RemoteFile]:
        """Every asset as the `RemoteFile` to download, by asset name."""
        return {name: info.remote_file() for name, info in self.assets.items()}  # type: ignore[union-attr]


_FIELDS = ("homepage", "assets", "citation", "license", "checksums")
