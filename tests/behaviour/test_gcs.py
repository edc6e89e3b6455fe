"""Caches on `gs://`, against a GCS-compatible server on 127.0.0.1 (fake-gcs-server): the fsspec
store path (gcsfs) builds, publishes, loads, streams, verifies and refuses damaged objects the
way the S3 path does (tests/behaviour/test_object_storage.py)."""

from __future__ import annotations

import json

import pytest

import stable_datasets as sds
from stable_datasets.cli import main as cli_main
from stable_datasets.errors import CacheError
from tests.rows import plain, remote_split_prefix, rows_of

pytestmark = pytest.mark.timeout(240)


def _split_prefix(env, ds) -> str:
    return remote_split_prefix(env, ds, "gs")


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_build_and_load_on_gs_equal_a_local_cache(gcs_env, toy_builder, tmp_path, storage_format):
    options = gcs_env.storage_options
    remote = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format,
                              cache_dir=gcs_env.root, storage_options=options)
    local = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format,
                             cache_dir=str(tmp_path / "local-cache"))
    assert len(remote) == 50 and rows_of(remote) == rows_of(local)
    prefix = _split_prefix(gcs_env, remote)
    metadata = json.loads(gcs_env.read(f"{prefix}/_metadata.json"))
    assert metadata["num_rows"] == 50 and metadata["attempt"].startswith("attempts/")
    shards = {f"{prefix}/{metadata['attempt']}/{s['path']}" for s in metadata["shards"]}
    assert shards <= set(gcs_env.objects(prefix))
    assert f"{prefix}/_lease.json" not in gcs_env.objects(prefix)  # released after publishing


def test_a_second_node_reuses_the_gs_cache_without_generating(gcs_env, toy_builder, tmp_path, monkeypatch):
    counter = tmp_path / "counter"
    monkeypatch.setenv("TOY_COUNTER", str(counter))
    kwargs = dict(split="train", cache_dir=gcs_env.root, storage_options=gcs_env.storage_options)
    first = sds.load_dataset(str(toy_builder), **kwargs)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    again = sds.load_dataset(str(toy_builder), **kwargs)
    assert counter.read_text() == "x"  # generated once
    assert rows_of(again) == rows_of(first)
    assert str(again.cache_dirs[0]).startswith(str(tmp_path / "fresh-node"))


def test_streaming_from_gs_equals_streaming_the_local_cache(gcs_env, toy_builder, tmp_path):
    kwargs = dict(split="train", streaming=True)
    remote = sds.load_dataset(str(toy_builder), cache_dir=gcs_env.root, storage_options=gcs_env.storage_options,
                              **kwargs)
    local = sds.load_dataset(str(toy_builder), cache_dir=str(tmp_path / "local-cache"), **kwargs)
    assert [plain(r) for r in remote] == [plain(r) for r in local]
    assert [r["id"] for r in remote.shuffle(seed=5)] == [r["id"] for r in local.shuffle(seed=5)]


def test_a_flipped_byte_in_a_gs_shard_is_an_error_naming_the_object(gcs_env, toy_builder, tmp_path, monkeypatch):
    kwargs = dict(split="train", cache_dir=gcs_env.root, storage_options=gcs_env.storage_options)
    ds = sds.load_dataset(str(toy_builder), **kwargs)
    prefix = _split_prefix(gcs_env, ds)
    metadata = json.loads(gcs_env.read(f"{prefix}/_metadata.json"))
    key = f"{prefix}/{metadata['attempt']}/{metadata['shards'][0]['path']}"
    data = bytearray(gcs_env.read(key))
    data[len(data) // 2] ^= 0xFF
    gcs_env.write(key, bytes(data))
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "node-b"))
    with pytest.raises(CacheError, match=rf"gs://{gcs_env.bucket}/{key}: .*shard changed since it was published"):
        sds.load_dataset(str(toy_builder), **kwargs)
    assert not list((tmp_path / "node-b").rglob("shard-*.arrow"))


def test_cli_ls_verify_and_rm_on_a_gs_root(gcs_env, toy_builder, capsys, monkeypatch):
    """The command line takes no storage_options: they come from $STABLE_DATASETS_STORAGE_OPTIONS."""
    monkeypatch.setenv("STABLE_DATASETS_CACHE_DIR", gcs_env.root)
    monkeypatch.setenv("STABLE_DATASETS_STORAGE_OPTIONS", json.dumps(gcs_env.storage_options))
    ds = sds.load_dataset(str(toy_builder), split="train")
    url = f"gs://{gcs_env.bucket}/{_split_prefix(gcs_env, ds)}"
    assert cli_main(["ls", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["name"], e["split"], e["rows"], e["path"]) for e in listed] == [("toy", "train", 50, url)]
    assert cli_main(["verify", url]) == 0
    assert capsys.readouterr().out.startswith(f"ok  {url}")
    assert cli_main(["rm", "toy"]) == 0
    capsys.readouterr()
    assert cli_main(["ls"]) == 0
    assert capsys.readouterr().out.startswith("no caches under gs://")


@pytest.mark.parametrize("value, expected", [("{token: anon}", "is not valid JSON"),
                                             ('["anon"]', "must be a JSON object")])
def test_bad_storage_options_variable_is_a_clear_error(gcs_env, toy_builder, monkeypatch, value, expected):
    from stable_datasets.errors import ConfigurationError

    monkeypatch.setenv("STABLE_DATASETS_STORAGE_OPTIONS", value)
    with pytest.raises(ConfigurationError, match=rf"\$STABLE_DATASETS_STORAGE_OPTIONS {expected}"):
        sds.load_dataset(str(toy_builder), split="train", cache_dir=gcs_env.root)


def test_an_unreachable_gs_endpoint_fails_in_one_bounded_wait_naming_what_to_set(gcs_env, toy_builder, monkeypatch):
    """gcsfs retries a refused connection 6 times over about a minute by itself; the bucket check bounds it."""
    import socket

    from stable_datasets.errors import StorageError
    from stable_datasets.storage import fsspec_store
    from stable_datasets.storage.resolve import forget_stores

    monkeypatch.setattr(fsspec_store, "CHECK_TIMEOUT", 1.0)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    forget_stores()
    options = {**gcs_env.storage_options, "endpoint_url": f"http://127.0.0.1:{port}"}
    with pytest.raises(StorageError, match=rf"^gs://{gcs_env.bucket}: cannot reach the store \(no answer within 1 s\); "
                                           r"check its endpoint \(storage_options, or STORAGE_EMULATOR_HOST for "
                                           r"gcsfs\), the credentials and the network$"):
        sds.load_dataset(str(toy_builder), split="train", cache_dir=gcs_env.root, storage_options=options)
