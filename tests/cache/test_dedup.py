"""Identical shard files in different caches of a local root are hard links to one stored copy."""

from __future__ import annotations

import gc
import json
import os

import stable_datasets as sds
from stable_datasets.cache.dedup import SHARED_DIR, share_identical_files, unshared_files
from stable_datasets.cli import main
from tests.conftest import TOY_BUILDER


def run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def _shards(ds: sds.StableDataset) -> list:
    return [ds.cache_dirs[0] / s.path for s in ds.cache_metadata[0].shards]


def test_a_version_bump_that_writes_the_same_rows_stores_them_once(capsys, write_builder, cache_root):
    script = write_builder("toy", TOY_BUILDER)
    first = sds.load_dataset(str(script), split="train", rows=30)
    write_builder("toy", TOY_BUILDER.replace('VERSION = sds.Version("1.0.0")', 'VERSION = sds.Version("1.0.1")'))
    second = sds.load_dataset(str(script), split="train", rows=30)
    assert first.cache_dirs[0] != second.cache_dirs[0]  # two caches ...
    pairs = list(zip(_shards(first), _shards(second)))
    assert pairs and all(os.path.samefile(a, b) for a, b in pairs)  # ... one copy of each file
    assert all(a.stat().st_nlink == 3 for a, _ in pairs)  # both caches and the store
    size = sum(s.num_bytes for s in first.cache_metadata[0].shards)
    summary = json.loads(run(capsys, "--json", "ls", "--summary"))
    assert summary["total"]["caches"] == 2 and summary["total"]["bytes"] == size  # counted once
    expected = first["text"]
    summary_shards = first.cache_metadata[0].shards
    run(capsys, "rm", str(first.cache_dirs[0].parent / "train"))
    del first
    gc.collect()
    assert second["text"] == expected  # removing one cache never breaks another
    assert sds.open_cache(second.cache_dirs[0])["id"][:3] == [0, 1, 2]
    assert unshared_files(cache_root) == []  # the second cache still uses every stored copy
    run(capsys, "rm", "toy")
    del second
    gc.collect()
    stored = [cache_root / SHARED_DIR / s.sha256[:2] / s.sha256 for s in summary_shards]
    out = run(capsys, "prune").splitlines()  # the build rm left (it was open) goes, then its stored copies
    assert sorted(line for line in out if "stored copy" in line) == sorted(
        f"removed stored copy no cache uses: {p}" for p in stored)
    assert not any(p.exists() for p in stored) and unshared_files(cache_root) == []


def test_a_different_file_with_the_same_name_is_not_shared(tmp_path):
    root = tmp_path / "root"
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "shard.arrow").write_bytes(b"abc")
    digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256 of b"abc"
    assert share_identical_files(root, staging, [("shard.arrow", 3, digest)]) == 0  # the first copy is stored
    assert (root / SHARED_DIR / digest[:2] / digest).read_bytes() == b"abc"
    again = tmp_path / "again"
    again.mkdir()
    (again / "shard.arrow").write_bytes(b"abc")
    assert share_identical_files(root, again, [("shard.arrow", 3, digest)]) == 3  # linked, 3 bytes saved
    assert os.path.samefile(again / "shard.arrow", root / SHARED_DIR / digest[:2] / digest)
    other = tmp_path / "other"
    other.mkdir()
    (other / "shard.arrow").write_bytes(b"abcd")
    assert share_identical_files(root, other, [("shard.arrow", 4, digest)]) == 0  # a size mismatch: kept as is
    assert (other / "shard.arrow").read_bytes() == b"abcd"


def test_a_stored_copy_damaged_in_place_is_not_linked_into_new_caches(tmp_path):
    root = tmp_path / "root"
    digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256 of b"abc"
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "shard.arrow").write_bytes(b"abc")
    share_identical_files(root, tmp_path / "first", [("shard.arrow", 3, digest)])
    stored = root / SHARED_DIR / digest[:2] / digest
    stored.write_bytes(b"xyz")  # damaged in place: the first cache's file is the same inode
    assert share_identical_files(root, tmp_path / "second", [("shard.arrow", 3, digest)]) == 0
    assert (tmp_path / "second" / "shard.arrow").read_bytes() == b"abc"
    assert stored.read_bytes() == b"abc" and os.path.samefile(stored, tmp_path / "second" / "shard.arrow")


def test_caches_of_many_shards_share_identical_shards_and_are_listed_and_verified(capsys, tmp_path, monkeypatch,
                                                                                 cache_root):
    """A shard list in `_shards.arrow` (past STABLE_DATASETS_SHARD_LIST_FILE_ABOVE shards) changes nothing of
    the links, `ls`, `verify` and `rm`: the list file is each cache's own, its shards are shared."""
    monkeypatch.setenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", "5")
    rows = "".join(json.dumps({"i": i}) + "\n" for i in range(30))
    (tmp_path / "a.jsonl").write_text(rows)
    (tmp_path / "b.jsonl").write_text(rows)
    first, second = (sds.load_dataset("json", data_files=str(tmp_path / name), split="train",
                                      layout_options={"max_shard_size": 1}) for name in ("a.jsonl", "b.jsonl"))
    assert first.cache_dirs[0] != second.cache_dirs[0]
    assert all((ds.cache_dirs[0] / "_shards.arrow").is_file() for ds in (first, second))
    pairs = list(zip(_shards(first), _shards(second)))
    assert len(pairs) == 30 and all(os.path.samefile(a, b) for a, b in pairs)
    summary = json.loads(run(capsys, "--json", "ls", "--summary"))
    assert summary["total"]["caches"] == 2 and summary["total"]["bytes"] == first.cache_metadata[0].num_bytes
    verified = json.loads(run(capsys, "--json", "verify", str(cache_root)))  # a folder of caches: both
    assert len(verified) == 2 and [v["problems"] for v in verified] == [[], []]
    run(capsys, "rm", str(first.cache_dirs[0].parent / "train"))
    del first
    gc.collect()
    assert second["i"] == list(range(30))
