"""The duplicate-key check across parts, range by range: every range position finds its duplicate, and the key
named is exactly the one a single merge of every part names (the first in build order), whatever the parts,
the number of ranges, or how each part was cut."""

from __future__ import annotations

import json
import types

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.storage.resolve import open_store
from stable_datasets.urls import ObjectURL
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.key_check import (
    MAX_KEY_RANGES,
    StoredKeyFiles,
    check_range,
    find_duplicate_key,
    key_ranges,
    plan_range_checks,
)
from stable_datasets.write.keys import (
    DIGEST_END,
    KeyLog,
    RangedKeyWriter,
    key_marker,
    merge_sorted,
    range_bounds,
    write_sorted_keys,
)
from stable_datasets.write.parts import KEY_RANGES_DIR, KEYS_FILE, PartResult, part_dir
from stable_datasets.write.remote_parts import RemoteParts, finished_remote_part, remote_part_writer


def _ranged_part(staging, index, digests, texts, ranges, batch_rows=3) -> PartResult:
    """A finished keyed part whose keys (given digests, texts; orders 0..n-1) are cut into `ranges` files."""
    folder = part_dir(staging, index)
    writer = RangedKeyWriter(folder / KEY_RANGES_DIR, ranges, batch_rows)
    write_sorted_keys(writer, np.asarray(digests, np.uint64), np.arange(len(digests), dtype=np.int64),
                      pa.array(texts, pa.string()), batch_rows)
    return PartResult(index=index, num_rows=len(digests), shards=[], has_keys=True, key_counts=writer.counts)


def _single_merge(staging, parts: list[PartResult]) -> str | None:
    """The check as it was: one merge of every part's whole key file (its ranges read in order)."""
    files, offset = [], 0
    for part in parts:
        whole = staging / f"whole-{part.index}.arrow"
        tables = []
        for path in part.key_files(staging):
            with pa.memory_map(str(path)) as source:
                tables.append(pa.ipc.open_file(source).read_all())
        table = pa.concat_tables(tables) if tables else pa.table({"digest": pa.array([], pa.uint64()),
                                                                  "order": pa.array([], pa.int64()),
                                                                  "key": pa.array([], pa.string())})
        write_sorted_keys(whole, table.column("digest").to_numpy(), table.column("order").to_numpy(),
                          table.column("key").combine_chunks())
        files.append((whole, offset))
        offset += sum(part.key_counts)
    found = merge_sorted(files, None, staging / "single", merge_rows=8)
    return None if found is None else json.loads(found.key)


def test_range_files_cut_at_the_bounds_and_read_in_order_are_the_sorted_file(tmp_path):
    bounds = range_bounds(4)
    assert bounds == [0, 1 << 62, 1 << 63, 3 << 62, DIGEST_END]  # the top two bits
    digests = sorted({0, 1, bounds[1] - 1, bounds[1], bounds[2] - 1, bounds[2], bounds[3], DIGEST_END - 1})
    part = _ranged_part(tmp_path, 0, digests, [f"k{d}" for d in digests], 4)
    assert part.key_counts == [3, 2, 1, 2]
    for index, path in enumerate(part.key_files(tmp_path)):
        with pa.memory_map(str(path)) as source:
            got = pa.ipc.open_file(source).read_all().column("digest").to_pylist()
        assert all(bounds[index] <= d < bounds[index + 1] for d in got)
    read = []
    for path in part.key_files(tmp_path):
        with pa.memory_map(str(path)) as source:
            read += pa.ipc.open_file(source).read_all().column("digest").to_pylist()
    assert read == digests


def test_a_range_without_keys_has_no_file(tmp_path):
    part = _ranged_part(tmp_path, 0, [5, 6], ["a", "b"], 8)
    assert part.key_counts == [2, 0, 0, 0, 0, 0, 0, 0]
    assert [p.name for p in (part_dir(tmp_path, 0) / KEY_RANGES_DIR).iterdir()] == ["00000.arrow"]


def test_keys_out_of_digest_order_are_refused(tmp_path):
    writer = RangedKeyWriter(tmp_path / "r", 2)
    batch = pa.record_batch([pa.array([DIGEST_END - 1], pa.uint64()), pa.array([0], pa.int64()), pa.array(["a"])],
                            names=["digest", "order", "key"])
    writer.write_batch(batch)
    with pytest.raises(ValueError, match="sorted by digest"):
        writer.write_batch(batch.slice(0, 1).set_column(0, "digest", pa.array([1], pa.uint64())))


