"""STABLE_DATASETS_CACHE_LIMIT / cache_limit=: least recently used caches go after a publish past the
limit, never one in use, never the one just built; a later load rebuilds an evicted cache."""

from __future__ import annotations

import gc
import os
import shutil
import time
from pathlib import Path

import pytest
from loguru import logger

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.limit import configured_limit, parse_limit
from stable_datasets.errors import ConfigurationError
from tests.conftest import TOY_BUILDER


def test_sizes_and_shares_parse():
    assert parse_limit("200GB").num_bytes == 200 * 10**9
    assert parse_limit("1.5TiB").num_bytes == int(1.5 * 2**40)
    assert parse_limit("500000000").num_bytes == 500_000_000
    assert parse_limit("64 MiB").num_bytes == 64 * 2**20
    assert parse_limit("10kb").num_bytes == 10_000
    assert parse_limit(4096).num_bytes == 4096
    share = parse_limit("20%")
    assert share.share == 0.2 and share.resolve(__import__("pathlib").Path("/")) == int(
        shutil.disk_usage("/").total * 0.2)


@pytest.mark.parametrize(("text", "message"), [
    ("lots", "expected a size such as 200GB, 1.5TiB or 500000000, or a share of the disk such as 20%, got 'lots'"),
    ("0", "a cache limit must be at least 1 byte, got '0'"),
    ("120%", "a share of the disk must be in (0%, 100%], got '120%'"),
    ("5Gi", "unknown unit in '5Gi'; use B, KB, MB, GB, TB (or KiB, MiB, GiB, TiB)"),
])
def test_a_limit_that_cannot_be_parsed_is_refused_naming_it(text, message, monkeypatch):
    with pytest.raises(ValueError, match=None) as exc:
        parse_limit(text)
    assert str(exc.value) == message
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", text)
    with pytest.raises(ConfigurationError) as exc:
        configured_limit()
    assert str(exc.value) == (f"STABLE_DATASETS_CACHE_LIMIT={text!r} must be a size such as 200GB or a share of the "
                              f"disk such as 20% ({message})")
    with pytest.raises(ConfigurationError, match=r"^cache_limit='lots': expected a size"):
        configured_limit("lots")


def test_a_bad_limit_fails_before_anything_is_built(monkeypatch, cache_root):
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", "plenty")
    with pytest.raises(ConfigurationError, match="STABLE_DATASETS_CACHE_LIMIT='plenty'"):
        sds.StableDataset.from_dict({"x": [1, 2, 3]})
    assert not any(p.is_file() for p in cache_root.rglob("*") if p.name == "_metadata.json")


def _dataset(start: int) -> sds.StableDataset:
    return sds.StableDataset.from_dict({"x": list(range(start, start + 2000))})


def _folder(ds: sds.StableDataset):
    return published_path(ds.cache_dirs[0])


def test_least_recently_used_caches_go_first_and_open_ones_stay(monkeypatch):
    a, b, c = _dataset(0), _dataset(10_000), _dataset(20_000)
    size = sum(s.num_bytes for s in a.cache_metadata[0].shards)
    folders = {name: _folder(ds) for name, ds in zip("abc", (a, b, c))}
    del a, b
    gc.collect()
    time.sleep(0.02)
    _dataset(0)  # a is used again (a load that reuses it): b is now the least recently used
    gc.collect()
    lines: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO", filter=lambda r: "evicted" in
                      r["message"])
    try:
        monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", str(size * 3 + size // 2))
        d = _dataset(30_000)  # four caches, room for three and a half
    finally:
        logger.remove(sink)
    assert not folders["b"].exists()
    assert folders["a"].exists() and folders["c"].exists() and _folder(d).exists()
    assert len(lines) == 1 and lines[0].startswith(f"evicted {folders['b']} (")
    assert lines[0].endswith(f"the cache root is over its limit {size * 3 + size // 2} ({size * 3 + size // 2} "
                             "bytes)")
    # c and d are open in this process: never evicted, the least recently used of the others goes instead
    e = _dataset(40_000)  # (a limit leaving less than e's size beside c and d would refuse e: see below)
    assert folders["c"].exists() and _folder(d).exists() and _folder(e).exists()
    assert not folders["a"].exists()
    assert c["x"][:3] == [20_000, 20_001, 20_002]


def test_an_evicted_cache_is_rebuilt_by_the_next_load(write_builder, monkeypatch):
    script = write_builder("toy", TOY_BUILDER)
    first = sds.load_dataset(str(script), split="train", rows=20)
    rows = first["text"]
    folder = _folder(first)
    size = sum(s.num_bytes for s in first.cache_metadata[0].shards)
    del first
    gc.collect()
    sds.load_dataset(str(script), split="train", rows=21, cache_limit=size + 10)  # no room for both
    assert not folder.exists()
    again = sds.load_dataset(str(script), split="train", rows=20)
    assert _folder(again) == folder and again["text"] == rows and len(rows) == 20


