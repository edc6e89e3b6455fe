"""Opening and reusing remote caches on a real S3 endpoint (moto)."""

from __future__ import annotations

import pytest
from loguru import logger

import stable_datasets as sds

from ..rows import remote_split_prefix, rows_of

pytestmark = pytest.mark.timeout(120)


def test_a_published_cache_whose_objects_are_missing_is_rebuilt_saying_why(s3_env, toy_builder, tmp_path,
                                                                           monkeypatch):
    ds = sds.load_dataset(str(toy_builder), split="train")
    before, attempt = rows_of(ds), ds.cache_metadata[0].attempt
    prefix = remote_split_prefix(s3_env, ds, "s3")
    shard = next(k for k in s3_env.objects(f"{prefix}/{attempt}/") if k.endswith(".arrow"))
    s3_env.delete(shard)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "other-node"))
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(str(m)), level="WARNING")
    logger.enable("stable_datasets")
    try:
        rebuilt = sds.load_dataset(str(toy_builder), split="train")
    finally:
        logger.disable("stable_datasets")
        logger.remove(sink)
    assert rebuilt.cache_metadata[0].attempt != attempt
    assert rows_of(rebuilt) == before
    assert any(f"rebuilding s3://{s3_env.bucket}/{prefix}: 1 of its objects are missing from the store (first: "
               f"s3://{s3_env.bucket}/{shard})" in m for m in messages), messages