BOUNDS = range_bounds(4)
POSITIONS = [0, 1, BOUNDS[1] - 1, BOUNDS[1], BOUNDS[2] - 1, BOUNDS[2], BOUNDS[3] - 1, BOUNDS[3], DIGEST_END - 1]


@pytest.mark.parametrize("digest", POSITIONS)
def test_a_duplicate_across_parts_is_found_in_every_range_position(tmp_path, digest):
    """First and last range, either side of each bound: the key is named, by the job of its range only."""
    rng = np.random.default_rng(digest % 1000)
    parts = []
    for index in range(3):
        digests = [int(d) for d in rng.integers(0, DIGEST_END - 1, 20, dtype=np.uint64)]
        texts = [f"p{index}-{i}" for i in range(20)]
        if index in (1, 2):  # part 1's row 7 and part 2's row 3 hold the same key
            row = 7 if index == 1 else 3
            digests[row], texts[row] = digest, '"same"'
        parts.append(_ranged_part(tmp_path, index, digests, texts, 4))
    assert find_duplicate_key(tmp_path, parts) == "same"
    checks = plan_range_checks(tmp_path, parts)
    found = {c.index: check_range(c, tmp_path / "scratch") for c in checks}
    expected = next(r for r in range(4) if BOUNDS[r] <= digest < BOUNDS[r + 1])
    assert {r for r, d in found.items() if d is not None} == {expected}
    assert found[expected].order == 40 + 3  # part 2's row 3: the later copy, in build order
    assert _single_merge(tmp_path, parts) == "same"


def test_a_digest_collision_with_different_texts_is_no_duplicate(tmp_path):
    digest = BOUNDS[2]  # on a bound, in many rows of two parts
    parts = [_ranged_part(tmp_path, i, [digest] * 10, [f'"p{i}-{n}"' for n in range(10)], 4) for i in range(2)]
    assert find_duplicate_key(tmp_path, parts) is None
    parts.append(_ranged_part(tmp_path, 2, [digest] * 10, ['"p0-4"' if n == 6 else f'"p2-{n}"' for n in range(10)],
                              4))
    assert find_duplicate_key(tmp_path, parts) == "p0-4"


def test_parts_cut_their_keys_into_a_range_per_worker_up_to_a_limit():
    assert MAX_KEY_RANGES == 256
    assert [key_ranges(JobRunner(num_proc=n)) for n in (1, 2, 7, 256, 1000)] == [1, 2, 7, 256, 256]
    assert key_ranges(JobRunner()) == 1  # one process: one range, the check runs in it as before


def test_a_range_only_one_part_reaches_is_no_job(tmp_path):
    low = _ranged_part(tmp_path, 0, [1, 2, 3], ["a", "b", "c"], 4)
    high = _ranged_part(tmp_path, 1, [DIGEST_END - 3, DIGEST_END - 2], ["d", "e"], 4)
    assert plan_range_checks(tmp_path, [low, high]) == []
    assert find_duplicate_key(tmp_path, [low, high]) is None
    assert find_duplicate_key(tmp_path, [low]) is None  # one part: nothing to check across


def _keyed_parts(staging, keys_per_part: list[list], ranges: list[int], memory_keys: int) -> list[PartResult]:
    """Parts as write_part makes them: each part's keys through a KeyLog into its ranges."""
    parts = []
    for index, keys in enumerate(keys_per_part):
        log = KeyLog(staging / f"runs-{index}", memory_keys=memory_keys, batch_rows=2, fan_in=2)
        for key in keys:
            assert log.add(key)
        writer = RangedKeyWriter(part_dir(staging, index) / KEY_RANGES_DIR, ranges[index % len(ranges)], 2)
        assert log.finish(writer) is None
        parts.append(PartResult(index=index, num_rows=len(keys), shards=[], has_keys=True, key_counts=writer.counts))
    return parts


def _first_across(keys_per_part: list[list]):
    seen = set()
    for keys in keys_per_part:
        for key in keys:
            if key_marker(key) in seen:
                return key
        seen.update(key_marker(k) for k in keys)
    return None


part_keys = st.lists(st.one_of(st.integers(0, 60), st.text(max_size=2)), max_size=25, unique_by=key_marker)


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(part_keys, min_size=2, max_size=5), ranges=st.lists(st.integers(1, 9), min_size=1, max_size=3),
       memory_keys=st.integers(1, 30))
