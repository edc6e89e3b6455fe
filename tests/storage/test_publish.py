"""Publishing to a real S3 endpoint (moto): nothing is committed that names objects no longer there."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError
from stable_datasets.storage.s3 import S3Store
from tests.rows import rows_of

pytestmark = pytest.mark.timeout(120)


def test_objects_removed_while_uploading_fail_the_build_and_publish_nothing(s3_env, toy_builder, monkeypatch):
    """As a prune on another node does to a builder that lost its lease: each object is deleted right after its
    upload. The commit would name deleted objects; the build fails saying so and leaves nothing behind."""
    original = S3Store.put_file

    def upload_then_lose(self, path, key):
        original(self, path, key)
        if key.endswith(".arrow"):
            self.delete([key])

    monkeypatch.setattr(S3Store, "put_file", upload_then_lose)
    with pytest.raises(CacheError, match=r"^s3://\S+/attempts/[0-9a-f]+/\S+\.arrow: uploaded object is gone before "
                                         r"_metadata.json was written \(1 of 1 missing; .*nothing was published: "
                                         r"run the build again$"):
        sds.load_dataset(str(toy_builder), split="train")
    left = s3_env.objects()
    assert not [k for k in left if k.endswith("/_metadata.json") or "/attempts/" in k], left
    monkeypatch.setattr(S3Store, "put_file", original)
    assert [r["text"] for r in rows_of(sds.load_dataset(str(toy_builder), split="train"))][:2] == ["row 0", "row 1"]
