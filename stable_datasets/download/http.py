"""One attempt at fetching one URL into a partial file, resuming what is already there."""

from __future__ import annotations

import errno
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from stable_datasets.errors import StableDatasetsError
from stable_datasets.progress import progress
from stable_datasets.version import __version__

CHUNK = 1 << 20


class RetryableError(StableDatasetsError):
    """A failure worth retrying (connection reset, truncated body, 5xx, 429)."""


class FatalURLError(StableDatasetsError):
    """A failure of this URL that retrying will not fix (404, 403, bad scheme): try the next."""


VALIDATORS = ("ETag", "Last-Modified")


def validators(headers: Any) -> dict[str, str]:
    """The response headers that identify a version of a resource (ETag, Last-Modified)."""
    return {name: headers[name] for name in VALIDATORS if headers.get(name)}


def head(url: str, *, timeout: float = 30.0) -> dict[str, str]:
    """The validators and Content-Length of `url` from a HEAD request ({} when the server gives none)."""
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": f"stable-datasets/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            found = validators(response.headers)
            if found and response.headers.get("Content-Length"):
                found["Content-Length"] = response.headers["Content-Length"]
            return found
    except urllib.error.HTTPError as exc:
        if exc.code in (405, 501):  # HEAD not allowed: no validators to be had this way
            return {}
        raise FatalURLError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RetryableError(f"{url}: {getattr(exc, 'reason', exc)}") from None


def _unreachable(reason: object) -> bool:
    """A host name that does not resolve, or no route to the network at all."""
    return isinstance(reason, socket.gaierror) or (
        isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH))


def fetch(url: str, partial: Path, *, timeout: float = 60.0) -> dict[str, str]:
    """Append the rest of `url` to `partial` and return its validators; raise RetryableError or FatalURLError."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file" or parsed.scheme == "":
        source = Path(urllib.request.url2pathname(parsed.path) if parsed.scheme else url)
        if not source.is_file():
            raise FatalURLError(f"{url}: no such file")
        shutil.copyfile(source, partial)
        return {}
    if parsed.scheme not in ("http", "https"):
        raise FatalURLError(f"{url}: unsupported URL scheme {parsed.scheme!r}")

    have = partial.stat().st_size if partial.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": f"stable-datasets/{__version__}"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # our partial file is longer than the resource: start over
            partial.unlink()
            raise RetryableError(f"{url}: server refused range {have}- (HTTP 416); restarting") from None
        if exc.code == 429 or exc.code >= 500:
            raise RetryableError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        raise FatalURLError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if _unreachable(reason):  # offline, or no such host: retrying will not help, fail fast
            raise FatalURLError(f"{url}: cannot reach {parsed.hostname} ({reason}); no network, or no such "
                                "host (a mirror: STABLE_DATASETS_URL_REWRITES)") from None
        raise RetryableError(f"{url}: {reason}") from None

    with response:
        resumed = response.status == 206
        mode = "ab" if resumed else "wb"
        start = have if resumed else 0
        length = response.headers.get("Content-Length")
        expected = start + int(length) if length is not None else None
        received = start
        bar = progress(total=expected, initial=start, unit="B", unit_scale=True,
                       desc=f"download {Path(parsed.path).name}")
        try:
            with open(partial, mode) as out:
                while True:
                    try:
                        chunk = response.read(CHUNK)
                    except (OSError, urllib.error.URLError) as exc:
                        raise RetryableError(f"{url}: connection broke after {received} bytes ({exc})") from None
                    if not chunk:
                        break
                    out.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
        finally:
            bar.close()
    if expected is not None and received < expected:
        raise RetryableError(f"{url}: truncated response, got {received} of {expected} bytes")
    return validators(response.headers)
