"""Shard entries of `_metadata.json` read through the fast path: the same ShardInfo as the full check for
well-formed entries, the full check's message for any other; the collector paused only while parsing."""

from __future__ import annotations

import gc
import json

import pytest

import stable_datasets  # noqa: F401  (installs the layout check the metadata read needs)
from stable_datasets.cache.metadata import CacheMetadata, MetadataProblem, ShardInfo
from stable_datasets.errors import CacheError

SHA = "ab" * 32


def _entry(**changes):
    return {"path": "shard-00000.arrow", "num_rows": 3, "num_bytes": 10, "sha256": SHA, **changes}


def test_well_formed_entries_come_out_as_the_full_check_makes_them():
    entries = [_entry(path=f"shard-{i:05d}.arrow", num_rows=i) for i in range(5)] + [_entry(extra="kept out")]
    fast = ShardInfo.checked_list(entries, "shards", inside=True)
    assert fast == [ShardInfo.checked(e, f"shards[{i}]", inside=True) for i, e in enumerate(entries)]
    assert ShardInfo.checked_list([_entry(path="../videos/x.mp4")], "extra_files", inside=False)[0].path \
        == "../videos/x.mp4"


@pytest.mark.parametrize(("entry", "message"), [
    (_entry(num_rows=True), "shards[1].num_rows must be a non-negative integer, got True"),
    (_entry(num_bytes=-1), "shards[1].num_bytes must be a non-negative integer, got -1"),
    (_entry(sha256="AB" * 32), f"shards[1].sha256 must be 64 hex digits, got '{'AB' * 32}'"),
    (_entry(path="a/../../b"), "shards[1].path 'a/../../b' leaves the cache directory"),
    (_entry(path="/etc/passwd"), "shards[1].path must be a relative file name, got '/etc/passwd'"),
    (_entry(path=""), "shards[1].path must be a relative file name, got ''"),
    ({"path": "x", "num_rows": 1, "num_bytes": 1}, "shards[1] has no 'sha256'"),
    (["not", "a", "dict"], "shards[1] must be an object, got list"),
])
def test_an_entry_the_fast_path_refuses_is_named_by_the_full_check(entry, message):
    with pytest.raises(MetadataProblem) as info:
        ShardInfo.checked_list([_entry(), entry], "shards", inside=True)
    assert str(info.value) == message


def test_a_path_with_two_dots_in_a_name_is_fine():
    assert ShardInfo.checked_list([_entry(path="a..b/shard..arrow")], "shards", inside=True)[0].path \
        == "a..b/shard..arrow"


def test_the_collector_runs_again_after_a_read_that_fails(tmp_path):
    bad = {"layout": "arrow_shards", "features": {}, "num_rows": 1, "shards": [_entry(num_rows=-1)]}
    (tmp_path / "_metadata.json").write_text(json.dumps(bad))
    assert gc.isenabled()
    with pytest.raises(CacheError, match=r"shards\[0\]\.num_rows must be a non-negative integer, got -1"):
        CacheMetadata.read(tmp_path)
    assert gc.isenabled()