def test_the_ranged_check_names_the_key_the_single_merge_names(tmp_path_factory, keys, ranges, memory_keys):
    """Random keys, parts and ranges (parts cut alike, or differently: a part an earlier attempt of another
    parallelism finished): the key named is the single merge's, the first repeat in build order."""
    staging = tmp_path_factory.mktemp("staging")
    parts = _keyed_parts(staging, keys, ranges, memory_keys)
    expected = _first_across(keys)
    found = find_duplicate_key(staging, parts)
    assert json.dumps(found) == json.dumps(expected)
    assert json.dumps(_single_merge(staging, parts)) == json.dumps(expected)
    assert not (staging / ".keys").exists()  # the jobs' scratch is removed


def test_range_jobs_in_forked_processes_name_the_same_key(tmp_path):
    keys = [[f"k{i}" for i in range(p * 1000, p * 1000 + 1200)] for p in range(4)]  # each part repeats 200 of the next
    parts = _keyed_parts(tmp_path, keys, [3], memory_keys=500)
    assert len(plan_range_checks(tmp_path, parts)) == 3
    assert find_duplicate_key(tmp_path, parts, JobRunner(num_proc=2)) == "k1000" == _first_across(keys)


def test_parts_of_an_earlier_version_with_one_key_file_join_the_ranged_ones(tmp_path):
    """A part an earlier version finished (one sorted `_keys.arrow`, no ranges) is read by every range's job, which
    keeps the digests of its range."""
    parts = _keyed_parts(tmp_path, [["a", "b", "c"], ["d", "e"]], [4], memory_keys=10)
    old = part_dir(tmp_path, 2)
    old.mkdir()
    log = KeyLog(tmp_path / "runs-old", memory_keys=10)
    for key in ["x", "e", "y", "b"]:
        log.add(key)
    log.finish(old / KEYS_FILE)
    parts.append(PartResult(index=2, num_rows=4, shards=[], has_keys=True))
    assert find_duplicate_key(tmp_path, parts) == "e"  # order 5 + 1; "b" comes at 5 + 3


@pytest.fixture
def remote(s3_env):
    return RemoteParts(open_store(ObjectURL.parse(s3_env.root)), "cache/toy/default/1.0.0/abc/train")


SHARDED = types.SimpleNamespace(layout="arrow_shards")  # all the stand-in writer's plan needs to say


def _keyed_writer(keys_per_part: list[list], ranges: int):
    """Stands for write_part: a keyed part's shard and its key range files."""

    def write(plan, source, job, index, num_parts, staging):
        folder = part_dir(staging, index)
        folder.mkdir(parents=True)
        (folder / "shard-00000.arrow").write_bytes(b"x" * 10)
        part = _keyed_parts(staging / f"keys-{index}", [keys_per_part[index]], [ranges], memory_keys=4)[0]
        (part_dir(staging / f"keys-{index}", 0) / KEY_RANGES_DIR).rename(folder / KEY_RANGES_DIR)
        result = PartResult(index=index, num_rows=len(keys_per_part[index]), shards=[ShardInfo(
            "shard-00000.arrow", len(keys_per_part[index]), 10, "x")], has_keys=True, key_counts=part.key_counts)
        result.save(folder)
        return result

    return write


def test_remote_parts_are_checked_from_the_store_and_the_driver_fetches_no_key_file(remote, s3_env, tmp_path):
    """Parts written on another node: the driver's disk holds none of their files, and the range jobs read
    their ranges' key files from the store."""
    keys = [[f"k{i}" for i in range(p * 10, p * 10 + 14)] for p in range(3)]  # each repeats 4 of the next
    prefix = remote.prefix("jobs-1")
    task = remote_part_writer(_keyed_writer(keys, 3), remote, prefix, lambda: "node-a")
    parts = [task(SHARDED, None, None, i, 3, tmp_path / "node-a") for i in range(3)]
    assert any("/_keys/" in k for k in s3_env.objects(prefix))  # uploaded with the part's other files
    driver = tmp_path / "driver"
    driver.mkdir()
    found = find_duplicate_key(driver, parts, JobRunner(), StoredKeyFiles(remote, prefix))
    assert found == "k10" == _first_across(keys)
    assert list(driver.iterdir()) == []  # nothing of the parts came here; the jobs' scratch is removed
    assert finished_remote_part(remote, prefix, 1) == parts[1]
    s3_env.delete(next(k for k in s3_env.objects(prefix) if "/.part-00001/_keys/" in k))
    assert finished_remote_part(remote, prefix, 1) is None  # a resumed build writes it again
    with pytest.raises(StableDatasetsError, match=r"^duplicate-key check, key range \d of 3 \(node unknown\): could "
                                                  rf"not read s3://{s3_env.bucket}/cache/toy/.*/\.part-00001/_keys/"
                                                  r"0000\d\.arrow: .*missing"):
        find_duplicate_key(driver, parts, JobRunner(), StoredKeyFiles(remote, prefix))
