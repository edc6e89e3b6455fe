"""Object-store URLs: `scheme://bucket/key`. A cache root is local unless it is one of these.

Anything with a scheme is a URL, never a local folder: `s3://b/x` must not become a folder
named `s3:`. A URL that went through `pathlib.Path` (`s3:/b/x`, one slash lost) is refused
with a message saying so, for the same reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from stable_datasets.errors import ConfigurationError

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+)://(?P<rest>.*)$")
_MANGLED = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/(?!/)")


def is_url(location: str | os.PathLike | None) -> bool:
    """True for `scheme://...` other than `file://` (a local path spelled as a URL)."""
    if not isinstance(location, str):
        return False
    match = _URL.match(location)
    return bool(match) and match.group("scheme").lower() != "file"


def local_path_text(location: str | os.PathLike) -> str:
    """A local location as text: `file://` stripped; a URL mangled by `pathlib.Path` refused."""
    text = os.fspath(location)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    match = _URL.match(text)
    if match and match.group("scheme").lower() == "file":
        return match.group("rest") or "/"
    mangled = _MANGLED.match(text)
    if mangled and mangled.group("scheme").lower() in KNOWN_SCHEMES:
        raise ConfigurationError(
            f"cache location {text!r} looks like a {mangled.group('scheme')}:// URL that lost a slash (a "
            "pathlib.Path turns 's3://bucket' into 's3:/bucket'); pass the URL as a string")
    return text


#: schemes we name in errors about mangled URLs (any fsspec protocol works as a URL)
KNOWN_SCHEMES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "hf", "http", "https", "memory", "oss", "r2"}


@dataclass(frozen=True)
class ObjectURL:
    """`scheme://bucket/key`; `key` has no leading or trailing slash ("" for the bucket itself)."""

    scheme: str
    bucket: str
    key: str

    @classmethod
    def parse(cls, url: str) -> ObjectURL:
        match = _URL.match(url)
        if not match:
            raise ConfigurationError(f"{url!r} is not an object-store URL (expected scheme://bucket/prefix)")
        scheme, rest = match.group("scheme").lower(), match.group("rest")
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ConfigurationError(f"{url!r} names no bucket (expected {scheme}://bucket/prefix)")
        parts = [p for p in key.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ConfigurationError(f"{url!r}: '.' and '..' are not allowed in an object-store prefix")
        return cls(scheme, bucket, "/".join(parts))

    def child(self, *names: str) -> ObjectURL:
        parts = [self.key] if self.key else []
        parts += [n.strip("/") for n in names if n.strip("/")]
        return ObjectURL(self.scheme, self.bucket, "/".join(parts))

    def relative_to(self, other: ObjectURL) -> str:
        if (self.scheme, self.bucket) != (other.scheme, other.bucket):
            raise ValueError(f"{self} is not under {other}")
        if not other.key:
            return self.key
        if self.key != other.key and not self.key.startswith(other.key + "/"):
            raise ValueError(f"{self} is not under {other}")
        return self.key[len(other.key):].lstrip("/")

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}" if self.key else f"{self.scheme}://{self.bucket}"
