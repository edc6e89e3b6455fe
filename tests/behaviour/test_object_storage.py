"""Caches on object storage, against a real S3 endpoint on 127.0.0.1 (moto in server mode).

Build and load in each layout, the commit protocol (two publishers, killed builds, prune),
damaged remote shards, configuration errors, the local shard cache and the command line.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.cli import main as cli_main
from stable_datasets.errors import CacheError, ConfigurationError, StableDatasetsError, StorageError
from stable_datasets.storage import shard_cache
from stable_datasets.storage.publish import RemoteSplit, publish_attempt
from stable_datasets.storage.resolve import forget_stores, open_store
from stable_datasets.urls import ObjectURL
from tests.rows import plain, remote_split_prefix, rows_of

pytestmark = pytest.mark.timeout(240)


def _split_prefix(env, ds) -> str:
    return remote_split_prefix(env, ds, "s3")


def _metadata(env, prefix: str) -> dict:
    return json.loads(env.read(f"{prefix}/_metadata.json"))


# -- URLs and configuration errors ---------------------------------------------------------------
def test_unsupported_scheme_is_an_error_and_makes_no_local_folder(toy_builder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r"^nosuch://bucket/x: unsupported scheme 'nosuch'; use s3://"):
        sds.load_dataset(str(toy_builder), split="train", cache_dir="nosuch://bucket/x")
    assert not any(p.name.startswith("nosuch") for p in tmp_path.iterdir())


@pytest.mark.parametrize("url", ["https://example.invalid/cache", "http://127.0.0.1:9/cache", "zip://inner/path"])
def test_a_read_only_or_archive_scheme_is_refused_as_a_cache_root(toy_builder, tmp_path, monkeypatch, url):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    scheme = url.split(":")[0]
    with pytest.raises(ConfigurationError, match=rf"^{url.rsplit('/', 1)[0]}: {scheme}:// cannot hold a cache root "
                                                 r"\(it is read-only, or an archive\); use s3://, gs://, az:// \(or "
                                                 r"another writable fsspec protocol\) or a local folder"):
        sds.load_dataset(str(toy_builder), split="train", cache_dir=url)
    assert list((tmp_path / "cwd").iterdir()) == []


def test_a_url_is_never_taken_as_a_local_folder(tmp_path, monkeypatch):
    from stable_datasets.cache.paths import cache_root

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STABLE_DATASETS_CACHE_DIR", "s3://bucket/cache")
    with pytest.raises(StableDatasetsError, match=r"STABLE_DATASETS_CACHE_DIR='s3://bucket/cache' is an object-store"):
        cache_root()
    with pytest.raises(ConfigurationError, match="lost a slash"):
        cache_root(Path("s3://bucket/cache"))  # pathlib made it 's3:/bucket/cache'
    assert cache_root("file:///tmp/x") == Path("/tmp/x")
    assert list(tmp_path.iterdir()) == []


def test_a_filesystem_object_as_cache_dir_is_refused_saying_what_to_pass(tmp_path, monkeypatch):
    import fsspec
    from pyarrow import fs as pafs

    monkeypatch.chdir(tmp_path)
    for given, kind in ((pafs.SubTreeFileSystem("bucket/cache", pafs.LocalFileSystem()), "SubTreeFileSystem"),
                        (fsspec.filesystem("memory"), "MemoryFileSystem")):
        with pytest.raises(ConfigurationError, match=rf"^cache_dir is a {kind} object: give a cache root as a local "
                                                     r"path or a URL string \('s3://bucket/prefix', 'gs://\.\.\.', "
                                                     r"any fsspec protocol\), with the filesystem's credentials and "
                                                     r"endpoint in storage_options="):
            sds.load_dataset("digits", split="train", cache_dir=given)
    assert list(tmp_path.iterdir()) == []


def test_object_url_parsing():
    url = ObjectURL.parse("s3://bucket//a/b/")
    assert (url.scheme, url.bucket, url.key) == ("s3", "bucket", "a/b")
    assert str(url.child("c", "d/")) == "s3://bucket/a/b/c/d"
    assert url.child("c").relative_to(url) == "c"
    with pytest.raises(ConfigurationError, match="names no bucket"):
        ObjectURL.parse("s3:///key")
    with pytest.raises(ConfigurationError, match=r"'\.' and '\.\.' are not allowed"):
        ObjectURL.parse("s3://bucket/a/../b")


def test_missing_bucket_fails_fast_naming_it(s3_env, toy_builder):
    with pytest.raises(StorageError, match=r"s3://no-such-bucket-x: bucket 'no-such-bucket-x' does not exist at "):
        sds.load_dataset(str(toy_builder), split="train", cache_dir="s3://no-such-bucket-x/cache")


def test_unreachable_endpoint_fails_after_bounded_retries(s3_env, toy_builder, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("STABLE_DATASETS_STORAGE_RETRIES", "2")
    forget_stores()
    with pytest.raises(StorageError, match=r"cannot reach the endpoint http://127.0.0.1:9 after 2 attempts .*"
                                           r"AWS_ENDPOINT_URL"):
        sds.load_dataset(str(toy_builder), split="train")


def test_an_endpoint_that_accepts_but_never_answers_fails_on_the_short_check_timeout(s3_env, toy_builder,
                                                                                   monkeypatch):
    """A hung proxy or a wrong port of a busy host: the first request (the bucket check) gives up after
    CHECK_TIMEOUT seconds per attempt, not after the 60 s a download may wait between bytes."""
    import socket

    from stable_datasets.storage.s3 import CHECK_TIMEOUT

    silent = socket.create_server(("127.0.0.1", 0))  # the kernel completes the handshakes; nobody answers
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("STABLE_DATASETS_STORAGE_RETRIES", "1")
        forget_stores()
        with pytest.raises(StorageError, match=rf"^s3://{s3_env.bucket}: cannot reach the endpoint http://127.0.0.1:"
                                               rf"\d+ after 1 attempts \(ReadTimeoutError: no answer within "
                                               rf"{CHECK_TIMEOUT:g} s\); check AWS_ENDPOINT_URL"):
            sds.load_dataset(str(toy_builder), split="train")
    finally:
        silent.close()


def test_missing_credentials_say_what_to_set(s3_env, toy_builder, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    forget_stores()
    with pytest.raises(StorageError, match=r"no AWS credentials found; set AWS_ACCESS_KEY_ID and "
                                           r"AWS_SECRET_ACCESS_KEY \(or AWS_PROFILE\)"):
        sds.load_dataset(str(toy_builder), split="train")


def test_storage_options_give_endpoint_and_credentials(s3_env, toy_builder, monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    forget_stores()
    options = {"endpoint_url": s3_env.endpoint, "key": "testing", "secret": "testing"}
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance", storage_options=options)
    assert ds[7]["text"] == "row 7" and len(ds) == 50
    with pytest.raises(ConfigurationError, match="unknown storage option 'colour'"):
        sds.load_dataset(str(toy_builder), split="train", storage_options={**options, "colour": "red"})


def test_a_profile_in_the_aws_config_file_gives_endpoint_and_credentials_and_a_missing_one_is_named(
        s3_env, toy_builder, tmp_path, monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    config = tmp_path / "aws-config"
    config.write_text(f"[profile lab]\nregion = us-east-1\nendpoint_url = {s3_env.endpoint}\n"
                      "aws_access_key_id = testing\naws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "lab")
    forget_stores()
    assert sds.load_dataset(str(toy_builder), split="train")[7]["text"] == "row 7"
    monkeypatch.setenv("AWS_PROFILE", "nope")
    forget_stores()
    with pytest.raises(StorageError, match=rf"^s3://{s3_env.bucket}: cannot set up an S3 client \(ProfileNotFound: "
                                           r"The config profile \(nope\) could not be found\); check AWS_PROFILE"):
        sds.load_dataset(str(toy_builder), split="train")


def test_conditional_put_is_honoured_by_the_server(s3_env):
    store = open_store(ObjectURL.parse(s3_env.root))
    assert store.put_if_absent("cache/x", b"first") is True
    assert store.put_if_absent("cache/x", b"second") is False
    assert s3_env.read("cache/x") == b"first"


def test_an_s3_store_that_refuses_if_none_match_falls_back_to_check_then_write_and_says_so(
        s3_env, toy_builder, monkeypatch, warnings_logged):
    """Some S3-compatible servers answer a conditional put with 501 NotImplemented: builds still publish."""
    from botocore.exceptions import ClientError

    store = open_store(ObjectURL.parse(s3_env.root))
    original = store.client.put_object

    def without_conditions(**kwargs):
        if "IfNoneMatch" in kwargs:
            raise ClientError({"Error": {"Code": "NotImplemented", "Message": "A header you provided implies "
                                         "functionality that is not implemented"},
                               "ResponseMetadata": {"HTTPStatusCode": 501}}, "PutObject")
        return original(**kwargs)

    monkeypatch.setattr(store.client, "put_object", without_conditions)
    assert store.put_if_absent("cache/x", b"first") is True
    assert store.put_if_absent("cache/x", b"second") is False
    assert s3_env.read("cache/x") == b"first"
    assert sds.load_dataset(str(toy_builder), split="train")[7]["text"] == "row 7"
    assert sum(f"s3://{s3_env.bucket} refuses conditional puts (If-None-Match: NotImplemented); publishing checks, "
               "then writes" in m for m in warnings_logged) == 1


def test_a_file_over_the_part_size_is_uploaded_in_parts(s3_env, tmp_path, monkeypatch):
    """S3 takes at most 5 GB in one PUT: a big shard or Lance data file goes up as a multipart upload."""
    from stable_datasets.storage import s3

    monkeypatch.setattr(s3, "UPLOAD_PART_BYTES", 5 << 20)  # S3's smallest part
    data = os.urandom((11 << 20) + 7)
    (tmp_path / "big").write_bytes(data)
    store = open_store(ObjectURL.parse(s3_env.root))
    store.put_file(tmp_path / "big", "cache/big")
    assert s3_env.read("cache/big") == data
    assert store.head("cache/big").etag.endswith('-3"')  # the ETag of a 3-part upload
    (tmp_path / "small").write_bytes(b"x" * 100)
    store.put_file(tmp_path / "small", "cache/small")
    assert not store.head("cache/small").etag.endswith('-1"')  # one PUT


# -- build and load ------------------------------------------------------------------------------
@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_build_and_load_equal_a_local_cache(s3_env, toy_builder, tmp_path, storage_format):
    remote = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)
    local = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format,
                             cache_dir=str(tmp_path / "local-cache"))
    assert rows_of(remote) == rows_of(local)
    assert len(remote) == 50 and remote[-1]["id"] == 49
    prefix = _split_prefix(s3_env, remote)
    metadata = _metadata(s3_env, prefix)
    assert metadata["attempt"].startswith("attempts/") and metadata["num_rows"] == 50
    listed = {f"{prefix}/{metadata['attempt']}/{s['path']}" for s in metadata["shards"]}
    assert listed <= set(s3_env.objects(prefix))
    assert f"{prefix}/_lease.json" not in s3_env.objects(prefix)  # released
    np.testing.assert_array_equal(remote.with_format("numpy")[:5]["grid"], local.with_format("numpy")[:5]["grid"])


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_streaming_from_a_remote_cache_equals_streaming_the_local_one(s3_env, toy_builder, tmp_path,
                                                                      storage_format):
    """streaming=True over a bucket: the same rows, and the same seeded block-shuffled order."""
    kwargs = dict(split="train", storage_format=storage_format, streaming=True)
    remote = sds.load_dataset(str(toy_builder), **kwargs)
    local = sds.load_dataset(str(toy_builder), cache_dir=str(tmp_path / "local-cache"), **kwargs)
    assert [plain(r) for r in remote] == [plain(r) for r in local]
    assert [r["id"] for r in remote] == list(range(50))
    shuffled = [r["id"] for r in remote.shuffle(seed=3)]
    assert shuffled == [r["id"] for r in local.shuffle(seed=3)]
    assert sorted(shuffled) == list(range(50)) and shuffled != list(range(50))


def test_lance_is_read_in_place_and_arrow_through_the_shard_cache(s3_env, toy_builder, monkeypatch):
    lance = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")
    backend = lance.backends[0]
    assert backend.lance_base[0].startswith(f"s3://{s3_env.bucket}/cache/")
    assert not (backend.directory / "data.lance").exists()  # nothing of it downloaded
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(s3_env.local.parent / "other-node"))
    arrow = sds.load_dataset(str(toy_builder), split="test")  # another node: downloads the shards
    shard = arrow.cache_dirs[0] / arrow.cache_metadata[0].shards[0].path
    assert shard.is_file() and str(shard).startswith(str(s3_env.local.parent / "other-node"))
    assert arrow[0]["id"] == 1000


def test_remote_lance_downloaded_into_the_shard_cache_when_asked(s3_env, toy_builder, monkeypatch):
    in_place = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(s3_env.local.parent / "download-node"))
    monkeypatch.setenv("STABLE_DATASETS_REMOTE_LANCE", "download")
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")
    backend = ds.backends[0]
    assert backend.lance_base is None
    assert str(backend.directory).startswith(str(s3_env.local.parent / "download-node"))
    assert sorted(p.name for p in (backend.directory / "data.lance" / "data").glob("*.lance")) == sorted(
        s.path.rsplit("/", 1)[1] for s in ds.cache_metadata[0].shards if s.path.startswith("data.lance/data/"))
    assert ds.to_arrow().equals(in_place.to_arrow()) and ds.to_arrow().column("id").to_pylist() == list(range(50))
    assert [r["id"] for r in ds.select([49, 0, 7])] == [49, 0, 7]
    monkeypatch.setenv("STABLE_DATASETS_REMOTE_LANCE", "local")
    with pytest.raises(ValueError, match=r"STABLE_DATASETS_REMOTE_LANCE='local' is not one of \['in_place', "
                                         r"'download'\]"):
        sds.load_dataset(str(toy_builder), split="train", storage_format="lance")


def test_a_second_load_reuses_the_published_cache(s3_env, toy_builder, tmp_path, monkeypatch):
    counter = tmp_path / "counter"
    monkeypatch.setenv("TOY_COUNTER", str(counter))
    sds.load_dataset(str(toy_builder), split="train")
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    ds = sds.load_dataset(str(toy_builder))  # all splits: names come from the store, nothing is generated
    assert counter.read_text() == "xx"  # train, then test once
    assert sorted(ds) == ["test", "train"] and len(ds["test"]) == 50


def test_open_cache_by_url_and_pickled_copies_read_the_same_rows(s3_env, toy_builder):
    import pickle

    for storage_format in ("arrow", "lance"):
        ds = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)
        url = f"{s3_env.root.rsplit('/', 1)[0]}/{_split_prefix(s3_env, ds)}"
        opened = sds.open_cache(url)
        assert rows_of(opened) == rows_of(ds)
        assert rows_of(pickle.loads(pickle.dumps(opened))) == rows_of(ds)


def test_fsspec_memory_root_builds_and_loads(toy_builder, tmp_path, monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "local"))
    root = "memory://bucket-mem/cache"
    for storage_format in ("arrow", "lance"):  # Lance is downloaded: memory:// is no store Lance reads
        ds = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format, cache_dir=root)
        assert ds[5]["text"] == "row 5" and len(ds) == 50
    store = open_store(ObjectURL.parse(root))
    assert store.put_if_absent("cache/once", b"1") and not store.put_if_absent("cache/once", b"2")


# -- the commit protocol -------------------------------------------------------------------------
def _local_build(toy_builder, tmp_path):
    ds = sds.load_dataset(str(toy_builder), split="train", cache_dir=str(tmp_path / "built"))
    return ds.cache_dirs[0], ds.cache_metadata[0]


def test_two_publishers_exactly_one_wins_and_the_other_reuses(s3_env, toy_builder, tmp_path):
    import copy

    build_dir, metadata = _local_build(toy_builder, tmp_path)
    split = RemoteSplit(open_store(ObjectURL.parse(s3_env.root)), "cache/race/train")
    results = [None, None]
    start = threading.Barrier(2)

    def publish(i):
        start.wait()
        results[i] = publish_attempt(split, build_dir, copy.deepcopy(metadata), f"{i:08x}aa")

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won for _, won in results) == [False, True]
    winner = next(m for m, won in results if won).attempt
    assert all(m.attempt == winner for m, _ in results)  # the loser returns the winner's metadata
    attempts = {k.split("/")[4] for k in s3_env.objects("cache/race/train/attempts/")}
    assert attempts == {winner.split("/")[1]}  # the loser's objects are gone
    assert _metadata(s3_env, "cache/race/train")["attempt"] == winner


BUILD_SCRIPT = """
import sys, stable_datasets as sds
ds = sds.load_dataset(sys.argv[1], split="train", storage_format=sys.argv[2])
print(ds.cache_metadata[0].attempt, len(ds))
"""


def test_two_processes_build_once_and_agree(s3_env, toy_builder, tmp_path):
    counter = tmp_path / "counter"
    env = {**os.environ, "TOY_COUNTER": str(counter), "TOY_SLEEP": "0.01"}
    procs = [subprocess.Popen([sys.executable, "-c", BUILD_SCRIPT, str(toy_builder), "arrow"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    attempts = {out.split()[0] for out, _ in outputs}
    assert len(attempts) == 1 and all(out.split()[1] == "50" for out, _ in outputs)
    assert counter.read_text() == "x"  # the second waited on the lease and reused


def test_a_builder_stalled_past_its_lease_keeps_its_local_work_and_both_processes_agree(s3_env, toy_builder, tmp_path):
    """Two real processes of one node: A stalls (SIGSTOP) past its lease, B takes the lease over. They share the
    local work folder, so B waits for A's local lock instead of resetting A's staging; A resumes and publishes,
    B reuses A's cache. Rows are generated once and one attempt is published."""
    import signal
    import time

    env = {**os.environ, "STABLE_DATASETS_LEASE_SECONDS": "1", "TOY_COUNTER": str(tmp_path / "counter")}
    command = [sys.executable, "-c", BUILD_SCRIPT, str(toy_builder), "arrow"]
    stalled = subprocess.Popen(command, env={**env, "TOY_SLEEP": "0.02"}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    second = None
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "counter").exists():  # A holds the lease and generates rows
            assert time.monotonic() < deadline and stalled.poll() is None, stalled.communicate()
            time.sleep(0.05)
        stalled.send_signal(signal.SIGSTOP)
        split_prefix = next(k for k in s3_env.objects() if k.endswith("/_lease.json")).rsplit("/", 1)[0]
        time.sleep(1.5)  # A's lease expires: nobody renews it
        second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def lease_holder() -> int | None:
            try:
                return json.loads(s3_env.read(f"{split_prefix}/_lease.json"))["pid"]
            except Exception:  # between B's delete of the stale lease and its put
                return None

        while lease_holder() != second.pid:  # B takes the lease over, then waits for A's local lock
            assert time.monotonic() < deadline and second.poll() is None, second.communicate()
            time.sleep(0.05)
    finally:
        stalled.send_signal(signal.SIGCONT)
    outputs = [p.communicate(timeout=180) for p in (stalled, second)]
    assert [p.returncode for p in (stalled, second)] == [0, 0], outputs
    assert outputs[0][0].split() == outputs[1][0].split()  # the same attempt, 50 rows
    assert "taking over the stale lease" in outputs[1][1]
    assert (tmp_path / "counter").read_text() == "x"  # generated once
    prefix = _split_prefix(s3_env, sds.load_dataset(str(toy_builder), split="train"))
    attempts = {k.split("/attempts/")[1].split("/")[0] for k in s3_env.objects(f"{prefix}/attempts/")}
    assert {f"attempts/{a}" for a in attempts} == {outputs[0][0].split()[0]}


