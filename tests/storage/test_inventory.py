"""`verify` of a remote cache also checks this node's local copies of its shards (moto on 127.0.0.1)."""

from __future__ import annotations

import gc

import pytest

import stable_datasets as sds
from stable_datasets.cli import main as cli_main

pytestmark = pytest.mark.timeout(120)


def test_verify_finds_a_local_copy_changed_after_its_download_and_the_next_open_reads_it_again(
        s3_env, toy_builder, capsys):
    ds = sds.load_dataset(str(toy_builder), split="train")
    (local,) = [p for p in ds.cache_dirs[0].glob("shard-*.arrow")]  # this node's copy, kept from the build
    del ds
    gc.collect()
    data = local.read_bytes()
    assert data.count(b"row 34") == 1
    local.write_bytes(data.replace(b"row 34", b"row 99"))  # same size: one value changed
    assert sds.load_dataset(str(toy_builder), split="train")[34]["text"] == "row 99"  # trusted by its size
    gc.collect()
    assert cli_main(["verify", "toy"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("BAD s3://")
    assert (f"{local}: this node's copy of s3://{s3_env.bucket}/" in out and "changed after it was downloaded (sha256 "
            in out and "removed: the next open downloads it again" in out), out
    assert not local.exists()
    assert sds.load_dataset(str(toy_builder), split="train")[34]["text"] == "row 34"
    gc.collect()
    assert cli_main(["verify", "toy"]) == 0
    assert capsys.readouterr().out.startswith("ok  s3://")
