from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.errors import LockTimeoutError


def test_shards_rotate_by_bytes_and_read_back(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=300, layout_options={"max_shard_size": 8192})
    meta = json.loads((ds.cache_dirs[0] / "_metadata.json").read_text())
    assert len(meta["shards"]) > 2
    assert [s["path"] for s in meta["shards"]][:2] == ["shard-00000.arrow", "shard-00001.arrow"]
    assert ds["id"] == list(range(300))


def test_shards_are_plain_arrow_ipc_files(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=10)
    with pa.memory_map(ds.cache_files[0]["filename"]) as source:
        table = pa.ipc.open_file(source).read_all()
    assert table.column("text").to_pylist()[:2] == ["row 0", "row 1"]
    assert b"stable_datasets.features" in table.schema.metadata


def test_compression_option(toy_builder):
    plain = sds.load_dataset(str(toy_builder), split="train", rows=200)
    packed = sds.load_dataset(str(toy_builder), split="train", rows=200, layout_options={"compression": "zstd"})
    assert packed["grid"][5].tolist() == plain["grid"][5].tolist()
    size = os.path.getsize
    assert size(packed.cache_files[0]["filename"]) < size(plain.cache_files[0]["filename"])


@pytest.mark.parametrize("codec", [None, "none", "snappy", "gzip", "brotli", "lz4", "zstd"])
def test_every_parquet_codec_builds_with_the_default_level(toy_builder, codec):
    """The default compression_level (3) is not handed to codecs that refuse a level (pyarrow raises)."""
    plain = sds.load_dataset(str(toy_builder), split="train", rows=50)
    ds = sds.load_dataset(str(toy_builder), split="train", rows=50, storage_format="parquet",
                          layout_options={"compression": codec})
    assert ds["text"] == plain["text"] and ds["grid"][7].tolist() == plain["grid"][7].tolist()


def test_unknown_layout_option(toy_builder):
    with pytest.raises(ValueError, match=r"unknown layout option\(s\) \['shard_size'\]"):
        sds.load_dataset(str(toy_builder), split="train", layout_options={"shard_size": 1})


@pytest.mark.parametrize(("storage_format", "options", "message"), [
    ("arrow", {"max_shard_size": 0}, "max_shard_size must be a positive int, got 0"),
    ("arrow", {"batch_rows": -5}, "batch_rows must be a positive int, got -5"),
    ("arrow", {"compression": "gzip"}, r"compression must be one of \[None, 'lz4', 'zstd'\], got 'gzip'"),
    ("parquet", {"row_group_bytes": "1MB"}, "row_group_bytes must be a positive int, got '1MB'"),
    ("parquet", {"compression_level": 2.5}, "compression_level must be an int or None, got 2.5"),
    ("parquet", {"row_group_rows": 0}, "row_group_rows must be a positive int, got 0"),
    ("parquet", {"use_dictionary": "yes"}, r"use_dictionary must be one of \['strings', True, False\], got 'yes'"),
    ("lance", {"max_rows_per_group": True}, "max_rows_per_group must be a positive int, got True"),
])
def test_bad_layout_option_values_fail_before_building(toy_builder, tmp_path, storage_format, options, message):
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match=f"layout option {message}"):
        sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format, cache_dir=cache,
                         layout_options=options)
    assert not cache.exists() or list(cache.rglob("*")) == []  # resolved before any folder is made


def test_open_cache_rejects_read_options_the_layout_does_not_have(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=5)
    with pytest.raises(ValueError, match=r"unknown read option\(s\) \['window_length'\]; options are \[\]"):
        sds.open_cache(ds.cache_dirs[0], window_length=8)


def test_zero_row_split(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=0)
    assert len(ds) == 0 and ds["id"] == [] and list(ds) == []
    with pytest.raises(IndexError):
        ds[0]


def test_published_files_are_group_readable(toy_builder):
    old = os.umask(0o077)
    try:
        ds = sds.load_dataset(str(toy_builder), split="train", rows=5)
    finally:
        os.umask(old)
    directory = ds.cache_dirs[0]
    for path in [directory, *directory.iterdir()]:
        mode = path.stat().st_mode
        assert mode & stat.S_IRGRP, path
        if path.is_dir():
            assert mode & stat.S_IXGRP


def test_lock_timeout_names_the_holder(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from stable_datasets.cache.lock import exclusive_lock
        from pathlib import Path
        with exclusive_lock(Path({str(lock)!r})):
            print("held", flush=True)
            time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeoutError, match=f"waiting for lock {lock} \\(held by pid {holder.pid} on"):
            with exclusive_lock(lock, timeout=0.2):
                pass
        with pytest.raises(LockTimeoutError), exclusive_lock(lock, timeout=0.2, soft=False):
            pass
    finally:
        holder.kill()
        holder.wait()
    with exclusive_lock(lock, timeout=1):
        pass
    assert lock.exists()  # never deleted


def test_eight_concurrent_loads_build_once(toy_builder, tmp_path, cache_root):
    counter = tmp_path / "calls"
    script = textwrap.dedent(f"""
        import stable_datasets as sds
        ds = sds.load_dataset({str(toy_builder)!r}, split="train", rows=2000)
        print(len(ds), ds[1999]["id"])
    """)
    env = {**os.environ, "TOY_COUNTER": str(counter), "STABLE_DATASETS_CACHE_DIR": str(cache_root)}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(8)]
    outputs = [p.communicate(timeout=180)[0].strip() for p in procs]
    assert outputs == ["2000 1999"] * 8
    assert counter.read_text() == "x"


def test_soft_lock_builds(toy_builder, monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_SOFT_LOCK", "1")
    assert len(sds.load_dataset(str(toy_builder), split="train", rows=3)) == 3


def test_a_soft_lock_left_by_a_killed_build_on_this_node_is_taken_over(toy_builder, cache_root, monkeypatch):
    """docs/shared-cache-on-a-cluster.md: with filelock 4 or later a soft lock records its holder, and one whose
    process is gone from this node is taken over at once (a lock from another node still waits)."""
    import filelock

    if int(filelock.__version__.split(".")[0]) < 4:
        pytest.skip("filelock < 4 does not record the holder of a soft lock")
    monkeypatch.setenv("STABLE_DATASETS_SOFT_LOCK", "1")
    env = {**os.environ, "TOY_KILL_AT": "20"}
    killed = subprocess.run([sys.executable, "-c", f"import stable_datasets as sds; "
                             f"sds.load_dataset({str(toy_builder)!r}, split='train')"], env=env, timeout=120)
    assert killed.returncode == -9
    assert list(cache_root.rglob(".train.lock"))  # the killed build's soft lock is still there
    monkeypatch.setenv("STABLE_DATASETS_LOCK_TIMEOUT", "20")
    assert sds.load_dataset(str(toy_builder), split="train")["id"][-1] == 49


def test_lock_files_are_group_writable_under_any_umask(tmp_path):
    old = os.umask(0o077)
    try:
        lock = tmp_path / "shared.lock"
        with exclusive_lock(lock):
            pass
    finally:
        os.umask(old)
    for path in (lock, tmp_path / "shared.lock.owner"):
        assert path.stat().st_mode & (stat.S_IRGRP | stat.S_IWGRP) == stat.S_IRGRP | stat.S_IWGRP, path
