"""`stable-datasets view`: a read-only HTTP viewer of a local cache root (standard library only).

Routes (GET only):
    /                                  the list of caches (HTML)
    /caches/<id>                       one cache's rows, paged, and its column statistics (HTML)
    /api/caches                        [{"id", "name", "config", "split", "layout", "rows", "bytes", "status", ...}]
    /api/caches/<id>                   one of those objects
    /api/caches/<id>/rows?offset=&limit=   {"rows": [{"index", "cells", "view"?}], "columns", "offset", "total"}
    /api/caches/<id>/stats             {"rows", "sample_size", "sampled", "columns": {...}}
    /media/<id>/<row>/<column>[/<item>].png   a cell's picture: image thumbnail or video strip
Bad requests get a status (400, 404, 405) and one line saying what was wrong (JSON `{"error"}`
under /api and /media), never a traceback. Caches are named by id only: nothing in a URL is
joined to a path, so no request reaches a file outside the cache root, however it is encoded.
Paging reads only the rows asked for (a slice), so a 100M-row cache pages as fast as a small one.

A request is answered only when its `Host` header names an address the viewer serves (127.0.0.1,
localhost, [::1], or the `--host` it was started with; a wildcard address adds this machine's
names): a page of another site whose name rebinds to 127.0.0.1 (DNS rebinding) sends its own name
and gets 403. No CORS header is ever sent, so no other origin reads a response either.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from loguru import logger

from stable_datasets.dataset.summary import DEFAULT_SAMPLE_SIZE
from stable_datasets.dataset.thumbnails import image_thumbnail, video_strip
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.video import Video, VideoDecodeConfig
from stable_datasets.viewer import cells, pages
from stable_datasets.viewer.catalog import Catalog, UnknownCache
from stable_datasets.viewer.stats import StatsStore

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
ID_PATTERN = re.compile(r"[0-9a-f]{12}")
STRIP_DECODE = VideoDecodeConfig(num_frames=8, resize=96)


class RequestError(StableDatasetsError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _int_param(query: dict[str, list[str]], name: str, default: int) -> int:
    values = query.get(name)
    if not values:
        return default
    if len(values) > 1:
        raise RequestError(400, f"{name} is given {len(values)} times; give it once")
    text = values[0]
    if not re.fullmatch(r"[0-9]{1,18}", text):
        raise RequestError(400, f"{name} must be a non-negative integer, got {text!r}")
    return int(text)


class Viewer:
    """What the handler asks: the catalog, the stats store, and how each route answers."""

    def __init__(self, root: Path, sample_size: int = DEFAULT_SAMPLE_SIZE):
        self.catalog = Catalog(root)
        self.stats = StatsStore(self.catalog.root, sample_size)

    def listed(self, key: str) -> Any:
        if not ID_PATTERN.fullmatch(key):
            raise RequestError(404, f"no cache with id {key!r} (an id is 12 hex digits, as /api/caches lists them)")
        try:
            return self.catalog.get(key)
        except UnknownCache as exc:
            raise RequestError(404, str(exc)) from None

    def caches(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.catalog.caches()]

    def rows(self, key: str, query: dict[str, list[str]]) -> dict[str, Any]:
        listed = self.listed(key)
        offset = _int_param(query, "offset", 0)
        limit = _int_param(query, "limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise RequestError(400, f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        unknown = sorted(set(query) - {"offset", "limit"})
        if unknown:
            raise RequestError(400, f"unknown query parameter {unknown[0]!r} (rows takes offset and limit)")
        ds = self.catalog.dataset(key)
        total = len(ds)
        if offset >= total and not (offset == 0 and total == 0):
            raise RequestError(404, f"offset {offset} is past the end of cache {key} ({total:,} rows)")
        stop = min(offset + limit, total)
        features = ds.features
        columns = list(features)
        meta = listed.entry.metadata
        decode = cells.byte_decoder([meta.fingerprint_inputs, meta.extra]) if cells.is_pack(features) else None
        out = []
        for index in range(offset, stop):  # a row at a time: one decoded row in memory, a bad row marked alone
            row, failed = _decoded_row(ds, index, columns)
            item: dict[str, Any] = {"index": index, "cells": {
                c: failed[c] if c in failed else
                _cell(row[c], features[c], lambda k, c=c, index=index: cells.media_url(key, index, c, k))
                for c in columns}}
            view = None
            try:
                if failed:
                    view = None
                elif cells.is_pack(features):
                    view = cells.pack_view(row, decode)
                elif cells.is_document(features):
                    view = cells.document_view(row, lambda k, index=index: cells.media_url(key, index, "images", k))
            except Exception as exc:  # a damaged row's view is marked, the page stands
                view = cells.error_cell(exc)
            if view is not None:
                item["view"] = view
            out.append(item)
        return {"rows": out, "columns": columns, "offset": offset, "limit": limit, "total": total}

    def cache_stats(self, key: str) -> dict[str, Any]:
        listed = self.listed(key)
        meta = listed.entry.metadata
        return self.stats.stats(self.catalog.dataset(key), meta.fingerprint, meta.split, listed.entry.directory)

    def media(self, key: str, row_text: str, column: str, item_text: str | None) -> bytes:
        self.listed(key)
        ds = self.catalog.dataset(key)
        if not re.fullmatch(r"[0-9]{1,18}", row_text) or int(row_text) >= len(ds):
            raise RequestError(404, f"no row {row_text!r} in cache {key} ({len(ds):,} rows)")
        if column not in ds.features:
            raise RequestError(404, f"no column {column!r} in cache {key} (columns: {', '.join(ds.features)})")
        feature = ds.features[column]
        # the whole row, not select_columns: on a frame-window cache that changes the row count (a bug to fix there)
        one = ds.with_video_decode(STRIP_DECODE) if isinstance(feature, Video) else ds
        value = one[int(row_text)][column]
        if item_text is not None:
            if not isinstance(feature, Sequence) or not re.fullmatch(r"[0-9]{1,9}", item_text) or \
                    not isinstance(value, list) or int(item_text) >= len(value):
                raise RequestError(404, f"no item {item_text!r} in column {column!r} of row {row_text}")
            feature, value = feature.feature, value[int(item_text)]
        if value is None:
            raise RequestError(404, f"column {column!r} of row {row_text} is null")
        try:
            if isinstance(feature, Image):
                return image_thumbnail(value)
            if getattr(value, "ndim", 0) == 4:  # a window of frames (T, H, W, C)
                return video_strip(value)
        except ValueError as exc:
            raise RequestError(404, f"column {column!r} of row {row_text} has no picture: {exc}") from None
        raise RequestError(404, f"column {column!r} holds no images or videos")


def _decoded_row(ds: Any, index: int, columns: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Row `index` decoded, and the cells that could not be (an error cell each). When the row as a whole cannot be
    decoded, each cell is decoded alone from the row's stored values, so one damaged cell marks only itself."""
    try:
        return ds[index], {}
    except Exception as exc:  # the data, not the request
        logger.opt(exception=exc).debug("viewer: row {} cannot be decoded whole", index)
        whole_error = exc
    try:
        stored = ds.with_format("arrow")[index:index + 1]
    except Exception:  # nothing of the row can be read: every cell says why
        return {}, {c: cells.error_cell(whole_error) for c in columns}
    row: dict[str, Any] = {}
    failed: dict[str, dict[str, Any]] = {}
    for column in columns:
        try:
            decoded = ds.features[column].decode_array(stored.column(column).combine_chunks())
            row[column] = decoded[0]
        except Exception as exc:
            failed[column] = cells.error_cell(exc)
    return row, failed