def test_a_cache_larger_than_the_limit_is_kept_with_a_warning(write_builder, monkeypatch):
    script = write_builder("toy", TOY_BUILDER)  # a builder: its size is not known before it runs, so it is built
    lines: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    try:
        ds = sds.StableDataset.from_dict({"x": list(range(1000))}, )
        monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", "1")
        big = sds.load_dataset(str(script), split="train", rows=50)
    finally:
        logger.remove(sink)
    assert _folder(big).exists() and _folder(ds).exists()  # just built / open: neither may go
    assert any(line.startswith("the cache root ") and "over its limit 1 (1 bytes): what is left is in use or was "
               "just built" in line for line in lines)


def test_opening_a_cache_marks_its_last_use_and_listing_does_not(capsys, cache_root):
    from stable_datasets.cache.builds import current_build
    from stable_datasets.cache.limit import last_used
    from stable_datasets.cli import main

    folder = _folder(sds.StableDataset.from_dict({"x": [1, 2]}))
    gc.collect()
    metadata = current_build(folder) / "_metadata.json"
    week_ago = time.time() - 7 * 86400
    os.utime(metadata, (week_ago, week_ago))
    assert main(["ls"]) == 0 and main(["prune", "--dry-run"]) == 0
    capsys.readouterr()
    assert abs(last_used(folder) - week_ago) < 1  # listing is no use
    started = time.time()
    assert sds.open_cache(folder)["x"] == [1, 2]
    assert last_used(folder) >= started - 1 and metadata.stat().st_mtime == pytest.approx(week_ago, abs=1)


def _refusal(path, needed: int, limit: str, allowed: int, in_use: int = 0) -> str:
    held = f", of which {in_use} bytes are caches in use that cannot be evicted" if in_use else ""
    return (f"{path}: this build needs about {needed} bytes, which cannot fit under the cache limit {limit} "
            f"({allowed} bytes{held}); nothing was written. Raise the limit (cache_limit= or "
            "$STABLE_DATASETS_CACHE_LIMIT) or free space (close datasets in use, stable-datasets prune or rm)")


def test_an_in_memory_build_larger_than_the_limit_is_refused_before_anything_is_written(monkeypatch, cache_root):
    from stable_datasets.errors import CacheError

    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", "15999")
    with pytest.raises(CacheError) as exc:
        _dataset(0)  # 2000 int64 values: 16000 bytes of Arrow
    target = str(exc.value).split(": this build")[0]
    assert str(exc.value) == _refusal(target, 16_000, "15999", 15_999)
    assert target.startswith(str(cache_root)) and not any(cache_root.rglob("*"))  # not even a lock or a folder
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", "1MB")  # a build that fits still works
    assert _dataset(0)["x"][:2] == [0, 1]


def test_a_build_that_fits_only_if_caches_in_use_went_is_refused_until_they_are_released(monkeypatch):
    from stable_datasets.errors import CacheError

    a = _dataset(0)
    size = sum(s.num_bytes for s in a.cache_metadata[0].shards)
    assert size > 16_000
    limit = str(size + 10_000)  # room for the new build's 16000 bytes only if `a` (open) could go
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", limit)
    with pytest.raises(CacheError) as exc:
        _dataset(10_000)
    target = str(exc.value).split(": this build")[0]
    assert str(exc.value) == _refusal(target, 16_000, limit, size + 10_000, in_use=size)
    folder = _folder(a)
    assert not os.path.exists(target) and folder.exists()
    del a
    gc.collect()
    b = _dataset(10_000)  # released: it fits once `a` is evicted after the publish
    assert b["x"][:2] == [10_000, 10_001] and not folder.exists()


def test_a_column_rewrite_is_refused_by_its_source_size(monkeypatch):
    from stable_datasets.errors import CacheError

    ds = _dataset(0)
    size = sum(s.num_bytes for s in ds.cache_metadata[0].shards)
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", str(size - 1))
    with pytest.raises(CacheError) as exc:
        ds.cast_column("x", sds.Value("int32"))
    target = str(exc.value).split(": this build")[0]
    assert str(exc.value) == _refusal(target, size, str(size - 1), size - 1)
    assert ".map-" in target and not os.path.exists(target)


def test_a_migration_larger_than_the_limit_is_refused_and_writes_nothing(tmp_path, cache_root, monkeypatch):
    from stable_datasets import migrate
    from stable_datasets.errors import CacheError
    from tests.upstream_caches import write_upstream_cache

    upstream = write_upstream_cache(tmp_path / "up" / "toy_default_train_0123456789abcdef", [4, 4])
    needed = sum(p.stat().st_size for p in upstream.glob("*.arrow"))  # the upstream shards' bytes
    assert needed == sum(s.num_bytes for s in sds.open_cache(upstream).cache_metadata[0].shards) > 0
    dest = cache_root / "toy" / "default" / "0.0.0" / "f" / "train"
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", str(needed - 1))
    with pytest.raises(CacheError) as exc:
        migrate.migrate_cache(upstream, dest)
    assert str(exc.value) == _refusal(dest, needed, str(needed - 1), needed - 1)
    assert not cache_root.exists()
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", str(needed * 10))
    assert migrate.migrate_cache(upstream, dest).num_rows == 8