def test_killed_build_publishes_nothing_and_the_next_succeeds(s3_env, toy_builder, tmp_path):
    died = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, str(toy_builder), "arrow"], timeout=180,
                          env={**os.environ, "TOY_KILL_AT": "30"}, capture_output=True, text=True)
    assert died.returncode == -9
    assert not [k for k in s3_env.objects() if k.endswith("/_metadata.json")]
    assert [k for k in s3_env.objects() if k.endswith("/_lease.json")]  # left behind by the dead builder
    ds = sds.load_dataset(str(toy_builder), split="train")  # takes over the dead builder's lease at once
    assert len(ds) == 50


KILL_DURING_UPLOAD = """
import os, sys, stable_datasets as sds
from stable_datasets.storage.s3 import S3Store
original = S3Store.put_file
def put_then_die(self, path, key):
    original(self, path, key)
    os._exit(9)
S3Store.put_file = put_then_die
sds.load_dataset(sys.argv[1], split="train", storage_format=sys.argv[2])
"""


def test_build_killed_while_uploading_leaves_an_attempt_that_prune_removes(s3_env, toy_builder, capsys):
    died = subprocess.run([sys.executable, "-c", KILL_DURING_UPLOAD, str(toy_builder), "lance"], timeout=180,
                          capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    orphan = {k.split("/attempts/")[1].split("/")[0] for k in s3_env.objects() if "/attempts/" in k}
    assert len(orphan) == 1 and not [k for k in s3_env.objects() if k.endswith("/_metadata.json")]
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")
    assert len(ds) == 50 and ds.cache_metadata[0].attempt.split("/")[1] not in orphan
    assert cli_main(["prune", "--dry-run"]) == 0
    assert "would remove abandoned attempt" in capsys.readouterr().out
    assert cli_main(["prune"]) == 0
    left = {k.split("/attempts/")[1].split("/")[0] for k in s3_env.objects() if "/attempts/" in k}
    assert left == {ds.cache_metadata[0].attempt.split("/")[1]}
    assert rows_of(ds)[3]["text"] == "row 3"


def test_an_open_dataset_keeps_its_attempt_through_a_rebuild_and_prune(s3_env, toy_builder, capsys):
    for storage_format in ("arrow", "lance"):
        old = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)
        before = rows_of(old)
        new = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format,
                               download_mode="force_rebuild")
        assert new.cache_metadata[0].attempt != old.cache_metadata[0].attempt
        assert cli_main(["prune", "--max-staging-age", "0"]) == 0  # grace over: only the pin protects it
        assert "superseded attempt" not in capsys.readouterr().out
        assert rows_of(old) == before == rows_of(new)
        attempt = old.cache_metadata[0].attempt
        del old
        gc.collect()
        assert cli_main(["prune", "--max-staging-age", "0"]) == 0
        assert f"removed superseded attempt: {s3_env.root}" in capsys.readouterr().out
        assert not [k for k in s3_env.objects() if f"/{attempt}/" in k]
        assert rows_of(sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)) == before