def _cell(value: Any, feature: Any, url: Callable[[int | None], str]) -> dict[str, Any]:
    try:
        return cells.cell(value, feature, url)
    except Exception as exc:  # a value the cell cannot show is marked, the page stands
        return cells.error_cell(exc)


def _route(viewer: Viewer, path: str, query: dict[str, list[str]]) -> tuple[str, Any]:
    """(content kind, body) for a path; segments are split before they are decoded, so an encoded
    slash never makes a new segment."""
    parts = [unquote(p, errors="strict") for p in path.split("/")[1:]]
    if parts in ([""], []):
        return "html", pages.list_page(str(viewer.catalog.root))
    if len(parts) == 2 and parts[0] == "caches":
        viewer.listed(parts[1])
        return "html", pages.cache_page(parts[1])
    if parts[:2] == ["api", "caches"]:
        rest = parts[2:]
        if not rest or rest == [""]:
            return "json", viewer.caches()
        if len(rest) == 1:
            return "json", viewer.listed(rest[0]).to_dict()
        if len(rest) == 2 and rest[1] == "rows":
            return "json", viewer.rows(rest[0], query)
        if len(rest) == 2 and rest[1] == "stats":
            return "json", viewer.cache_stats(rest[0])
    if parts and parts[0] == "media" and len(parts) in (4, 5) and parts[-1].endswith(".png"):
        key, row = parts[1], parts[2]
        if len(parts) == 4:
            return "png", viewer.media(key, row, parts[3][:-4], None)
        return "png", viewer.media(key, row, parts[3], parts[4][:-4])
    raise RequestError(404, f"no such page: {path}")


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def allowed_hosts(host: str) -> set[str]:
    """The host names a viewer bound to `host` answers to (lower case, IPv6 without brackets): the loopback
    names, `host` itself, and, for a wildcard address (every interface), this machine's names and addresses."""
    allowed = {*LOOPBACK_HOSTS, host.strip("[]").lower()} - {""}
    if host in _WILDCARD_HOSTS:
        allowed -= {"0.0.0.0", "::"}
        names = {socket.gethostname(), socket.getfqdn()}
        with contextlib.suppress(OSError):
            names.update(socket.gethostbyname_ex(socket.gethostname())[2])
        allowed.update(n.lower() for n in names if n)
    return allowed


