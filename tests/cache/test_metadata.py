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


def _metadata(shards: int) -> CacheMetadata:
    return CacheMetadata(layout="arrow_shards", features={"x": {"_type": "Value", "dtype": "int64"}},
                         num_rows=3 * shards, fingerprint="f" * 16, split="train", cache_format_version=2,
                         shards=[ShardInfo(f"shard-{i:05d}.arrow", 3, 100 + i, f"{i:064x}") for i in range(shards)])


def test_a_cache_up_to_the_threshold_writes_its_shards_in_json_as_before(tmp_path, monkeypatch):
    """Every cache of up to STABLE_DATASETS_SHARD_LIST_FILE_ABOVE shards (10,000) is byte for byte what it was."""
    monkeypatch.setenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", "3")
    _metadata(3).write(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_metadata.json"]
    entries = [{"path": f"shard-{i:05d}.arrow", "num_rows": 3, "num_bytes": 100 + i, "sha256": f"{i:064x}"}
               for i in range(3)]
    assert (tmp_path / "_metadata.json").read_text() == json.dumps({
        "layout": "arrow_shards", "features": {"x": {"_type": "Value", "dtype": "int64"}}, "num_rows": 9,
        "shards": entries, "fingerprint": "f" * 16, "fingerprint_inputs": {}, "builder_name": "",
        "builder_source": "", "config_name": "", "version": "", "split": "train", "layout_options": {}, "info": {},
        "extra": {}, "extra_files": [], "cache_format_version": 2, "library_version": "", "created_at": "",
        "made_by": {}, "num_bytes": 303}, indent=2)
    monkeypatch.delenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE")
    (tmp_path / "ten-thousand").mkdir()
    _metadata(10_000).write(tmp_path / "ten-thousand")
    assert json.loads((tmp_path / "ten-thousand" / "_metadata.json").read_text())["shards"][-1]["path"] \
        == "shard-09999.arrow"


def test_past_the_threshold_the_shard_list_is_a_file_and_the_cache_format_3(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", "3")
    metadata = _metadata(4)
    metadata.write(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_metadata.json", "_shards.arrow"]
    data = json.loads((tmp_path / "_metadata.json").read_text())
    assert data["cache_format_version"] == 3  # stable-datasets before it: "shards must be a list, got dict"
    assert data["shards"]["count"] == 4 and data["num_bytes"] == 100 + 101 + 102 + 103
    read = CacheMetadata.read(tmp_path)
    assert list(read.shards) == _metadata(4).shards and read.to_dict() == metadata.to_dict()
    assert read.num_bytes == 406 and read.shard_bytes().tolist() == [100, 101, 102, 103]


def test_a_cache_format_newer_than_this_version_reads_is_refused_saying_so(tmp_path):
    data = _metadata(1).to_dict() | {"cache_format_version": 4}
    (tmp_path / "_metadata.json").write_text(json.dumps(data))
    with pytest.raises(CacheError, match=r"_metadata.json: invalid cache metadata: cache format 4 is newer than this "
                                         r"version of stable-datasets reads \(up to 3\): upgrade stable-datasets"):
        CacheMetadata.read(tmp_path)
