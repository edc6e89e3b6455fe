"""Builds that die: resumable from the shard journal, never half-published, always loadable."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError
from stable_datasets.layouts.open import verify_cache

SMALL_SHARDS = {"max_shard_size": 16 << 10, "batch_rows": 50}


def _build_in_subprocess(toy_builder, cache_root, rows, env, storage_format="arrow", options=None, timeout=120):
    script = textwrap.dedent(f"""
        import stable_datasets as sds
        ds = sds.load_dataset({str(toy_builder)!r}, split="train", rows={rows}, storage_format={storage_format!r},
                              layout_options={options or SMALL_SHARDS!r})
        print(len(ds))
    """)
    full_env = {**os.environ, "STABLE_DATASETS_CACHE_DIR": str(cache_root), **env}
    return subprocess.run([sys.executable, "-c", script], env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def test_killed_build_resumes_from_its_journal(toy_builder, cache_root):
    died = _build_in_subprocess(toy_builder, cache_root, 2000, {"TOY_KILL_AT": "1500"})
    assert died.returncode == -9
    staging = next(cache_root.rglob(".staging-train"))
    part = staging / ".part-00000"  # a one-process build is one part
    journal = (part / "_journal.jsonl").read_text().splitlines()
    assert len(journal) >= 2
    first_inode = (part / "shard-00000.arrow").stat().st_ino
    assert not list(cache_root.rglob("_metadata.json"))  # nothing published

    resumed = sds.load_dataset(str(toy_builder), split="train", rows=2000, layout_options=SMALL_SHARDS)
    assert (resumed.cache_dirs[0] / "shard-00000.arrow").stat().st_ino == first_inode  # kept, not rewritten
    assert not staging.exists()
    assert not (resumed.cache_dirs[0] / "_journal.jsonl").exists()
    assert verify_cache(resumed.cache_dirs[0]) == []

    fresh = sds.load_dataset(str(toy_builder), split="train", rows=2000,
                             layout_options={**SMALL_SHARDS, "max_shard_size": 1 << 30})
    assert resumed.to_arrow().drop_columns([]).equals(fresh.to_arrow())


def test_corrupted_journal_tail_is_rebuilt(toy_builder, cache_root):
    _build_in_subprocess(toy_builder, cache_root, 2000, {"TOY_KILL_AT": "1500"})
    staging = next(cache_root.rglob(".staging-train"))
    shards = sorted(staging.glob(".part-00000/shard-*.arrow"))
    shards[1].write_bytes(b"garbage")  # the second journaled shard no longer matches its checksum
    ds = sds.load_dataset(str(toy_builder), split="train", rows=2000, layout_options=SMALL_SHARDS)
    assert ds["id"] == list(range(2000))
    assert verify_cache(ds.cache_dirs[0]) == []


@pytest.mark.parametrize("storage_format", ["arrow", "lance", "parquet"])
def test_random_kills_never_break_loading(toy_builder, cache_root, storage_format):
    """A small version of tests/stress/crash_test.py: kill at random points, then load and verify."""
    rng = random.Random(7)
    options = {"arrow": SMALL_SHARDS, "lance": {"batch_rows": 50, "max_rows_per_file": 300},
               "parquet": {**SMALL_SHARDS, "row_group_bytes": 4096}}[storage_format]
    for _ in range(3):
        with contextlib.suppress(subprocess.TimeoutExpired):  # subprocess.run SIGKILLs the child on timeout
            _build_in_subprocess(toy_builder, cache_root, 1500, {"TOY_SLEEP": "0.0004"}, storage_format, options,
                                 timeout=rng.uniform(0.8, 2.5))
    ds = sds.load_dataset(str(toy_builder), split="train", rows=1500, storage_format=storage_format,
                          layout_options=options)
    assert ds["id"] == list(range(1500))
    assert verify_cache(ds.cache_dirs[0]) == []


def test_disk_full_fails_clearly_and_keeps_the_journal(toy_builder, cache_root, monkeypatch):
    from stable_datasets.layouts import arrow_shards

    real_write = arrow_shards.Writer.write
    calls = {"n": 0}

    def failing_write(self, batch):
        calls["n"] += 1
        if calls["n"] == 12:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, batch)

    monkeypatch.setattr(arrow_shards.Writer, "write", failing_write)
    with pytest.raises(CacheError, match="no space left on device while building toy 'train'.*nothing was published"):
        sds.load_dataset(str(toy_builder), split="train", rows=2000, layout_options=SMALL_SHARDS)
    assert not list(cache_root.rglob("_metadata.json"))
    staging = next(cache_root.rglob(".staging-train"))
    assert (staging / ".part-00000" / "_journal.jsonl").read_text().count("\n") >= 1
    monkeypatch.setattr(arrow_shards.Writer, "write", real_write)
    ds = sds.load_dataset(str(toy_builder), split="train", rows=2000, layout_options=SMALL_SHARDS)
    assert ds["id"] == list(range(2000))


def test_verify_reports_every_injected_corruption(tmp_path):
    from tests.stress.corruption_sweep import build_caches, sweep

    for name, directory in build_caches(tmp_path / "caches").items():
        detected, injected, misses = sweep(directory)
        assert injected >= 4 and detected == injected, (name, misses)


def test_killed_lance_build_resumes_from_its_journaled_fragments(toy_builder, cache_root):
    options = {"batch_rows": 50, "max_rows_per_file": 300}
    died = _build_in_subprocess(toy_builder, cache_root, 2000, {"TOY_KILL_AT": "1500"}, "lance", options)
    assert died.returncode == -9
    part = next(cache_root.rglob(".staging-train")) / ".part-00000"
    journal = [json.loads(line) for line in (part / "_journal.jsonl").read_text().splitlines()]
    assert len(journal) >= 3 and all(entry["note"]["fragment"]["physical_rows"] == 300 for entry in journal)
    first = part / journal[0]["path"]
    inode = first.stat().st_ino
    resumed = sds.load_dataset(str(toy_builder), split="train", rows=2000, storage_format="lance",
                               layout_options=options)
    assert (resumed.cache_dirs[0] / journal[0]["path"]).stat().st_ino == inode  # kept, not rewritten
    assert resumed["id"] == list(range(2000))
    assert verify_cache(resumed.cache_dirs[0]) == []
