"""Parts sent through the object store (write.remote_parts), on the S3 server on 127.0.0.1, without Ray: the
task side (write, seal, upload, reuse) and the driver side (check the parts with one listing, merge them on the
store reading only records and small files, publish by copying on the store, remove once published)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

import stable_datasets as sds
from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.layouts import layout_module
from stable_datasets.storage.publish import RemoteSplit, publish_attempt
from stable_datasets.write.parts import PART_FILE, PartResult, part_dir, write_part
from stable_datasets.write.plan import WritePlan
from stable_datasets.write.remote_parts import (
    RemoteParts,
    StoreParts,
    remote_part_writer,
    remove_prefix,
)
from stable_datasets.write.sources import ExampleSource
from tests.conftest import SMALL_FILES

SHARDED = types.SimpleNamespace(layout="arrow_shards")  # all the stand-in writer's plan needs to say


@pytest.fixture
def remote(s3_env) -> RemoteParts:
    from stable_datasets.storage.resolve import open_store
    from stable_datasets.urls import ObjectURL

    store = open_store(ObjectURL.parse(s3_env.root))
    return RemoteParts(store, "cache/toy/default/1.0.0/abc/train")


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


def test_parts_written_on_a_node_are_merged_on_the_store_and_the_driver_reads_no_shard(remote, s3_env, tmp_path):
    prefix = remote.prefix("jobs-1")
    calls: list[int] = []
    task = remote_part_writer(_writer(calls), remote, prefix, lambda: "node-a")
    worker_disk, driver_disk = tmp_path / "node-a" / "staging", tmp_path / "driver" / "staging"
    parts = [task(SHARDED, None, 5 * (i + 1), i, 2, worker_disk) for i in range(2)]
    assert [p.node for p in parts] == ["node-a", "node-a"] and calls == [0, 1]
    assert not part_dir(worker_disk, 0).exists()  # the driver merges from the store: the node keeps no copy
    keys = s3_env.objects(prefix)
    assert [k[len(prefix) + 1:] for k in keys] == [
        ".part-00000/_part.json", ".part-00000/data/nested.bin", ".part-00000/shard-00000.arrow",
        ".part-00001/_part.json", ".part-00001/data/nested.bin", ".part-00001/shard-00000.arrow"]
    files = StoreParts(remote, prefix, parts)
    shards, extra = layout_module("arrow_shards").merge_parts(driver_disk, parts, files)
    assert [(s.path, s.num_rows, s.num_bytes) for s in shards] == [("shard-00000.arrow", 5, 10),
                                                                   ("shard-00001.arrow", 10, 11)]
    assert files.copies == {"shard-00000.arrow": f"{prefix}/.part-00000/shard-00000.arrow",
                            "shard-00001.arrow": f"{prefix}/.part-00001/shard-00000.arrow"}
    assert extra == {"part_files": [["shard-00000.arrow"], ["shard-00001.arrow"]]}
    assert not driver_disk.exists() and files.downloaded == 0  # nothing came to the driver's disk
    assert files.local(driver_disk, parts[1], "data/nested.bin").read_bytes() == b"n"  # a small file, asked for
    assert files.downloaded == 1
    remove_prefix(remote, prefix)
    assert s3_env.objects(remote.split_prefix) == []


class _Rows(ExampleSource):
    """Jobs are lists of rows; a row's key is its `i`."""

    def plan_jobs(self, num_jobs, run, workdir):  # not used: the parts are written directly
        raise NotImplementedError

    def examples(self, job: Any):
        for row in job:
            yield row["i"], row


def _row(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"row {i}", "blob": bytes([i % 251]) * (i % 5 * 40)}


