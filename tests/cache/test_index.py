"""The per-root index: a publish under a limit reads one index, not every cache's metadata; it is rebuilt from
the caches when missing or stale, and never trusted over them for a deletion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.cache import index as cache_index
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.inventory import find_caches
from stable_datasets.cache.limit import evict_over_limit, parse_limit
from stable_datasets.cache.metadata import CacheMetadata


def make(cache_root: Path, n: int, rows: int = 2000, first: int = 0) -> list[Path]:
    """`n` in-memory caches of `rows` rows each (different values: no two share a file)."""
    folders = []
    for i in range(first, first + n):
        ds = sds.StableDataset.from_dict({"x": list(range(i * rows, (i + 1) * rows))})
        folders.append(published_path(Path(ds.cache_dirs[0])))
    return folders


@pytest.fixture
def metadata_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    original = CacheMetadata.read.__func__

    def counting(cls, directory, *args, **kwargs):
        seen.append(Path(directory))
        return original(cls, directory, *args, **kwargs)

    monkeypatch.setattr(CacheMetadata, "read", classmethod(counting))
    return seen


def indexed_dirs(root: Path) -> set[str]:
    return {str(c.directory) for c in cache_index.indexed_caches(root)}


def test_the_index_lists_what_a_walk_finds_and_follows_publishes(cache_root):
    folders = make(cache_root, 3)
    assert not (cache_root / cache_index.INDEX_FILE).exists()  # nothing asked for it yet
    assert indexed_dirs(cache_root) == {str(e.directory) for e in find_caches(cache_root)} == set(map(str, folders))
    more = make(cache_root, 2, first=3)[0]  # appended by the publish, no walk
    lines = (cache_root / cache_index.INDEX_FILE).read_text().splitlines()
    assert json.loads(lines[0])["op"] == "header" and len(lines) == 1 + 3 + 2
    assert str(more) in indexed_dirs(cache_root) and len(indexed_dirs(cache_root)) == 5
    entry = next(c for c in cache_index.indexed_caches(cache_root) if c.directory == more)
    shards = CacheMetadata.read(more).shards
    assert entry.files == tuple((s.sha256, s.num_bytes) for s in shards) and entry.name == "in_memory"


def test_eviction_reads_only_the_caches_it_removes(cache_root, metadata_reads):
    folders = make(cache_root, 6)
    cache_index.rebuild(cache_root)
    size = sum(s.num_bytes for s in CacheMetadata.read(folders[0]).shards)
    metadata_reads.clear()
    assert evict_over_limit(cache_root, parse_limit(10 * size), folders[-1].parent) == []
    assert metadata_reads == []  # under the limit: the index alone
    evicted = evict_over_limit(cache_root, parse_limit(4 * size), folders[-1].parent)
    assert len(evicted) == 2 and metadata_reads == evicted  # one read per cache removed, none for the others
    assert indexed_dirs(cache_root) == {str(e.directory) for e in find_caches(cache_root)}
    assert len(find_caches(cache_root)) == 4


def test_a_cache_removed_by_hand_is_forgotten_not_a_failure(cache_root):
    folders = make(cache_root, 4)
    cache_index.rebuild(cache_root)
    size = sum(s.num_bytes for s in CacheMetadata.read(folders[0]).shards)
    shutil.rmtree(folders[1].parent)  # behind the index's back
    assert evict_over_limit(cache_root, parse_limit(3 * size), folders[-1].parent) == []  # 3 caches left fit
    assert str(folders[1]) not in indexed_dirs(cache_root)


def test_the_index_is_never_trusted_over_a_cache_for_a_deletion(cache_root):
    """An index that claims a cache holds far more than it does: the cache's own metadata decides, so
    nothing is removed that the real sizes do not call for."""
    folders = make(cache_root, 3)
    cache_index.rebuild(cache_root)
    size = sum(s.num_bytes for s in CacheMetadata.read(folders[0]).shards)
    path = cache_root / cache_index.INDEX_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines[1:]:
        line["files"] = [["f" * 64, 10**12]] if line["dir"].endswith(str(folders[0].relative_to(cache_root))) \
            else line["files"]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert evict_over_limit(cache_root, parse_limit(3 * size), folders[-1].parent) == []
    assert len(find_caches(cache_root)) == 3


def test_a_missing_stale_or_foreign_index_is_rebuilt_from_the_caches(cache_root, metadata_reads):
    folders = make(cache_root, 3)
    cache_index.rebuild(cache_root)
    path = cache_root / cache_index.INDEX_FILE
    header, *rest = path.read_text().splitlines()
    old = json.loads(header) | {"rebuilt": json.loads(header)["rebuilt"] - cache_index.MAX_AGE_SECONDS - 1}
    path.write_text(json.dumps(old) + "\n" + "\n".join(rest[:1]) + "\n")  # old, and it lost two caches
    metadata_reads.clear()
    assert indexed_dirs(cache_root) == set(map(str, folders)) and len(metadata_reads) == 3  # walked again
    path.write_text("not json\n")
    assert indexed_dirs(cache_root) == set(map(str, folders))
    path.unlink()
    assert indexed_dirs(cache_root) == set(map(str, folders))


def test_many_replaced_lines_are_compacted(cache_root, monkeypatch):
    folders = make(cache_root, 2)
    cache_index.rebuild(cache_root)
    metadata = CacheMetadata.read(folders[0])
    for _ in range(1100):
        cache_index.record_publish(cache_root, folders[0], metadata)
    assert len((cache_root / cache_index.INDEX_FILE).read_text().splitlines()) == 1 + 2 + 1100
    assert indexed_dirs(cache_root) == set(map(str, folders))
    assert len((cache_root / cache_index.INDEX_FILE).read_text().splitlines()) == 1 + 2


def test_ls_and_prune_refresh_the_index(cache_root, capsys):
    from stable_datasets.cli import main

    folders = make(cache_root, 2)
    (cache_root / cache_index.INDEX_FILE).write_text("stale\n")
    assert main(["ls", "--cache-dir", str(cache_root)]) == 0
    header = json.loads((cache_root / cache_index.INDEX_FILE).read_text().splitlines()[0])
    assert header["op"] == "header" and indexed_dirs(cache_root) == set(map(str, folders))
