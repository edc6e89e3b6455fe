"""STABLE_DATASETS_CACHE_LIMIT / cache_limit=: least recently used caches go after a publish past the
limit, never one in use, never the one just built; a later load rebuilds an evicted cache."""

from __future__ import annotations

import gc
import os
import shutil
import time

import pytest
from loguru import logger

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.limit import configured_limit, parse_limit
from stable_datasets.errors import ConfigurationError

from ..conftest import TOY_BUILDER


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
    # c is open in this process: it is never evicted, the least recently used of the others goes instead
    monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", str(size * 2 + size // 2))
    e = _dataset(40_000)
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


def test_a_cache_larger_than_the_limit_is_kept_with_a_warning(monkeypatch):
    lines: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    try:
        ds = sds.StableDataset.from_dict({"x": list(range(1000))}, )
        monkeypatch.setenv("STABLE_DATASETS_CACHE_LIMIT", "1")
        big = sds.StableDataset.from_dict({"x": list(range(5000))})
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
