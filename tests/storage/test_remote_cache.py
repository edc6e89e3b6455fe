"""Opening and reusing remote caches on a real S3 endpoint (moto)."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from tests.rows import remote_split_prefix, rows_of

pytestmark = pytest.mark.timeout(120)


def test_a_published_cache_whose_objects_are_missing_is_rebuilt_saying_why(s3_env, toy_builder, tmp_path,
                                                                           monkeypatch, warnings_logged):
    ds = sds.load_dataset(str(toy_builder), split="train")
    before, attempt = rows_of(ds), ds.cache_metadata[0].attempt
    prefix = remote_split_prefix(s3_env, ds, "s3")
    shard = next(k for k in s3_env.objects(f"{prefix}/{attempt}/") if k.endswith(".arrow"))
    s3_env.delete(shard)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "other-node"))
    rebuilt = sds.load_dataset(str(toy_builder), split="train")
    assert rebuilt.cache_metadata[0].attempt != attempt
    assert rows_of(rebuilt) == before
    assert any(f"rebuilding s3://{s3_env.bucket}/{prefix}: 1 of its objects are missing from the store (first: "
               f"s3://{s3_env.bucket}/{shard})" in m for m in warnings_logged), warnings_logged


def test_a_metadata_file_copied_from_another_cache_is_named_as_such(s3_env, toy_builder):
    """Before: 'shard listed in _metadata.json is missing from the store (deleted after it was published)'."""
    from stable_datasets.errors import CacheError

    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = remote_split_prefix(s3_env, ds, "s3")
    elsewhere = prefix.rsplit("/", 2)[0] + "/0123456789abcdef/train"
    s3_env.write(f"{elsewhere}/_metadata.json", s3_env.read(f"{prefix}/_metadata.json"))
    url = f"s3://{s3_env.bucket}/{elsewhere}"
    fingerprint = ds.cache_metadata[0].fingerprint
    with pytest.raises(CacheError, match=rf"^{url}/_metadata.json: describes another cache \(toy 'train', fingerprint "
                                         rf"{fingerprint}\) and its attempts/\w+ has no objects here: a _metadata.json "
                                         rf"copied from elsewhere; remove it \(stable-datasets rm {url}\) and build or "
                                         r"copy the whole cache$"):
        sds.open_cache(url)
    assert len(sds.open_cache(f"s3://{s3_env.bucket}/{prefix}")) == 50


def test_a_cache_of_many_shards_publishes_its_shard_list_file_and_opens_on_another_node(s3_env, tmp_path,
                                                                                         monkeypatch):
    """Past STABLE_DATASETS_SHARD_LIST_FILE_ABOVE shards the list is `_shards.arrow`: uploaded inside the attempt
    before `_metadata.json`, fetched (and checked) by a reader before the shards it names, and a dataset pickled
    to a machine without the folder fetches it there too."""
    import json
    import pickle
    import shutil

    from stable_datasets.errors import CacheError

    monkeypatch.setenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", "5")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"i": i, "text": f"row {i}"}) + "\n" for i in range(40)))
    ds = sds.load_dataset("json", data_files=str(data), split="train", layout_options={"max_shard_size": 1})
    metadata = ds.cache_metadata[0]
    assert len(metadata.shards) == 40
    prefix = remote_split_prefix(s3_env, ds, "s3")
    published = json.loads(s3_env.read(f"{prefix}/_metadata.json"))
    assert published["cache_format_version"] == 3 and published["shards"]["count"] == 40
    listed = f"{prefix}/{metadata.attempt}/_shards.arrow"
    assert listed in s3_env.objects(f"{prefix}/{metadata.attempt}/")
    assert len(s3_env.read(listed)) == published["shards"]["file_bytes"]
    expected = [{"i": i, "text": f"row {i}"} for i in range(40)]
    url = f"s3://{s3_env.bucket}/{prefix}"

    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "node-2"))
    other = sds.open_cache(url)
    assert rows_of(other) == expected
    blob = pickle.dumps(other)
    assert b"shard-00001" not in blob and len(blob) < 4000  # the list's name and checksum, not its 40 entries
    shutil.rmtree(tmp_path / "node-2")  # unpickled on a machine that has none of the files
    assert rows_of(pickle.loads(blob)) == expected
    assert (other.cache_dirs[0] / "_shards.arrow").is_file()
    stream = sds.load_dataset("json", data_files=str(data), split="train", layout_options={"max_shard_size": 1},
                              streaming=True)  # a shard file at a time, bounded by the list's row column
    assert sorted(row["i"] for row in stream) == list(range(40))

    damaged = bytearray(s3_env.read(listed))
    damaged[len(damaged) // 2] ^= 0xFF
    s3_env.write(listed, bytes(damaged))
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "node-3"))
    with pytest.raises(CacheError, match=rf"^s3://{s3_env.bucket}/{listed}: shard changed since it was published"):
        sds.open_cache(url)


def test_a_remote_build_leaves_no_local_build_folder_behind(s3_env, toy_builder):
    """The local build of an object-store publish is consumed by the publish: the pin its publish took (kept until
    an open, cache.builds.hold_until_opened) is dropped there, so the local folder goes, not at process exit."""
    from stable_datasets.storage.root import local_base

    ds = sds.load_dataset(str(toy_builder), split="train")
    assert len(ds) == 50
    left = sorted(p.name for p in local_base().rglob("train@*") if p.is_dir() and p.parent.name != "attempts")
    assert left == [], sorted(str(p) for p in local_base().rglob("train@*"))
