"""An S3-compatible server on 127.0.0.1 (moto in server mode) for object-storage tests.

`moto_endpoint` starts one server per test process; `s3_env` points the AWS variables and
the cache at a fresh bucket on it, with a local shard cache under the test's tmp_path.
`s3_requests` is the server's log of the requests it served (`RequestLog`): which process asked
what, told apart by the app id each client puts in its User-Agent ($AWS_SDK_UA_APP_ID;
`tag_this_process` sets it for the test process, not for Ray's worker nodes).
tests/conftest.py imports the fixtures, so every test module can ask for them.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest


@dataclass(frozen=True)
class Request:
    """One request the S3 server served."""

    kind: str  # LIST, GET, HEAD, PUT, COPY, PART (an uploaded part), PART_COPY (UploadPartCopy), DELETE, POST
    key: str  # bucket-relative ("" for a request on the bucket)
    app: str  # the client's app id ($AWS_SDK_UA_APP_ID), "" when it sent none
    sent: int  # bytes of the response body (what a GET downloaded)
    copy_range: str = ""  # UploadPartCopy's x-amz-copy-source-range ("bytes=0-5242879")


_APP = re.compile(r"\bapp/(\S+)")


class RequestLog:
    """WSGI middleware in front of the server: every request it served, in order."""

    def __init__(self, app: Any):
        self.app, self.requests, self.lock = app, [], threading.Lock()

    def __call__(self, environ: dict, start_response: Any) -> Any:
        method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
        key = unquote(environ.get("PATH_INFO", "")).lstrip("/").partition("/")[2]
        copying, part = "HTTP_X_AMZ_COPY_SOURCE" in environ, "partNumber=" in query
        kind = {"PUT": "PART_COPY" if copying and part else "COPY" if copying else "PART" if part else "PUT",
                "HEAD": "HEAD", "DELETE": "DELETE"}.get(method) or (
            "DELETE" if method == "POST" and "delete" in query else
            "LIST" if method == "GET" and (not key or "list-type" in query or "prefix=" in query) else method)
        found = _APP.search(environ.get("HTTP_USER_AGENT", ""))
        sent = []

        def started(status: str, headers: list, *args: Any) -> Any:
            sent.append(int(dict((k.lower(), v) for k, v in headers).get("content-length") or 0))
            return start_response(status, headers, *args)

        response = self.app(environ, started)
        with self.lock:
            self.requests.append(Request(kind, key, found.group(1) if found else "", sent[0] if sent else 0,
                                         environ.get("HTTP_X_AMZ_COPY_SOURCE_RANGE", "")))
        return response

    def mark(self) -> int:
        """A point in the log, for `since`."""
        with self.lock:
            return len(self.requests)

    def since(self, mark: int, app: str | None = None) -> list[Request]:
        """The requests after `mark` (of clients with app id `app`, when given)."""
        with self.lock:
            return [r for r in self.requests[mark:] if app is None or r.app == app]


_LOGS: dict[str, RequestLog] = {}


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server_module = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    _LOGS[endpoint] = server._server.app = RequestLog(server._server.app)  # werkzeug serves `.app` per request
    yield endpoint
    server.stop()
    _LOGS.pop(endpoint, None)


@pytest.fixture
def s3_requests(moto_endpoint: str) -> RequestLog:
    return _LOGS[moto_endpoint]


def tag_this_process(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    """Make this process's S3 clients send app id `app` (clients made before are dropped)."""
    from stable_datasets.storage.resolve import forget_stores

    monkeypatch.setenv("AWS_SDK_UA_APP_ID", app)
    forget_stores()


@dataclass
class S3Env:
    endpoint: str
    bucket: str
    local: Path  # $STABLE_DATASETS_LOCAL_CACHE_DIR

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/cache"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def objects(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        return self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def write(self, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=self.bucket, Key=key, Body=data)

    def delete(self, key: str) -> None:
        self.client().delete_object(Bucket=self.bucket, Key=key)


AWS_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION")


@pytest.fixture
def s3_env(moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Env]:
    from stable_datasets.storage.resolve import forget_stores

    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask 169.254.169.254 for credentials
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    env = S3Env(moto_endpoint, f"bucket-{uuid.uuid4().hex[:12]}", tmp_path / "local")
    env.client().create_bucket(Bucket=env.bucket)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(env.local))
    monkeypatch.setenv("STABLE_DATASETS_CACHE_DIR", env.root)
    forget_stores()
    yield env
    forget_stores()