FEATURES = sds.Features({"i": sds.Value("int64"), "text": sds.Value("string"), "blob": sds.Value("binary")})


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_a_build_merged_on_the_store_publishes_the_rows_of_its_parts_by_copies(remote, s3_env, tmp_path,
                                                                               storage_format):
    """The real write path's task (write_part, sealed, uploaded) on a "node" folder, the layout's merge on the store
    into an empty staging folder, the publish copying every data file on the store: the rows are those written, and
    the driver's folder holds only what the merge wrote (no shard, no Lance data file); Lance's blob digests come
    from the parts (sealed where they were written)."""
    layout = {"arrow": "arrow_shards", "parquet": "parquet_shards", "lance": "lance_rows"}[storage_format]
    plan = WritePlan(target=tmp_path / "target", layout=layout, options=SMALL_FILES[storage_format], fingerprint="fp",
                     fingerprint_inputs={}, builder_name="rows", config_name="default", version="1.0.0",
                     split="train", features=FEATURES)
    jobs = [[_row(i) for i in range(0, 150)], [_row(i) for i in range(150, 230)], [_row(i) for i in range(230, 400)]]
    prefix = remote.prefix("jobs-rows")
    task = remote_part_writer(write_part, remote, prefix, lambda: "node-a")
    parts = [task(plan, _Rows(), job, index, len(jobs), tmp_path / "node-a") for index, job in enumerate(jobs)]
    if layout == "lance_rows":
        assert all(set(p.extra["blob_digests"]) == {f["files"][0]["path"] for f in p.extra["fragments"]}
                   for p in parts)  # one digest per fragment, made on the node
    staging = tmp_path / "driver" / "staging"
    files = StoreParts(remote, prefix, parts)
    shards, extra = layout_module(layout).merge_parts(staging, parts, files)
    on_disk = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    assert set(files.copies) == {s.path for s in shards if s.num_rows}  # every data file stays on the store
    assert not set(on_disk) & set(files.copies) and files.downloaded == 0
    assert all("_versions/" in p or "_transactions/" in p for p in on_disk)  # Lance's manifest: all that is here
    metadata = CacheMetadata(layout=layout, features=FEATURES.to_dict(), num_rows=sum(p.num_rows for p in parts),
                             shards=shards, fingerprint="fp", builder_name="rows", split="train", extra=extra,
                             layout_options=plan.writer_options)
    split = RemoteSplit(remote.store, f"{remote.split_prefix}-published")
    published, won = publish_attempt(split, staging, metadata, "a" * 32, copies=files.copies)
    assert won
    ds = sds.open_cache(split.url)
    assert ds.to_list() == [_row(i) for i in range(400)]
    if layout == "lance_rows":
        assert published.extra["blob_digests"] == {k: v for p in parts for k, v in p.extra["blob_digests"].items()}


def test_a_part_finished_on_the_store_is_reused_and_one_with_a_short_file_is_written_again(remote, s3_env,
                                                                                           tmp_path):
    prefix = remote.prefix("jobs-1")
    calls: list[int] = []
    task = remote_part_writer(_writer(calls), remote, prefix, lambda: "node-a")
    first = task(SHARDED, None, 5, 0, 2, tmp_path / "a")
    again = remote_part_writer(_writer(calls), remote, prefix, lambda: "node-b")
    assert again(SHARDED, None, 5, 0, 2, tmp_path / "b") == first and calls == [0]  # from the store, not rewritten
    s3_env.write(f"{prefix}/.part-00000/shard-00000.arrow", b"short")
    assert again(SHARDED, None, 5, 0, 2, tmp_path / "b").node == "node-b" and calls == [0, 0]
    assert remote.prefix("jobs-1") != remote.prefix("jobs-2")  # other jobs never reuse these parts


def test_the_driver_names_a_part_missing_from_the_store(remote, tmp_path):
    prefix = remote.prefix("jobs-1")
    lost = PartResult(index=3, num_rows=1, shards=[ShardInfo("shard-00000.arrow", 1, 4, "x")], node="node-b")
    with pytest.raises(StableDatasetsError, match=r"^part 3 of 1 \(node node-b\) is not on the store: no s3://"
                                                  r".*/parts/\.part-00003/_part\.json$"):
        StoreParts(remote, prefix, [lost])


def test_the_driver_names_a_part_whose_files_do_not_match_its_record(remote, s3_env, tmp_path):
    prefix = remote.prefix("jobs-1")
    part = PartResult(index=0, num_rows=1, shards=[ShardInfo("shard-00000.arrow", 1, 4, "x")], node="node-b")
    s3_env.write(f"{prefix}/.part-00000/shard-00000.arrow", b"abc")
    s3_env.write(f"{prefix}/.part-00000/{PART_FILE}", json.dumps(part.to_dict()).encode())
    with pytest.raises(StableDatasetsError, match=r"^part 0 of 1 \(node node-b\): its files on s3://.*/\.part-00000/ "
                                                  "do not match its record$"):
        StoreParts(remote, prefix, [part])


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
        task(SHARDED, None, 5, 1, 2, tmp_path / "b")
    assert calls == []  # nothing was written that could not be kept


def test_parts_a_build_left_behind_are_an_abandoned_attempt_to_prune(remote, s3_env, tmp_path):
    """A failed build keeps its finished parts on the store for the next one; if none comes, `prune` names
    them as any attempt no `_metadata.json` names, and removes them."""
    from stable_datasets.storage.inventory import abandoned_attempts
    from stable_datasets.storage.root import RemoteRoot

    prefix = remote.prefix("jobs-1")
    remote_part_writer(_writer([]), remote, prefix, lambda: "node-a")(SHARDED, None, 5, 0, 1, tmp_path / "a")
    root = RemoteRoot.open(s3_env.root)
    assert abandoned_attempts(root, max_age_seconds=3600) == []  # fresh: a build may come back for them
    found = abandoned_attempts(root, max_age_seconds=0)
    assert [(kind, split.prefix, attempt) for kind, split, attempt in found] == [
        ("abandoned attempt", remote.split_prefix, prefix[len(remote.split_prefix) + 1:-len("/parts")])]
