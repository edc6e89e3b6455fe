"""`_shards.arrow`: the shard list of a cache of many shards, mapped instead of parsed from `_metadata.json`.

Caches here are written by tests/fixtures/many_shards.py (hard-link-cheap shards) with the metadata written as a
build writes it, and STABLE_DATASETS_SHARD_LIST_FILE_ABOVE lowered to 100 so a few hundred shards take the path.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.cache.shard_list import PAGE_SHARDS, SHARD_LIST_FILE, ShardList, ShardNames, write_shard_list
from stable_datasets.errors import CacheError
from stable_datasets.layouts.open import verify_cache
from tests.fixtures.many_shards import expected_row, write_arrow_cache


@pytest.fixture(autouse=True)
def _threshold(monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", "100")


def _column_at(folder: Path, column: int, page: int = 0) -> int:
    """Where the values of `column` of page `page` lie in `_shards.arrow`."""
    with pa.memory_map(str(folder / SHARD_LIST_FILE)) as source:
        whole = source.read_buffer()
    batch = pa.ipc.open_file(whole).get_batch(page)
    return batch.column(column).buffers()[1].address - whole.address


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def _in_child(folder: Path, cwd: Path) -> tuple[str, list[str]]:
    """(what opening the cache and reading its last row says, what `stable-datasets verify` says), each in a
    process of its own: a damaged file must be an error there, never a crash."""
    code = ("import sys, stable_datasets as sds\n"
            "try:\n    print(sds.open_cache(sys.argv[1])[-1])\nexcept Exception as exc:\n    print(exc)\n")
    opened = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, cwd=cwd,
                            env=os.environ, timeout=120)
    assert opened.returncode == 0, opened.stderr[-2000:]
    verify = subprocess.run([sys.executable, "-m", "stable_datasets.cli", "verify", str(folder), "--json"],
                            capture_output=True, text=True, cwd=cwd, env=os.environ, timeout=120)
    return opened.stdout.strip(), json.loads(verify.stdout)[0]["problems"]


def test_a_cache_of_70000_shards_lists_them_in_a_mapped_file_and_round_trips(fast_folder, tmp_path):
    shards, per = 70_000, 2
    folder = write_arrow_cache(fast_folder / "many", shards=shards, rows_per_shard=per, publish_metadata=True)
    # the console script checks every shard in another process meanwhile (2 cores: half the wall time)
    verify = subprocess.Popen([sys.executable, "-m", "stable_datasets.cli", "verify", str(folder), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        _round_trip(folder, shards, per)
        out, err = verify.communicate(timeout=300)
    finally:
        verify.kill()
    assert verify.returncode == 0, err[-2000:]
    assert json.loads(out)[0]["problems"] == []


def _round_trip(folder: Path, shards: int, per: int) -> None:
    data = json.loads((folder / "_metadata.json").read_text())
    listed = (folder / SHARD_LIST_FILE).stat().st_size
    assert data["cache_format_version"] == 3
    assert data["shards"] == {"file": SHARD_LIST_FILE, "count": shards, "file_bytes": listed,
                              "sha256": data["shards"]["sha256"], "shard_bytes": data["num_bytes"],
                              "names": {"prefix": "shard-", "digits": 5, "suffix": ".arrow"}}
    assert (folder / "_metadata.json").stat().st_size < 2000  # was 13 MB of shard entries
    assert listed < shards * 50  # rows, bytes and sha256: 48 bytes a shard, paths follow from the index
    ds = sds.open_cache(folder)
    metadata = ds.cache_metadata[0]
    assert isinstance(metadata.shards, ShardList) and len(metadata.shards) == shards
    assert metadata.shards[0] == ShardInfo("shard-00000.arrow", per, metadata.shards[0].num_bytes,
                                           metadata.shards[0].sha256)
    assert metadata.shards[-1].path == "shard-69999.arrow" and metadata.shards[69_999].num_rows == per
    assert [s.path for s in metadata.shards[PAGE_SHARDS - 1:PAGE_SHARDS + 1]] == ["shard-65535.arrow",
                                                                                "shard-65536.arrow"]
    assert metadata.shard_rows().tolist() == [per] * shards and metadata.num_bytes == data["num_bytes"]
    assert len(ds) == shards * per
    assert ds[0] == expected_row(0) and ds[-1] == expected_row(shards * per - 1)
    picks = np.random.default_rng(0).integers(0, len(ds), 200).tolist()
    assert ds.__getitems__(picks) == [expected_row(i) for i in picks]
    across = range((PAGE_SHARDS - 50) * per, (PAGE_SHARDS + 50) * per)  # rows of the first page's shards and the next
    assert [row["id"] for row in ds.select(across)] == list(across)
    assert [s.path for s in metadata.shards] == [f"shard-{i:05d}.arrow" for i in range(shards)]


def test_a_pickled_dataset_carries_the_file_name_not_the_list(fast_folder):
    """Spawned DataLoader workers and Ray tasks receive the dataset pickled: its size must not grow with shards."""
    sizes = {}
    for shards in (101, 20_000):
        folder = write_arrow_cache(fast_folder / f"c{shards}", shards=shards, rows_per_shard=1, publish_metadata=True)
        ds = sds.open_cache(folder)
        blob = pickle.dumps(ds)
        sizes[shards] = len(blob)
        again = pickle.loads(blob)
        assert again[shards - 1] == expected_row(shards - 1) and len(again) == shards
        assert isinstance(again.cache_metadata[0].shards, ShardList)
    assert sizes[20_000] - sizes[101] <= 8  # the digits of the counts, nothing a shard
    assert sizes[20_000] < 1500
    small = write_arrow_cache(fast_folder / "json", shards=100, rows_per_shard=1, publish_metadata=True)
    assert not (small / SHARD_LIST_FILE).exists()  # 100 is not past the threshold: a list in JSON, as before
    assert len(pickle.dumps(sds.open_cache(small))) > sizes[20_000] + 100 * 100  # ~150 bytes a shard pickled


def test_a_damaged_count_is_found_on_open_and_by_verify_naming_the_file(tmp_path):
    folder = write_arrow_cache(tmp_path / "c", shards=300, rows_per_shard=2, publish_metadata=True)
    _flip(folder / SHARD_LIST_FILE, _column_at(folder, 0) + 8 * 7)  # shard 7 holds 2 rows: 66 now
    opened, problems = _in_child(folder, tmp_path)
    listed = folder / SHARD_LIST_FILE
    assert opened == (f"{listed}: damaged shard list: num_rows is 600 but the shards record 664 rows; the cache "
                      "cannot be trusted (rebuild it with download_mode='force_rebuild')")
    assert problems == [opened]


def test_a_flipped_checksum_byte_is_found_by_verify(tmp_path):
    """Opening checks the list's size, structure and sums; the checksums it holds are verify's to read."""
    folder = write_arrow_cache(tmp_path / "c", shards=300, rows_per_shard=2, publish_metadata=True)
    recorded = json.loads((folder / "_metadata.json").read_text())["shards"]["sha256"]
    _flip(folder / SHARD_LIST_FILE, _column_at(folder, 2) + 32 * 150)
    opened, problems = _in_child(folder, tmp_path)
    assert opened == str(expected_row(599))
    listed = folder / SHARD_LIST_FILE
    assert problems == [f"{listed}: sha256 {hashlib.sha256(listed.read_bytes()).hexdigest()}, expected {recorded}"]


@pytest.mark.parametrize("damage", ["truncated", "missing", "another cache's"])
def test_a_truncated_missing_or_swapped_list_is_an_error_naming_it(tmp_path, damage):
    folder = write_arrow_cache(tmp_path / "c", shards=300, rows_per_shard=2, publish_metadata=True)
    listed = folder / SHARD_LIST_FILE
    if damage == "truncated":
        listed.write_bytes(listed.read_bytes()[:-100])
        message = (f"{listed}: damaged shard list: {listed.stat().st_size} bytes, _metadata.json records "
                   f"{listed.stat().st_size + 100}; the cache cannot be trusted (rebuild it with "
                   "download_mode='force_rebuild')")
    elif damage == "missing":
        listed.unlink()
        message = (f"{listed}: shard list named in _metadata.json is missing; the cache cannot be trusted (rebuild "
                   "it with download_mode='force_rebuild')")
    else:  # as many shards, as many bytes of list: only the rows it lists differ
        other = write_arrow_cache(tmp_path / "o", shards=300, rows_per_shard=3, publish_metadata=True)
        ours, theirs = (json.loads((f / "_metadata.json").read_text()) for f in (folder, other))
        assert theirs["shards"]["file_bytes"] == ours["shards"]["file_bytes"]
        listed.write_bytes((other / SHARD_LIST_FILE).read_bytes())
        message = (f"{listed}: damaged shard list: its shards hold {theirs['num_bytes']} bytes, _metadata.json "
                   f"records {ours['num_bytes']}; the cache cannot be trusted (rebuild it with "
                   "download_mode='force_rebuild')")
    with pytest.raises(CacheError) as info:
        sds.open_cache(folder)
    assert str(info.value) == message
    assert verify_cache(folder)[0].startswith(str(listed))


def test_a_shard_of_another_size_is_found_when_first_read(tmp_path):
    """A stat per shard at every open would grow with the shards again: a cache of many checks its first and
    last shard at open, and every other when it is first mapped."""
    folder = write_arrow_cache(tmp_path / "c", shards=2000, rows_per_shard=2, publish_metadata=True)
    other = write_arrow_cache(tmp_path / "o", shards=1501, rows_per_shard=2, batches_per_shard=2)
    shard = folder / "shard-01500.arrow"  # the same rows, in another number of record batches: another size
    shard.write_bytes((other / shard.name).read_bytes())
    assert shard.stat().st_size != (folder / "shard-00000.arrow").stat().st_size
    ds = sds.open_cache(folder)
    assert ds[0] == expected_row(0)
    with pytest.raises(CacheError, match=rf"^{shard}: shard is \d+ bytes but _metadata.json records \d+; the cache "
                                         r"is truncated or corrupt"):
        ds[3000]
    assert any(p.startswith(f"{shard}: ") for p in verify_cache(folder))
    (folder / "shard-01999.arrow").unlink()
    with pytest.raises(CacheError, match=rf"^{folder}/shard-01999.arrow: shard listed in _metadata.json is missing$"):
        sds.open_cache(folder)


def test_paths_not_numbered_from_their_index_are_stored(tmp_path):
    shards = [ShardInfo(f"data/{i:03d}-{chr(97 + i % 26)}.lance", i, 10 + i, f"{i:064x}") for i in range(150)]
    assert ShardNames.of([s.path for s in shards]) is None
    metadata = CacheMetadata(layout="arrow_shards", features={}, num_rows=sum(range(150)), shards=list(shards))
    metadata.write(tmp_path, sync=False)
    data = json.loads((tmp_path / "_metadata.json").read_text())
    assert "names" not in data["shards"]
    assert pa.ipc.open_file(pa.memory_map(str(tmp_path / SHARD_LIST_FILE))).schema.names == [
        "num_rows", "num_bytes", "sha256", "path"]
    listed = ShardList(metadata.shards.ref, tmp_path, ShardInfo)
    assert list(listed) == shards and listed[149] == shards[149] and listed[-150] == shards[0]
    assert listed[10:13] == shards[10:13]
    with pytest.raises(IndexError):
        listed[150]


def test_shard_names_must_stay_a_plain_file_name(tmp_path):
    folder = write_arrow_cache(tmp_path / "c", shards=101, rows_per_shard=1, publish_metadata=True)
    data = json.loads((folder / "_metadata.json").read_text())
    data["shards"]["names"]["prefix"] = "../../etc/"
    (folder / "_metadata.json").write_text(json.dumps(data))
    with pytest.raises(CacheError, match=r"invalid cache metadata: shards.names must be \{'prefix', 'digits', "
                                         r"'suffix'\} of a plain file name, got"):
        sds.open_cache(folder)


def test_opening_reading_and_pickling_make_no_shard_entry_per_shard(fast_folder, monkeypatch):
    """The paths that need every shard (row starts, sums, stream bounds, the pickle) take the list's columns:
    a ShardInfo is made only for a shard asked for by name."""
    shards = 20_000
    folder = write_arrow_cache(fast_folder / "c", shards=shards, rows_per_shard=2, publish_metadata=True)
    made = []
    init = ShardInfo.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(ShardInfo, "__init__", counting)
    ds = sds.open_cache(folder)
    assert ds[0] == expected_row(0) and ds[-1] == expected_row(2 * shards - 1)
    assert ds.__getitems__([5, 39_000, 17]) == [expected_row(i) for i in (5, 39_000, 17)]
    assert ds.backends[0].shard_bounds()[-1] == 2 * shards and ds.cache_metadata[0].num_bytes > 0
    again = pickle.loads(pickle.dumps(ds))
    assert again[12_345] == expected_row(12_345)
    assert made == []  # none: names, sizes and rows come from the columns



def test_a_stored_path_leaving_the_cache_folder_is_refused(tmp_path):
    shards = [ShardInfo(f"data/{i}-x.lance", 1, 10, "ab" * 32) for i in range(101)]
    CacheMetadata(layout="arrow_shards", features={}, num_rows=101, shards=shards).write(tmp_path, sync=False)
    shards[57] = ShardInfo("data/../../../etc/passwd", 1, 10, "ab" * 32)
    data = json.loads((tmp_path / "_metadata.json").read_text())
    data["shards"] = write_shard_list(tmp_path, shards, sync=False).to_json()  # what another program could write
    (tmp_path / "_metadata.json").write_text(json.dumps(data))
    with pytest.raises(CacheError, match=r"_shards.arrow: damaged shard list: shard path 'data/../../../etc/passwd' "
                                         r"is not a relative path inside the cache folder"):
        CacheMetadata.read(tmp_path)


def test_spawned_dataloader_workers_receive_the_list_by_name(fast_folder):
    """A spawned worker unpickles the dataset and maps `_shards.arrow` itself (nothing of the list in the pickle)."""
    torch = pytest.importorskip("torch")
    folder = write_arrow_cache(fast_folder / "c", shards=5000, rows_per_shard=2, publish_metadata=True)
    ds = sds.open_cache(folder).with_format("torch")
    picks = [0, 4_321, 9_999, 7]
    loader = torch.utils.data.DataLoader(torch.utils.data.Subset(ds, picks), batch_size=2, num_workers=1,
                                         multiprocessing_context="spawn")
    assert [int(i) for batch in loader for i in batch["id"]] == picks


def test_stored_paths_read_across_pages(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_SHARD_LIST_FILE_ABOVE", "0")
    shards = [ShardInfo(f"d/{i}x", 1, 1, "ab" * 32) for i in range(PAGE_SHARDS * 2 + 10)]
    CacheMetadata(layout="arrow_shards", features={}, num_rows=len(shards), shards=shards).write(tmp_path, sync=False)
    metadata = CacheMetadata.read(tmp_path)
    assert metadata.shard_paths() == [s.path for s in shards]
    last = len(shards)
    for lo, hi in ((PAGE_SHARDS - 3, PAGE_SHARDS + 3), (5, 2 * PAGE_SHARDS + 1), (7, 7), (2 * PAGE_SHARDS, last)):
        assert metadata.shards.names(lo, hi) == [s.path for s in shards[lo:hi]]
    assert metadata.shards[PAGE_SHARDS] == shards[PAGE_SHARDS] and metadata.shard_path(last - 1) == "d/131081x"
