"""Parts sent through the object store (write.remote_parts), on the S3 server on 127.0.0.1, without Ray: the
task side (write, upload, reuse) and the driver side (fetch what this disk lacks, remove once published)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.write.parts import PART_FILE, PartResult, part_dir
from stable_datasets.write.remote_parts import (
    RemoteParts,
    fetch_parts,
    remote_part_writer,
    remove_prefix,
)


@pytest.fixture
def remote(s3_env) -> RemoteParts:
    from stable_datasets.storage.resolve import open_store
    from stable_datasets.urls import ObjectURL

    store = open_store(ObjectURL.parse(s3_env.root))
    return RemoteParts(store, "cache/toy/default/1.0.0/abc/train", driver_node="driver")


def _writer(calls: list[int]):
    """Stands for write_part: a part folder with one shard (and a nested file, as Lance data files are)."""

    def write(plan, source, job, index, num_parts, staging: Path) -> PartResult:
        calls.append(index)
        folder = part_dir(staging, index)
        (folder / "data").mkdir(parents=True)
        (folder / "shard-00000.arrow").write_bytes(bytes([index]) * (10 + index))
        (folder / "data" / "nested.bin").write_bytes(b"n" * index)
        result = PartResult(index=index, num_rows=job, shards=[
            ShardInfo("shard-00000.arrow", job, 10 + index, "x"), ShardInfo("data/nested.bin", 0, index, "y")])
        result.save(folder)
        return result

    return write


def test_parts_written_on_another_node_reach_the_driver_through_the_store(remote, s3_env, tmp_path):
    prefix = remote.prefix("jobs-1")
    calls: list[int] = []
    task = remote_part_writer(_writer(calls), remote, prefix, lambda: "node-a")
    worker_disk, driver_disk = tmp_path / "node-a" / "staging", tmp_path / "driver" / "staging"
    parts = [task(None, None, 5 * (i + 1), i, 2, worker_disk) for i in range(2)]
    assert [p.node for p in parts] == ["node-a", "node-a"] and calls == [0, 1]
    assert not part_dir(worker_disk, 0).exists()  # another node's copy is of no use to the driver: removed
    keys = s3_env.objects(prefix)
    assert [k[len(prefix) + 1:] for k in keys] == [
        ".part-00000/_part.json", ".part-00000/data/nested.bin", ".part-00000/shard-00000.arrow",
        ".part-00001/_part.json", ".part-00001/data/nested.bin", ".part-00001/shard-00000.arrow"]
    fetch_parts(remote, prefix, driver_disk, parts)
    for part in parts:
        assert PartResult.load(part_dir(driver_disk, part.index)) == part
        assert (part_dir(driver_disk, part.index) / "shard-00000.arrow").read_bytes() == bytes([part.index]) * (
            10 + part.index)
    remove_prefix(remote, prefix)
    assert s3_env.objects(remote.split_prefix) == []


def test_a_part_finished_on_the_store_is_reused_and_one_with_a_short_file_is_written_again(remote, s3_env,
                                                                                           tmp_path):
    prefix = remote.prefix("jobs-1")
    calls: list[int] = []
    task = remote_part_writer(_writer(calls), remote, prefix, lambda: "node-a")
    first = task(None, None, 5, 0, 2, tmp_path / "a")
    again = remote_part_writer(_writer(calls), remote, prefix, lambda: "node-b")
    assert again(None, None, 5, 0, 2, tmp_path / "b") == first and calls == [0]  # from the store, not rewritten
    s3_env.write(f"{prefix}/.part-00000/shard-00000.arrow", b"short")
    assert again(None, None, 5, 0, 2, tmp_path / "b").node == "node-b" and calls == [0, 0]
    assert remote.prefix("jobs-1") != remote.prefix("jobs-2")  # other jobs never reuse these parts


def test_the_driver_names_a_part_missing_from_the_store(remote, tmp_path):
    prefix = remote.prefix("jobs-1")
    lost = PartResult(index=3, num_rows=1, shards=[ShardInfo("shard-00000.arrow", 1, 4, "x")], node="node-b")
    with pytest.raises(StableDatasetsError, match=r"^part 3 of 1 \(node node-b\) is not on the store: no s3://"
                                                  r".*/parts/\.part-00003/_part\.json$"):
        fetch_parts(remote, prefix, tmp_path / "driver", [lost])


def test_the_driver_names_a_part_whose_files_do_not_match_its_record(remote, s3_env, tmp_path):
    prefix = remote.prefix("jobs-1")
    part = PartResult(index=0, num_rows=1, shards=[ShardInfo("shard-00000.arrow", 1, 4, "x")], node="node-b")
    s3_env.write(f"{prefix}/.part-00000/shard-00000.arrow", b"abc")
    s3_env.write(f"{prefix}/.part-00000/{PART_FILE}", json.dumps(part.to_dict()).encode())
    with pytest.raises(StableDatasetsError, match=r"^part 0 of 1 \(node node-b\): its files on s3://.* do not "
                                                  "match its record$"):
        fetch_parts(remote, prefix, tmp_path / "driver", [part])


def test_a_node_that_cannot_reach_the_store_fails_naming_its_part_and_node(s3_env, tmp_path, monkeypatch):
    from stable_datasets.storage.resolve import open_store
    from stable_datasets.urls import ObjectURL

    monkeypatch.setenv("STABLE_DATASETS_STORAGE_RETRIES", "1")
    elsewhere = open_store(ObjectURL.parse(s3_env.root), {"endpoint_url": "http://127.0.0.1:1"})
    remote = RemoteParts(elsewhere, "cache/toy/default/1.0.0/abc/train")
    calls: list[int] = []
    task = remote_part_writer(_writer(calls), remote, remote.prefix("jobs-1"), lambda: "node-b")
    with pytest.raises(StableDatasetsError, match=r"^part 1 of 2 \(node node-b\): could not look for it on s3://"
                                                  r".*/\.part-00001: .*cannot reach the endpoint http://127\.0\.0"
                                                  r"\.1:1"):
        task(None, None, 5, 1, 2, tmp_path / "b")
    assert calls == []  # nothing was written that could not be kept


def test_parts_a_build_left_behind_are_an_abandoned_attempt_to_prune(remote, s3_env, tmp_path):
    """A failed build keeps its finished parts on the store for the next one; if none comes, `prune` names
    them as any attempt no `_metadata.json` names, and removes them."""
    from stable_datasets.storage.inventory import abandoned_attempts
    from stable_datasets.storage.root import RemoteRoot

    prefix = remote.prefix("jobs-1")
    remote_part_writer(_writer([]), remote, prefix, lambda: "node-a")(None, None, 5, 0, 1, tmp_path / "a")
    root = RemoteRoot.open(s3_env.root)
    assert abandoned_attempts(root, max_age_seconds=3600) == []  # fresh: a build may come back for them
    found = abandoned_attempts(root, max_age_seconds=0)
    assert [(kind, split.prefix, attempt) for kind, split, attempt in found] == [
        ("abandoned attempt", remote.split_prefix, prefix[len(remote.split_prefix) + 1:-len("/parts")])]