# -- damaged remote caches -----------------------------------------------------------------------
def _fresh_node(monkeypatch, tmp_path, name):
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / name))


@pytest.mark.parametrize("damage", ["flipped", "replaced", "deleted"])
def test_a_damaged_remote_shard_is_an_error_naming_it(s3_env, toy_builder, tmp_path, monkeypatch, damage):
    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = _split_prefix(s3_env, ds)
    metadata = _metadata(s3_env, prefix)
    key = f"{prefix}/{metadata['attempt']}/{metadata['shards'][0]['path']}"
    data = bytearray(s3_env.read(key))
    if damage == "flipped":
        data[len(data) // 2] ^= 0xFF
        s3_env.write(key, bytes(data))
    elif damage == "replaced":
        s3_env.write(key, bytes(data) + b"more")
    else:
        s3_env.delete(key)
    _fresh_node(monkeypatch, tmp_path, "node-b")
    if damage == "deleted":
        with pytest.raises(CacheError, match=rf"s3://{s3_env.bucket}/{key}: .*is missing from the store"):
            sds.open_cache(f"s3://{s3_env.bucket}/{prefix}")  # opening a cache by its URL never builds
        assert not list((tmp_path / "node-b").rglob("shard-*.arrow"))
        rebuilt = sds.load_dataset(str(toy_builder), split="train")  # load_dataset builds it again
        assert rebuilt.cache_metadata[0].attempt != metadata["attempt"] and rows_of(rebuilt) == rows_of(ds)
        return
    with pytest.raises(CacheError, match=rf"s3://{s3_env.bucket}/{key}: .*shard changed since it was published"):
        sds.load_dataset(str(toy_builder), split="train")
    assert not list((tmp_path / "node-b").rglob("shard-*.arrow"))  # nothing unverified is kept
    assert rows_of(ds)[10]["id"] == 10  # the copy verified before is still right


def test_a_deleted_lance_object_is_an_error_naming_it(s3_env, toy_builder, tmp_path, monkeypatch):
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")
    prefix = _split_prefix(s3_env, ds)
    metadata = _metadata(s3_env, prefix)
    data_file = next(s["path"] for s in metadata["shards"] if s["num_rows"])
    before = rows_of(ds)
    s3_env.delete(f"{prefix}/{metadata['attempt']}/{data_file}")
    with pytest.raises(CacheError, match=rf"{data_file}: object listed in _metadata.json is missing"):
        sds.open_cache(f"s3://{s3_env.bucket}/{prefix}")  # opening by URL never builds
    rebuilt = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")  # built again
    assert rebuilt.cache_metadata[0].attempt != metadata["attempt"] and rows_of(rebuilt) == before


def test_a_lance_object_replaced_with_one_of_the_same_size_is_an_error_not_wrong_rows(s3_env, toy_builder):
    """Lance is read in place, so no sha256 is checked on open: the ETag recorded at publish is."""
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance")
    assert ds[7]["text"] == "row 7"
    prefix = _split_prefix(s3_env, ds)
    metadata = _metadata(s3_env, prefix)
    data_file = next(s["path"] for s in metadata["shards"] if s["num_rows"])
    key = f"{prefix}/{metadata['attempt']}/{data_file}"
    body = s3_env.read(key)
    assert body.count(b"row 7") == 1
    s3_env.write(key, body.replace(b"row 7", b"row 9"))  # same size, still a valid Lance file
    del ds
    gc.collect()
    with pytest.raises(CacheError, match=rf"{data_file}: object changed after it was published \(ETag "
                                         r"\S+, _metadata.json records \S+\); rebuild the cache"):
        sds.load_dataset(str(toy_builder), split="train", storage_format="lance")


def test_damaged_remote_metadata_is_rebuilt_and_named(s3_env, toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = _split_prefix(s3_env, ds)
    s3_env.write(f"{prefix}/_metadata.json", b"{not json")
    with pytest.raises(CacheError, match=rf"s3://{s3_env.bucket}/{prefix}/_metadata.json: invalid cache metadata"):
        sds.open_cache(f"s3://{s3_env.bucket}/{prefix}")
    rebuilt = sds.load_dataset(str(toy_builder), split="train")  # unusable: built again and replaced
    assert rows_of(rebuilt) == rows_of(ds)
    assert rebuilt.cache_metadata[0].attempt != ds.cache_metadata[0].attempt


# -- the local shard cache -----------------------------------------------------------------------
def test_size_parsing():
    assert shard_cache.parse_size("1000") == 1000
    assert shard_cache.parse_size("2KiB") == 2048 and shard_cache.parse_size("1.5 GB") == 1_500_000_000
    with pytest.raises(ConfigurationError, match="STABLE_DATASETS_LOCAL_CACHE_LIMIT='ten' is not a size"):
        shard_cache.parse_size("ten")


def _shard_files(ds) -> list[Path]:
    return [ds.cache_dirs[0] / s.path for s in ds.cache_metadata[0].shards]


def test_the_local_cache_evicts_least_recently_used_unpinned_shards(s3_env, write_builder, tmp_path, monkeypatch):
    from tests.conftest import TOY_BUILDER

    paths = [write_builder(f"toy{i}", TOY_BUILDER) for i in range(3)]
    opened = [sds.load_dataset(str(p), split="train") for p in paths]  # built here: shards kept locally
    size = sum(f.stat().st_size for f in _shard_files(opened[0]))
    files = [_shard_files(ds) for ds in opened]
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_LIMIT", str(int(size * 2.5)))
    assert shard_cache.evict() == []  # every attempt is pinned by an open dataset: nothing goes
    del opened
    gc.collect()
    os.utime(files[0][0], (1, 1))  # least recently used
    removed = shard_cache.evict()
    assert removed == files[0]
    again = sds.load_dataset(str(paths[0]), split="train")  # downloaded again, verified
    assert again[49]["id"] == 49 and files[0][0].is_file()
    assert not files[1][0].is_file()  # opening it evicted the next least recently used


def test_several_processes_share_one_download(s3_env, toy_builder, tmp_path, monkeypatch):
    sds.load_dataset(str(toy_builder), split="train")
    _fresh_node(monkeypatch, tmp_path, "shared-node")
    script = "import sys, stable_datasets as sds; print(len(sds.load_dataset(sys.argv[1], split='train')))"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(toy_builder)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [o.strip() for o, _ in outputs] == ["50"] * 3, outputs
    leftovers = [p for p in (tmp_path / "shared-node").rglob("*") if p.name.endswith(".download")]
    assert leftovers == []


def test_a_relative_local_cache_dir_keeps_serving_after_chdir(s3_env, toy_builder, tmp_path, monkeypatch):
    """As for a relative STABLE_DATASETS_CACHE_DIR (cache_root makes it absolute): an open remote dataset keeps
    reading its local copies after os.chdir. Before: the shard cache folder stayed relative, so after a chdir a
    Parquet cache raised 'ValueError lc/shards/.../shard-00000.idx.parquet can no longer be read as Parquet:
    [Errno 2] Failed to open local file', DataLoader workers of Arrow and Parquet caches failed the same way,
    and a new stream downloaded everything again under the new working folder."""
    sds.load_dataset(str(toy_builder), split="train", storage_format="parquet")
    (tmp_path / "job").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "job")
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", "node-local")
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="parquet")
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert ds.cache_dirs[0].is_absolute()
    assert ds[49]["id"] == 49 and ds["id"] == list(range(50))
    assert not (tmp_path / "elsewhere" / "node-local").exists()


