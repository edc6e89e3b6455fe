"""S3Store's copy on the S3 server on 127.0.0.1: one CopyObject up to S3's 5 GB limit, a multipart copy
(UploadPartCopy, part by part, byte ranges covering the object once) above it. The limit and the part size are
lowered here (5 GB objects do not fit a test); the requests are read from the server's log."""

from __future__ import annotations

import hashlib

import pytest

from stable_datasets.storage import s3
from stable_datasets.storage.resolve import open_store
from stable_datasets.urls import ObjectURL

pytest.importorskip("boto3")

MIB = 1 << 20


def test_an_object_over_the_copy_limit_is_copied_part_by_part_with_ranges_that_cover_it(s3_env, s3_requests,
                                                                                         monkeypatch):
    monkeypatch.setattr(s3, "COPY_OBJECT_BYTES", 6 * MIB)
    monkeypatch.setattr(s3, "UPLOAD_PART_BYTES", 5 * MIB)  # S3's smallest part (but the last)
    data = bytes(range(256)) * (12 * MIB // 256) + b"tail"
    s3_env.write("parts/big.bin", data)
    store = open_store(ObjectURL.parse(s3_env.root))
    mark = s3_requests.mark()
    store.copy("parts/big.bin", "final/big.bin", len(data))
    copies = [r for r in s3_requests.since(mark) if r.kind in ("COPY", "PART_COPY")]
    ranges = sorted((r.copy_range for r in copies), key=lambda text: int(text[len("bytes="):].split("-")[0]))
    assert ranges == [f"bytes=0-{5 * MIB - 1}", f"bytes={5 * MIB}-{10 * MIB - 1}",
                                                    f"bytes={10 * MIB}-{len(data) - 1}"]
    assert {r.kind for r in copies} == {"PART_COPY"} and all(r.key == "final/big.bin" for r in copies)
    assert not [r for r in s3_requests.since(mark) if r.kind == "GET"]  # no byte came through this process
    assert hashlib.sha256(s3_env.read("final/big.bin")).digest() == hashlib.sha256(data).digest()


def test_an_object_up_to_the_copy_limit_is_one_copy_object(s3_env, s3_requests, monkeypatch):
    monkeypatch.setattr(s3, "COPY_OBJECT_BYTES", 6 * MIB)
    s3_env.write("parts/small.bin", b"x" * (6 * MIB))
    store = open_store(ObjectURL.parse(s3_env.root))
    mark = s3_requests.mark()
    store.copy("parts/small.bin", "final/small.bin", 6 * MIB)
    assert [(r.kind, r.key) for r in s3_requests.since(mark)] == [("COPY", "final/small.bin")]
    assert s3_env.read("final/small.bin") == b"x" * (6 * MIB)