def host_name(header: str | None) -> str | None:
    """The host name of a `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`), lower case, no trailing dot."""
    if not header:
        return None
    text = header.strip().lower()
    if text.startswith("["):
        name, bracket, _rest = text[1:].partition("]")
        return name if bracket else None
    return text.rsplit(":", 1)[0].rstrip(".") if text.count(":") <= 1 else None


class Handler(BaseHTTPRequestHandler):
    viewer: Viewer  # set on the subclass `make_server` makes
    hosts: frozenset[str] = frozenset(LOOPBACK_HOSTS)  # set on the subclass `make_server` makes
    server_version = "stable-datasets-viewer"

    def _host_refused(self, is_api: bool) -> bool:
        """Answer 403 to a request whose Host is not an address this viewer serves (DNS rebinding)."""
        if host_name(self.headers.get("Host")) in self.hosts:
            return False
        loopback = [h for h in LOOPBACK_HOSTS if h in self.hosts]
        served = ", ".join(f"[{h}]" if ":" in h else h for h in [*loopback, *sorted(self.hosts - set(loopback))])
        self._error(403, f"the Host {self.headers.get('Host')!r} is not an address this viewer serves ({served}); "
                         "a page of another site (DNS rebinding) cannot read it", is_api)
        return True

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        is_api = url.path.startswith(("/api/", "/media/"))
        if self._host_refused(is_api):
            return
        try:
            query = parse_qs(url.query, keep_blank_values=True, strict_parsing=False)
            kind, body = _route(self.viewer, url.path, query)
        except RequestError as exc:
            self._error(exc.status, str(exc), is_api)
            return
        except UnicodeDecodeError:
            self._error(400, f"the path {url.path!r} is not valid UTF-8 once decoded", is_api)
            return
        except Exception as exc:  # the data, not the request: one line, no traceback page
            logger.opt(exception=exc).debug("viewer: {} failed", self.path)
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._error(500, f"{type(exc).__name__}: {line}", is_api)
            return
        if kind == "html":
            self._send(200, "text/html; charset=utf-8", body.encode())
        elif kind == "json":
            self._send(200, "application/json", json.dumps(body, default=str).encode())
        else:
            self._send(200, "image/png", body, cache=True)

    def _refuse(self) -> None:
        if self._host_refused(True):
            return
        self._error(405, f"{self.command} is not allowed: the viewer is read-only (GET only)", True)

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _error(self, status: int, message: str, as_json: bool) -> None:
        if as_json:
            self._send(status, "application/json", json.dumps({"error": message}).encode())
        else:
            self._send(status, "text/plain; charset=utf-8", (message + "\n").encode())

    def _send(self, status: int, content_type: str, body: bytes, cache: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("viewer: {}", format % args)


def make_server(root: Path, host: str = "127.0.0.1", port: int = 0,
                sample_size: int = DEFAULT_SAMPLE_SIZE) -> ThreadingHTTPServer:
    """A server for `root` bound to host:port (port 0: a free one); start it with `serve_forever()`."""
    handler = type("ViewerHandler", (Handler,), {"viewer": Viewer(root, sample_size),
                                                 "hosts": frozenset(allowed_hosts(host))})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def server_url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}"


def serve(root: Path, host: str = "127.0.0.1", port: int = 0, *,
          announce: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted (Ctrl-C); the URL is announced (printed) first."""
    server = make_server(root, host, port)
    (announce or (lambda line: print(line, flush=True)))(server_url(server))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def serve_in_thread(root: Path, host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """A server running on a background thread (for notebooks and tests); stop it with `shutdown()`."""
    server = make_server(root, host, port)
    threading.Thread(target=server.serve_forever, daemon=True, name="stable-datasets-viewer").start()
    return server, server_url(server)