OPEN_WITH_FILE_LIMIT = """
import resource, signal, sys
import stable_datasets as sds
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # ulimit -f: no local file may pass 1 KiB
try:
    sds.load_dataset(sys.argv[1], split="train")
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_local_shard_cache_that_cannot_take_a_shard_says_so_and_names_the_folder(s3_env, toy_builder, tmp_path,
                                                                                   monkeypatch):
    """The remote side is fine, the local disk is full (or a file may not grow past `ulimit -f`): the error
    says it is the local shard cache, names its folder and the variable that moves it, and leaves no
    partial download. Before: a bare 'OSError [Errno 27] File too large' when the local copy of
    `_metadata.json` cannot be written, and 'StorageError s3://.../shard-00000.arrow: download failed
    (OSError: [Errno 27] File too large)', which points at the bucket, when a shard cannot."""
    sds.load_dataset(str(toy_builder), split="train")
    _fresh_node(monkeypatch, tmp_path, "small-node")
    done = subprocess.run([sys.executable, "-c", OPEN_WITH_FILE_LIMIT, str(toy_builder)], capture_output=True,
                          text=True, timeout=180)
    message = done.stdout.strip()
    assert done.returncode == 0 and "File too large" in message, (message, done.stderr[-2000:])
    assert "download failed" not in message, message
    assert str(tmp_path / "small-node" / "shards") in message and "STABLE_DATASETS_LOCAL_CACHE_DIR" in message
    assert not [p for p in (tmp_path / "small-node").rglob("*") if p.name.endswith(".download")]


