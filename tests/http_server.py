"""A small HTTP server on 127.0.0.1 for download tests: ranges, truncation, errors, counts."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FileServer:
    """Serve `files[path] = bytes`. `truncate[path] = n` cuts the next n responses short;
    `fail[path] = n` answers the next n requests with HTTP 503. `validators[path]` are extra
    headers (ETag, Last-Modified) sent with GET and HEAD answers for that path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.truncate: Counter[str] = Counter()
        self.fail: Counter[str] = Counter()
        self.requests: list[tuple[str, str | None]] = []
        self.heads: list[str] = []
        self.validators: dict[str, dict[str, str]] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_HEAD(self):
                server.heads.append(self.path)
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404, "not found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                for name, value in server.validators.get(self.path, {}).items():
                    self.send_header(name, value)
                self.end_headers()

            def do_GET(self):
                path = self.path
                server.requests.append((path, self.headers.get("Range")))
                if server.fail[path] > 0:
                    server.fail[path] -= 1
                    self.send_error(503, "try later")
                    return
                data = server.files.get(path)
                if data is None:
                    self.send_error(404, "not found")
                    return
                start, end = 0, len(data)
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    first, _, last = rng[6:].partition("-")
                    start = int(first)
                    end = min(int(last) + 1, len(data)) if last else len(data)
                    if start >= len(data):
                        self.send_error(416, "range not satisfiable")
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:end]
                self.send_header("Content-Length", str(len(body)))
                for name, value in server.validators.get(path, {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if server.truncate[path] > 0:
                    server.truncate[path] -= 1
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def hits(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)
