"""The Arrow IPC layout: shards, options, reads; and caches past the kernel's map limit with bounded
per-process memory (issue 28.6)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.errors import CacheError, ConfigurationError, LockTimeoutError
from stable_datasets.layouts import arrow_shards
from tests.fixtures.many_shards import expected_row, write_arrow_cache


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


# -- many shards, bounded maps and gather copies (issue 28, part 6) ----------------------------------------

REPO = Path(__file__).resolve().parents[2]


def map_count() -> int:
    with open("/proc/self/maps", "rb") as fh:
        return sum(1 for _ in fh)


def expected_rows(indices) -> list[dict]:
    return [expected_row(int(i)) for i in indices]


def test_a_cache_of_70000_shards_opens_reads_iterates_and_verifies(fast_folder, tmp_path):
    """Past vm.max_map_count (65,530) shards: mapped all at once, the cache could not open and verify called it
    BAD (the console script aborted with std::bad_alloc). Now at most STABLE_DATASETS_MAX_OPEN_SHARDS (8192)
    files are mapped while every read works."""
    shards, per = 70_000, 2
    folder = write_arrow_cache(fast_folder / "many", shards=shards, rows_per_shard=per)
    # the console script checks the cache in another process meanwhile (2 cores: half the wall time)
    verify = subprocess.Popen([sys.executable, "-m", "stable_datasets.cli", "verify", str(folder), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        before = map_count()
        ds = sds.open_cache(folder)
        assert len(ds) == shards * per
        peak = map_count()
        rng = np.random.default_rng(0)
        picks = rng.integers(0, len(ds), 300)
        assert [ds[int(i)] for i in picks] == expected_rows(picks)  # row after row, each in another shard
        batch = rng.integers(0, len(ds), 1000)
        assert ds.__getitems__(batch.tolist()) == expected_rows(batch)  # ~1,000 shards, one map each
        assert ds.with_format("arrow")[batch.tolist()].column("id").to_pylist() == batch.tolist()
        peak = max(peak, map_count())
        ids = [row["id"] for row in ds]  # every shard in turn
        assert ids == list(range(shards * per))
        peak = max(peak, map_count())
        mapped, opened, held = ds.backends[0].open_shards()
        assert mapped == 8192 and opened >= shards  # all seen, never more than 8192 at once
        assert held <= arrow_shards.GATHER_MEMORY
        assert peak - before < 8192 + 300  # 1 map a shard, plus what the interpreter itself maps meanwhile
        out, err = verify.communicate(timeout=300)
    finally:
        verify.kill()
    assert verify.returncode == 0, err[-2000:]
    assert json.loads(out)[0]["problems"] == []


def test_reads_batch_by_shard_and_keep_at_most_the_setting_mapped(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_MAX_OPEN_SHARDS", "4")
    folder = write_arrow_cache(tmp_path / "c", shards=20, rows_per_shard=50, batches_per_shard=3)
    ds = sds.open_cache(folder)
    backend = ds.backends[0]
    assert backend.open_shards()[:2] == (4, 4)  # the first shards are mapped (and validated) at open
    indices = np.random.default_rng(1).permutation(1000)[:400]  # rows of all 20 shards, shuffled
    assert ds.__getitems__(indices.tolist()) == expected_rows(indices)
    mapped, opened, _ = backend.open_shards()
    assert (mapped, opened) == (4, 4 + 16)  # one map per shard touched (0-3 were open), not one per row
    table = ds.with_format("arrow")[indices.tolist()]
    assert table.column("text").to_pylist() == [f"row {i:07d}" for i in indices]
    assert backend.open_shards()[:2] == (4, 4 + 16 + 20)  # 16-19 were open, but closed for 12-15 by then
    assert backend.block_bounds().tolist()[:5] == [0, 16, 33, 50, 66]  # record batches of 16, 17, 17 rows
    assert [row["id"] for row in ds.select(range(990, 1000))] == list(range(990, 1000))


def test_numeric_columns_are_gathered_from_the_map_and_string_copies_stay_in_the_budget(tmp_path, monkeypatch):
    """A gather copied every numeric column of every shard it touched (8 bytes a row, no cap); now numbers
    come straight from the map (no copy) and the string offsets copies are dropped past GATHER_MEMORY."""
    budget = 10_000
    monkeypatch.setattr(arrow_shards, "GATHER_MEMORY", budget)
    folder = write_arrow_cache(tmp_path / "c", shards=20, rows_per_shard=1000, batches_per_shard=4)
    ds = sds.open_cache(folder)
    backend = ds.backends[0]
    rng = np.random.default_rng(2)
    peak = 0
    for _ in range(30):
        indices = rng.integers(0, len(ds), 256)
        assert ds.__getitems__(indices.tolist()) == expected_rows(indices)
        table = ds.with_format("arrow")[indices.tolist()]
        assert table.column("score").to_pylist() == [expected_row(int(i))["score"] for i in indices]
        peak = max(peak, backend.open_shards()[2])
    assert 0 < peak <= budget  # string offsets of a shard: (1000 + 4) * 4 bytes; 2 shards' fit, never more
    ids = np.arange(50_000, dtype=np.int64)
    numbers = sds.StableDataset.from_dict({"id": ids, "half": ids / 2, "small": (ids % 100).astype(np.int8)},
                                          cache_dir=str(tmp_path / "root"))
    indices = rng.permutation(50_000)[:5000]
    rows = numbers.__getitems__(indices.tolist())
    assert rows == [{"id": i, "half": i / 2, "small": i % 100} for i in indices.tolist()]
    table = numbers.with_format("arrow")[indices.tolist()]
    assert table.column("half").to_pylist() == (indices / 2).tolist()
    assert numbers.backends[0].open_shards()[2] == 0  # numbers gathered from the map: nothing copied at all


def test_gathers_of_a_compressed_cache_copy_numbers_within_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow_shards, "GATHER_MEMORY", 20_000)
    folder = write_arrow_cache(tmp_path / "c", shards=6, rows_per_shard=1000, batches_per_shard=3,
                               compression="lz4")
    ds = sds.open_cache(folder)
    backend = ds.backends[0]
    assert not backend.rows_in_place()
    rng = np.random.default_rng(3)
    peak = 0
    for _ in range(10):
        indices = rng.integers(0, len(ds), 300)
        assert ds.__getitems__(indices.tolist()) == expected_rows(indices)
        assert ds.with_format("arrow")[indices.tolist()].column("id").to_pylist() == indices.tolist()
        peak = max(peak, backend.open_shards()[2])
    assert 8000 <= peak <= 20_000  # a shard's int64 ids copied (8,000 bytes), never more than the budget


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 239), min_size=0, max_size=80), st.integers(1, 5), st.integers(0, 240),
       st.integers(0, 240))
def test_any_rows_in_any_order_equal_row_by_row(tmp_path_factory, indices, capacity, start, stop):
    folder = _small_cache(tmp_path_factory)
    os.environ["STABLE_DATASETS_MAX_OPEN_SHARDS"] = str(capacity)
    try:
        ds = sds.open_cache(folder)
        assert ds.__getitems__(indices) == expected_rows(indices)
        assert [ds[i] for i in indices[:5]] == expected_rows(indices[:5])
        assert ds.with_format("arrow")[indices].column("id").to_pylist() == indices
        assert ds[start:stop]["id"] == list(range(start, max(start, stop)))  # runs of record batches
        assert ds.backends[0].open_shards()[0] <= capacity
    finally:
        del os.environ["STABLE_DATASETS_MAX_OPEN_SHARDS"]


_SMALL: dict[str, Path] = {}


def _small_cache(factory) -> Path:
    if "c" not in _SMALL:
        _SMALL["c"] = write_arrow_cache(factory.mktemp("small") / "c", shards=12, rows_per_shard=20,
                                        batches_per_shard=2)
    return _SMALL["c"]


def test_a_bad_setting_is_refused_naming_it(tmp_path, monkeypatch):
    folder = write_arrow_cache(tmp_path / "c", shards=2, rows_per_shard=2)
    monkeypatch.setenv("STABLE_DATASETS_MAX_OPEN_SHARDS", "0")
    with pytest.raises(ConfigurationError, match="STABLE_DATASETS_MAX_OPEN_SHARDS='0' must be a whole number"):
        sds.open_cache(folder)[0]


def test_a_map_the_system_refuses_is_named_as_a_limit_not_as_damage(tmp_path):
    """mmap fails with ENOMEM at vm.max_map_count maps (or the address-space limit, which is what this test can
    set without root): the error names the limit and the setting, and does not call the cache corrupt."""
    big = tmp_path / "shard-00000.arrow"  # 256 MiB: its map needs more address space than the process may add
    rows = 32 << 20  # int64: 256 MiB
    script = textwrap.dedent(f"""
        import resource, sys
        import numpy as np, pyarrow as pa
        from stable_datasets.errors import ResourceLimitError
        from stable_datasets.layouts.arrow_shards import map_shard
        table = pa.table({{"id": np.arange({rows}, dtype=np.int64)}})
        with pa.OSFile({str(big)!r}, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        with open("/proc/self/status") as fh:
            size = next(int(line.split()[1]) for line in fh if line.startswith("VmSize")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (64 << 20), resource.RLIM_INFINITY))
        try:
            map_shard({str(big)!r})
        except ResourceLimitError as exc:
            print(exc)
            sys.exit(0)
        sys.exit(1)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    message = done.stdout
    assert message.startswith(f"{big}: the system refused to map this file (out of memory maps or address space")
    assert "vm.max_map_count" in message and "STABLE_DATASETS_MAX_OPEN_SHARDS=8192" in message
    assert "The cache is not damaged" in message and "corrupt" not in message


def test_a_damaged_shard_past_the_first_ones_is_refused_on_first_read_and_every_read_after(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow_shards, "MAP_AT_OPEN", 1)
    folder = write_arrow_cache(tmp_path / "c", shards=3, rows_per_shard=10)
    metadata = json.loads((folder / "_metadata.json").read_text())
    metadata["shards"][2]["num_rows"], metadata["num_rows"] = 11, 31  # the file holds 10
    (folder / "_metadata.json").write_text(json.dumps(metadata))
    ds = sds.open_cache(folder)
    assert ds[15] == expected_row(15)
    for _ in range(2):  # not served once it was refused
        with pytest.raises(CacheError, match=r"shard-00002\.arrow: holds 10 rows but _metadata\.json records 11"):
            ds[25]
    assert ds.__getitems__(list(range(20))) == expected_rows(range(20))