def test_the_root_of_a_folder_outside_the_cache_layout_is_none():
    from stable_datasets.cache.limit import root_of

    assert root_of(Path("/r/name/config/1.0.0/fingerprint/train")) == Path("/r")
    assert root_of(Path("/shallow/dest")) is None


def test_a_migration_outside_the_cache_root_leaves_folders_above_it_alone(tmp_path, cache_root, monkeypatch):
    """Root-wide work (shared files, eviction) needs a cache root: a --dest elsewhere gets none of it (before, the
    folder four levels above the destination was taken as a root and got a .shared-files folder)."""
    from stable_datasets import migrate
    from tests.upstream_caches import write_upstream_cache

    upstream = write_upstream_cache(tmp_path / "up" / "toy_default_train_0123456789abcdef", [4, 4])
    dest = tmp_path / "a" / "b" / "c" / "d" / "dest"
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", "1GB")
    assert migrate.migrate_cache(upstream, dest).num_rows == 8
    assert not (tmp_path / ".shared-files").exists() and not any(tmp_path.glob("**/.shared-files"))


_EVICT_ALL = ("import sys; from pathlib import Path; "
              "from stable_datasets.cache.limit import evict_over_limit, parse_limit; "
              "print(len(evict_over_limit(Path(sys.argv[1]), parse_limit(1), Path(sys.argv[1]) / 'none')))")


def _evict_from_another_process(root: Path) -> int:
    """What another process's eviction under a 1-byte limit removes from `root` (how many caches)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _EVICT_ALL, str(root)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    return int(done.stdout.strip().splitlines()[-1])


def test_a_cache_is_pinned_from_its_publish_until_its_open(write_builder, cache_root):
    """Between a publish (or a reuse check that found the cache) and the open that pins it, another process's
    eviction took the cache: the open then failed (or rebuilt). Now it stays until this process opens it."""
    script = write_builder("toy", TOY_BUILDER)
    builder = sds.load_builder(str(script), rows=20)
    directory = builder.prepare("train")["train"]  # published, not opened yet
    assert _evict_from_another_process(cache_root) == 0
    ds = sds.open_cache(directory)
    assert ds["text"] == [f"row {i}" for i in range(20)]
    del ds
    gc.collect()
    directory = builder.prepare("train")["train"]  # found published (the reuse check), not opened yet
    assert _evict_from_another_process(cache_root) == 0
    assert sds.open_cache(directory)["id"] == list(range(20))
    gc.collect()  # opened and released: nothing holds it any more, so it may go
    assert _evict_from_another_process(cache_root) == 1 and not directory.exists()


def test_an_eviction_leaves_a_cache_whole_when_a_reader_pinned_it_after_the_probe(cache_root, monkeypatch):
    """The evictor removed the link before it knew the build was unpinned: a reader that pinned the build between
    the probe and the removal kept its rows but nobody could open the cache by its path any more."""
    from stable_datasets.cache import limit
    from stable_datasets.cache.builds import BuildPin, current_build

    folder = _folder(sds.StableDataset.from_dict({"x": [1, 2]}))
    gc.collect()
    pin = BuildPin.hold(current_build(folder))  # a reader that pinned after the evictor's probe:
    monkeypatch.setattr(limit, "build_in_use", lambda build: False)  # the probe saw nobody
    assert limit.evict_over_limit(cache_root, parse_limit(1), cache_root / "none") == []
    assert folder.is_symlink() and sds.open_cache(folder)["x"] == [1, 2]
    pin.release()
    gc.collect()
    assert limit.evict_over_limit(cache_root, parse_limit(1), cache_root / "none") == [folder]
    assert not os.path.lexists(folder) and not list(folder.parent.glob("train*"))


_BUILDS = """
import gc, sys
import stable_datasets as sds
worker = int(sys.argv[1])
for i in range(12):
    start = (worker * 100 + i) * 10_000
    ds = sds.StableDataset.from_dict({"x": list(range(start, start + 2000))})
    assert ds["x"] == list(range(start, start + 2000)), (worker, i)
    del ds
    gc.collect()
print("ok")
"""


def test_three_processes_building_under_a_small_limit_each_get_their_rows(cache_root):
    """3 processes x 12 builds on one root with room for eight caches: evictions run all the time, and none of
    them takes a cache another process has just published and not yet opened."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "STABLE_DATASETS_CACHE_LIMIT": str(8 * 16_500)}
    workers = [subprocess.Popen([sys.executable, "-c", _BUILDS, str(w)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for w in range(3)]
    results = [w.communicate(timeout=600) for w in workers]
    assert [(w.returncode, out.strip().splitlines()[-1:]) for w, (out, _) in zip(workers, results)] == \
        [(0, ["ok"])] * 3, [err[-2000:] for _, err in results]