# -- command line --------------------------------------------------------------------------------
def test_cli_on_a_remote_root(s3_env, toy_builder, capsys):
    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = _split_prefix(s3_env, ds)
    url = f"s3://{s3_env.bucket}/{prefix}"
    assert cli_main(["build", str(toy_builder), "--split", "train", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"split": "train", "rows": 50, "path": url}]
    assert cli_main(["ls", "--cache-dir", s3_env.root, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["name"], e["split"], e["rows"], e["path"]) for e in listed] == [("toy", "train", 50, url)]
    assert cli_main(["info", url]) == 0
    assert "fingerprint" in capsys.readouterr().out
    assert cli_main(["verify", "toy"]) == 0
    assert capsys.readouterr().out.startswith(f"ok  {url}")
    metadata = _metadata(s3_env, prefix)
    key = f"{prefix}/{metadata['attempt']}/{metadata['shards'][0]['path']}"
    data = bytearray(s3_env.read(key))
    data[-20] ^= 1
    s3_env.write(key, bytes(data))
    assert cli_main(["verify", url]) == 1
    out = capsys.readouterr().out
    assert f"BAD {url}" in out and f"s3://{s3_env.bucket}/{key}: sha256" in out
    assert cli_main(["rm", "toy", "--dry-run"]) == 0
    assert f"would remove {url}" in capsys.readouterr().out
    assert cli_main(["rm", "toy"]) == 0
    capsys.readouterr()
    assert cli_main(["ls"]) == 0
    assert capsys.readouterr().out.startswith("no caches under s3://")
    attempt_keys = [k for k in s3_env.objects() if "/train/" in k]  # an open dataset here reads them: kept, marked
    assert f"{prefix}/{metadata['attempt']}/_superseded.json" in attempt_keys
    assert ds[3]["id"] == 3
    del ds
    gc.collect()
    assert cli_main(["prune", "--max-staging-age", "0"]) == 0
    assert [k for k in s3_env.objects() if "/train/" in k] == []


