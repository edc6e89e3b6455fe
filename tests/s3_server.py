"""An S3-compatible server on 127.0.0.1 (moto in server mode) for object-storage tests.

`moto_endpoint` starts one server per test process; `s3_env` points the AWS variables and
the cache at a fresh bucket on it, with a local shard cache under the test's tmp_path.
tests/conftest.py imports both fixtures, so every test module can ask for them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server_module = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


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
