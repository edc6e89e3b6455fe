"""A publish copies on the store the files whose bytes are there already (a Ray build's parts), instead of
uploading them again, checks each copy's size before the commit, and removes the attempts they came from once
published (storage.publish, storage.remote_cache), on the S3 server on 127.0.0.1."""

from __future__ import annotations

import shutil

import pytest

import stable_datasets as sds
from stable_datasets.cache.metadata import read_published
from stable_datasets.errors import CacheError
from stable_datasets.storage.publish import RemoteSplit, publish_attempt
from stable_datasets.storage.remote_cache import prepare_remote_split
from stable_datasets.storage.root import RemoteRoot

pytest.importorskip("boto3")

SPLIT = "cache/toy/default/1.0.0/fp/train"


def _saved(toy_builder, tmp_path):
    """A published local cache of several shards, its metadata and its rows."""
    ds = sds.load_dataset(str(toy_builder), split="train", cache_dir=str(tmp_path / "local-root"),
                          layout_options={"max_shard_size": 2048, "batch_rows": 8})
    pin, metadata = read_published(ds.cache_dirs[0])
    pin.release()
    assert len(metadata.shards) >= 2
    return ds.cache_dirs[0], metadata, ds.to_arrow()


def test_a_file_named_in_copies_is_copied_on_the_store_not_read_from_disk(s3_env, toy_builder, tmp_path):
    folder, metadata, rows = _saved(toy_builder, tmp_path)
    root = RemoteRoot.open(s3_env.root)
    split = RemoteSplit(root.store, root.key("toy/train"))
    first, second = metadata.shards[0], metadata.shards[1]
    s3_env.write("elsewhere/first.bin", (folder / first.path).read_bytes())
    (folder / first.path).unlink()  # only a copy on the store can publish it now
    published, won = publish_attempt(split, folder, metadata, "a1" * 16, copies={first.path: "elsewhere/first.bin"})
    assert won
    prefix = f"cache/toy/train/{published.attempt}"
    assert s3_env.read(f"{prefix}/{first.path}") == s3_env.read("elsewhere/first.bin")
    assert s3_env.read(f"{prefix}/{second.path}") == (folder / second.path).read_bytes()
    assert sds.open_cache(f"{s3_env.root}/toy/train").to_arrow().equals(rows)


def test_a_copy_of_another_size_is_refused_and_nothing_is_published(s3_env, toy_builder, tmp_path):
    folder, metadata, _ = _saved(toy_builder, tmp_path)
    root = RemoteRoot.open(s3_env.root)
    split = RemoteSplit(root.store, root.key("toy/train"))
    first = metadata.shards[0]
    s3_env.write("elsewhere/short.bin", b"not the shard")
    attempt = "b2" * 16
    with pytest.raises(CacheError, match=rf"s3://{s3_env.bucket}/cache/toy/train/attempts/{attempt}/{first.path}: "
                                         r"uploaded object is gone before _metadata.json was written \(1 of \d+ "
                                         r"missing"):
        publish_attempt(split, folder, metadata, attempt, copies={first.path: "elsewhere/short.bin"})
    assert not s3_env.objects("cache/toy/train/")  # the attempt is removed, no _metadata.json


def test_the_attempts_copied_from_are_removed_once_published(s3_env, toy_builder, tmp_path):
    saved, metadata, rows = _saved(toy_builder, tmp_path)
    root = RemoteRoot.open(s3_env.root)
    source = f"{root.key(SPLIT)}/attempts/partsid/parts/.part-00000/shard.arrow"
    s3_env.write(source, (saved / metadata.shards[0].path).read_bytes())
    s3_env.write(f"{root.key(SPLIT)}/attempts/partsid/parts/.part-00000/_part.json", b"{}")
    s3_env.write(f"{root.key(SPLIT)}/attempts/other/kept.bin", b"not ours")

    def build(local):
        shutil.copytree(saved, local)
        return {metadata.shards[0].path: source}

    url = prepare_remote_split(root, SPLIT, metadata.fingerprint, force=False, build=build)
    keys = s3_env.objects(f"cache/{SPLIT}/")
    assert not [k for k in keys if "/partsid/" in k]
    assert f"cache/{SPLIT}/attempts/other/kept.bin" in keys  # another attempt is prune's to judge
    assert sds.open_cache(url).to_arrow().equals(rows)


def test_a_gs_store_copies_with_the_filesystems_own_copy(gcs_env, toy_builder, tmp_path):
    folder, metadata, rows = _saved(toy_builder, tmp_path)
    root = RemoteRoot.open(gcs_env.root)
    split = RemoteSplit(root.store, root.key("toy/train"))
    first = metadata.shards[0]
    gcs_env.write("elsewhere/first.bin", (folder / first.path).read_bytes())
    (folder / first.path).unlink()
    published, won = publish_attempt(split, folder, metadata, "c3" * 16, copies={first.path: "elsewhere/first.bin"})
    assert won and gcs_env.read(f"cache/toy/train/{published.attempt}/{first.path}") == gcs_env.read(
        "elsewhere/first.bin")
    assert sds.open_cache(f"{gcs_env.root}/toy/train").to_arrow().equals(rows)


def test_a_build_whose_copied_files_were_never_on_this_disk_is_published_from_the_store(s3_env, toy_builder,
                                                                                        tmp_path):
    """A Ray build merged on the store hands back a folder without its data files: those named in the copies are
    copied on the store and never looked for on disk (nor kept in the local shard cache); the rows are whole."""
    saved, metadata, rows = _saved(toy_builder, tmp_path)
    root = RemoteRoot.open(s3_env.root)
    sources = {}
    for number, shard in enumerate(metadata.shards):
        sources[shard.path] = f"{root.key(SPLIT)}/attempts/partsid/parts/.part-{number:05d}/shard-00000.arrow"
        s3_env.write(sources[shard.path], (saved / shard.path).read_bytes())

    def build(local):
        shutil.copytree(saved, local)
        for shard in metadata.shards:
            (local / shard.path).unlink()  # the driver never downloaded them
        return sources

    url = prepare_remote_split(root, SPLIT, metadata.fingerprint, force=False, build=build)
    assert not [k for k in s3_env.objects(f"cache/{SPLIT}/") if "/partsid/" in k]
    assert not [p for p in s3_env.local.rglob("shard-*")]  # nothing of the data came to this disk
    assert sds.open_cache(url).to_arrow().equals(rows)


def test_a_built_file_missing_that_is_not_copied_fails_the_publish_naming_it(s3_env, toy_builder, tmp_path):
    saved, metadata, _ = _saved(toy_builder, tmp_path)
    root = RemoteRoot.open(s3_env.root)
    first, second = metadata.shards[0], metadata.shards[1]
    source = f"{root.key(SPLIT)}/attempts/partsid/parts/.part-00000/shard-00000.arrow"
    s3_env.write(source, (saved / first.path).read_bytes())

    def build(local):
        shutil.copytree(saved, local)
        (local / first.path).unlink()
        (local / second.path).unlink()  # lost, and not on the store either
        return {first.path: source}

    with pytest.raises(CacheError, match=rf"/{second.path}: built file is missing but _metadata.json records "
                                         rf"{second.num_bytes} bytes; nothing was published$"):
        prepare_remote_split(root, SPLIT, metadata.fingerprint, force=False, build=build)
    assert not [k for k in s3_env.objects(f"cache/{SPLIT}/") if k.endswith("_metadata.json")]