def test_rm_leaves_the_lease_and_the_attempt_of_a_build_in_progress(s3_env, toy_builder, capsys):
    import socket
    import time

    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = _split_prefix(s3_env, ds)
    published = _metadata(s3_env, prefix)["attempt"]
    del ds
    gc.collect()
    building = "0123456789abcdef"  # a rebuild holds the lease and is uploading this attempt
    s3_env.write(f"{prefix}/_lease.json", json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                      "attempt": building, "token": "t",
                                                      "expires": time.time() + 300}).encode())
    s3_env.write(f"{prefix}/attempts/{building}/shard-00000.arrow", b"half uploaded")
    assert cli_main(["rm", "toy"]) == 0
    capsys.readouterr()
    assert s3_env.objects(prefix) == [f"{prefix}/_lease.json", f"{prefix}/attempts/{building}/shard-00000.arrow"]
    assert not any(k.startswith(f"{prefix}/{published}/") for k in s3_env.objects(prefix))


def test_cli_on_a_remote_root_takes_script_paths_and_cache_urls_as_on_a_local_root(s3_env, toy_builder, tmp_path,
                                                                                   capsys):
    """rm, info and verify name caches as on a local root: by a builder's script path (its caches only, not
    those of another script defining the same name), or by a cache's URL."""
    other = tmp_path / "elsewhere" / "toy.py"
    other.parent.mkdir()
    other.write_text(toy_builder.read_text().replace('"text": f"row {i}"', '"text": f"line {i}"'))
    ours = sds.load_dataset(str(toy_builder), split="train")
    theirs = sds.load_dataset(str(other), split="train")
    ours_url = f"s3://{s3_env.bucket}/{_split_prefix(s3_env, ours)}"
    theirs_url = f"s3://{s3_env.bucket}/{_split_prefix(s3_env, theirs)}"
    assert ours_url != theirs_url
    assert cli_main(["verify", str(other)]) == 0
    assert capsys.readouterr().out == f"ok  {theirs_url}\n"
    assert cli_main(["info", str(other), "--json"]) == 0
    assert [e["path"] for e in json.loads(capsys.readouterr().out)] == [theirs_url]
    assert cli_main(["rm", str(other), "--dry-run"]) == 0
    assert capsys.readouterr().out == f"would remove {theirs_url}\n"
    assert cli_main(["rm", ours_url, "--dry-run"]) == 0
    assert capsys.readouterr().out == f"would remove {ours_url}\n"
    assert cli_main(["rm", "toy"]) == 2  # a name no builder answers to, with caches from two scripts
    assert "caches of several builders are named 'toy'" in capsys.readouterr().err
    assert cli_main(["rm", str(other)]) == 0
    capsys.readouterr()
    assert cli_main(["ls", "--json"]) == 0
    assert [e["path"] for e in json.loads(capsys.readouterr().out)] == [ours_url]


def test_verify_of_a_builder_on_a_remote_root_reports_its_caches_whose_metadata_is_damaged(s3_env, toy_builder,
                                                                                           capsys):
    """As on a local root: a cache of the builder whose `_metadata.json` cannot be read is BAD (exit 1). Before,
    `verify toy` skipped it and printed 'ok' for the others, exit 0."""
    train = sds.load_dataset(str(toy_builder), split="train")
    test = sds.load_dataset(str(toy_builder), split="test")
    train_url, test_url = (f"s3://{s3_env.bucket}/{_split_prefix(s3_env, ds)}" for ds in (train, test))
    s3_env.write(f"{_split_prefix(s3_env, test)}/_metadata.json", b'{"layout": 3')
    assert cli_main(["verify", str(toy_builder)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"ok  {train_url}\nBAD {test_url}\n    {test_url}/_metadata.json: invalid cache metadata: "
                          "not JSON"), out
    assert cli_main(["verify", "--json", "toy"]) == 1
    assert [(e["path"], len(e["problems"])) for e in json.loads(capsys.readouterr().out)] == [(train_url, 0),
                                                                                              (test_url, 1)]


def test_a_split_list_with_an_unknown_name_builds_nothing_on_a_remote_root(s3_env, toy_builder, capsys):
    """As on a local root (a typo in 'train+tset' fails before 'train' is built). Before, a remote root built and
    published 'train', then failed on 'tset'."""
    from stable_datasets.errors import UnknownSplitError

    with pytest.raises(UnknownSplitError, match=r"builder 'toy' has no split 'tset'; splits are \['test', 'train'\]"):
        sds.load_dataset(str(toy_builder), split="train+tset")
    assert cli_main(["build", str(toy_builder), "--split", "train+tset"]) == 2
    assert "has no split 'tset'" in capsys.readouterr().err
    assert [k for k in s3_env.objects() if k.endswith("_metadata.json")] == []
    sds.load_dataset(str(toy_builder), split="train")
    with pytest.raises(UnknownSplitError):  # a published split is no reason to skip the check of the others
        sds.load_dataset(str(toy_builder), split="train+tset")
    assert len(sds.load_dataset(str(toy_builder), split="train+test")) == 100


def test_cli_errors_on_a_remote_root_are_one_line(s3_env, capsys):
    assert cli_main(["ls", "--cache-dir", "s3://no-such-bucket-y/cache"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bucket 'no-such-bucket-y' does not exist" in err


def test_remote_root_from_the_environment_in_docs_text():
    text = Path(__file__).parents[2].joinpath("docs", "object-storage-and-streaming.md").read_text()
    assert "## Streaming" in text and "If-None-Match" in text and "STABLE_DATASETS_LOCAL_CACHE_LIMIT" in text




def test_a_parallel_build_publishes_the_rows_of_a_one_process_build(s3_env, parts_builder, tmp_path):
    import pickle

    remote = sds.load_dataset(str(parts_builder), split="train", num_proc=2)
    local = sds.load_dataset(str(parts_builder), split="train", cache_dir=str(tmp_path / "one-process"))
    assert len(remote) == 1500 and rows_of(remote) == rows_of(local)
    builder = pickle.loads(pickle.dumps(sds.load_builder(str(parts_builder))))  # as Ray tasks receive it
    assert builder.root.store.get(f"{_split_prefix(s3_env, remote)}/_metadata.json") is not None


@pytest.mark.parametrize("storage_format", ["arrow", "lance"])
def test_dataloader_workers_read_a_remote_cache(s3_env, toy_builder, storage_format):
    import multiprocessing

    torch = pytest.importorskip("torch")
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)
    ds[0]  # handles open in the parent first: forked Lance workers read through a helper process
    loader = torch.utils.data.DataLoader(ds.with_format("torch", columns=["id"]), batch_size=8, num_workers=2,
                                         multiprocessing_context=multiprocessing.get_context("fork"))
    assert torch.cat([b["id"] for b in loader]).tolist() == list(range(50))


def test_map_of_a_remote_dataset_is_a_local_cache_that_eviction_leaves_alone(s3_env, toy_builder, monkeypatch):
    ds = sds.load_dataset(str(toy_builder), split="train")
    doubled = ds.map(lambda row: {"twice": row["id"] * 2})
    assert doubled[7]["twice"] == 14
    shard = doubled.cache_dirs[0] / doubled.cache_metadata[0].shards[0].path
    del doubled, ds
    gc.collect()
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_LIMIT", "0")
    removed = shard_cache.evict()
    assert removed and all("/attempts/" in str(p) and ".map-" not in str(p) for p in removed)
    assert shard.is_file()


def test_remote_metadata_cannot_point_outside_its_attempt(s3_env, toy_builder, tmp_path, monkeypatch):
    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = _split_prefix(s3_env, ds)
    metadata = _metadata(s3_env, prefix)
    shard = metadata["shards"][0]
    metadata["extra_files"] = [{**shard, "path": "../../../../escape.arrow"}]
    s3_env.write(f"{prefix}/_metadata.json", json.dumps(metadata).encode())
    _fresh_node(monkeypatch, tmp_path, "node-c")
    with pytest.raises(CacheError, match=r"extra file '\.\./\.\./\.\./\.\./escape\.arrow' leaves the cache's attempt"):
        sds.open_cache(f"s3://{s3_env.bucket}/{prefix}")
    assert not list(tmp_path.rglob("escape.arrow"))


def test_a_live_lease_makes_builders_wait_then_time_out_naming_its_holder(s3_env, toy_builder, monkeypatch):
    import time

    from stable_datasets.errors import LockTimeoutError
    from stable_datasets.storage.lease import Lease, lease_is_stale

    builder = sds.load_builder(str(toy_builder))
    directory = builder.cache_dir() / "train"
    prefix = builder.root.bucket_root.key(directory.relative_to(builder.cache_root).as_posix())
    holder = {"host": "node-elsewhere", "pid": 4242, "attempt": "00000000aa", "token": "t",
              "expires": time.time() + 600}
    s3_env.write(f"{prefix}/_lease.json", json.dumps(holder).encode())
    assert not lease_is_stale(holder)
    assert lease_is_stale({**holder, "expires": time.time() - 1})
    assert lease_is_stale({**holder, "host": __import__("socket").gethostname(), "pid": 2**22 + 7})  # dead here
    assert lease_is_stale({"garbage": True})
    monkeypatch.setenv("STABLE_DATASETS_LOCK_TIMEOUT", "0.5")
    with pytest.raises(LockTimeoutError, match=r"_lease.json \(held by pid 4242 on node-elsewhere, expires in"):
        sds.load_dataset(str(toy_builder), split="train")
    s3_env.write(f"{prefix}/_lease.json", json.dumps({**holder, "expires": time.time() - 1}).encode())
    assert len(sds.load_dataset(str(toy_builder), split="train")) == 50  # an expired lease is taken over
    with Lease(builder.root.store, prefix, timeout=1) as lease:
        assert json.loads(s3_env.read(f"{prefix}/_lease.json"))["token"] == lease.token
    assert f"{prefix}/_lease.json" not in s3_env.objects(prefix)


FLIP_METADATA = """
import json, random, sys, boto3, stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
bucket, prefix, url = sys.argv[1:4]
client = boto3.client("s3")
original = client.get_object(Bucket=bucket, Key=prefix + "/_metadata.json")["Body"].read()
rng = random.Random(0)
outcomes = {"refused": 0, "read": 0}
for trial in range(20):
    data = bytearray(original)
    for _ in range(3):
        data[rng.randrange(len(data))] = rng.randrange(256)
    client.put_object(Bucket=bucket, Key=prefix + "/_metadata.json", Body=bytes(data))
    try:
        ds = sds.open_cache(url)
        [ds[i] for i in range(len(ds))]
        outcomes["read"] += 1
    except StableDatasetsError:
        outcomes["refused"] += 1
    except Exception as exc:
        print("UNEXPECTED", trial, type(exc).__name__, exc)
        sys.exit(3)
print(json.dumps(outcomes))
"""


def test_flipped_bytes_in_remote_metadata_are_refused_or_harmless_never_a_crash(s3_env, toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train")
    prefix = _split_prefix(s3_env, ds)
    run = subprocess.run([sys.executable, "-c", FLIP_METADATA, s3_env.bucket, prefix, f"s3://{s3_env.bucket}/{prefix}"],
                         capture_output=True, text=True, timeout=200)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    outcomes = json.loads(run.stdout.strip().splitlines()[-1])
    assert sum(outcomes.values()) == 20 and outcomes["refused"] > 0
