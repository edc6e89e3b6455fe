"""The duplicate-key check in bounded memory: a part's keys spilled in sorted runs, merged per part and
across parts; the duplicate named is the first in build order, as the in-memory check names it."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.errors import ExampleError
from stable_datasets.write import keys as keys_module
from stable_datasets.write.key_check import find_duplicate_key
from stable_datasets.write.keys import (
    KeyLog,
    MergeStats,
    iter_keys,
    key_digest,
    key_marker,
    merge_sorted,
    write_sorted_keys,
)
from stable_datasets.write.parts import KEYS_FILE, PartResult, part_dir


def _first_repeat(keys: list) -> object | None:
    seen = set()
    for key in keys:
        marker = key_marker(key)
        if marker in seen:
            return key
        seen.add(marker)
    return None


def _check(keys: list, folder, memory_keys: int, batch_rows: int = 3, fan_in: int = 2) -> object | None:
    """The key a KeyLog names: at once while it holds the keys in memory, else at finish."""
    log = KeyLog(folder / "runs", memory_keys=memory_keys, batch_rows=batch_rows, fan_in=fan_in)
    for key in keys:
        if not log.add(key):
            return key
    found = log.finish(folder / "sorted.arrow")
    assert not (folder / "runs").exists()  # run files are removed
    return found


def test_unique_keys_spilled_in_runs_merge_into_one_sorted_file(tmp_path):
    keys = [f"file-{i}.jpg:0" for i in range(100)]
    log = KeyLog(tmp_path / "runs", memory_keys=10, batch_rows=4, fan_in=3)
    assert all(log.add(k) for k in keys)
    assert len(log.runs) == 10 and log.seen is None
    assert log.finish(tmp_path / "sorted.arrow") is None
    rows = list(iter_keys(tmp_path / "sorted.arrow"))
    assert sorted(order for _, order, _ in rows) == list(range(100))
    assert [d for d, _, _ in rows] == sorted(d for d, _, _ in rows)
    assert {order: json.loads(text) for _, order, text in rows} == dict(enumerate(keys))
    assert all(d == key_digest(key_marker(keys[o])) for d, o, _ in rows)
    assert log.stats.passes == 5  # 10 runs, 3 at a time: 3+... merged in passes, then the last


def test_a_repeat_within_the_memory_held_is_refused_at_once(tmp_path):
    log = KeyLog(tmp_path / "runs", memory_keys=100)
    assert log.add("a") and log.add("b")
    assert not log.add("a")


def test_a_repeat_past_the_memory_held_is_found_at_the_end_first_in_build_order(tmp_path):
    # 25 and 3 both repeat after the spill; 25 repeats first (position 30), 3 later (position 31)
    keys = [*range(30), 25, 3, *range(100, 130)]
    assert _check(keys, tmp_path, memory_keys=8) == 25


def test_keys_that_are_not_hashable_are_refused_after_the_spill_too(tmp_path):
    log = KeyLog(tmp_path / "runs", memory_keys=2)
    log.add(1)
    log.add(2)
    with pytest.raises(TypeError):
        log.add([1, 2])


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.one_of(st.integers(0, 40), st.text(max_size=2), st.tuples(st.integers(0, 3))), max_size=80),
       memory_keys=st.integers(1, 20), batch_rows=st.integers(1, 7), fan_in=st.integers(2, 4))
def test_the_key_named_is_the_first_repeat_in_build_order(tmp_path_factory, keys, memory_keys, batch_rows, fan_in):
    folder = tmp_path_factory.mktemp("keys")
    expected = _first_repeat(keys)
    found = _check(keys, folder, memory_keys, batch_rows, fan_in)
    # a key found after the spill comes back from its JSON text: a tuple as a list
    assert json.dumps(found) == json.dumps(expected)
    if expected is None:
        rows = list(iter_keys(folder / "sorted.arrow"))
        assert sorted(o for _, o, _ in rows) == list(range(len(keys)))


def _part_file(path, digests, texts, batch_rows=5):
    write_sorted_keys(path, np.asarray(digests, np.uint64), np.arange(len(digests), dtype=np.int64),
                      pa.array(texts, pa.string()), batch_rows)


def test_a_digest_collision_is_not_a_duplicate_but_equal_texts_are(tmp_path):
    # every key has the same digest, across many record batches and merge rounds
    _part_file(tmp_path / "a", [7] * 20, [f"a{i}" for i in range(20)])
    _part_file(tmp_path / "b", [7] * 20, [f"b{i}" for i in range(20)])
    files = [(tmp_path / "a", 0), (tmp_path / "b", 20)]
    assert merge_sorted(files, None, tmp_path / "scratch", merge_rows=4) is None
    _part_file(tmp_path / "c", [7] * 20, [f"b{i}" if i == 13 else f"c{i}" for i in range(20)])
    found = merge_sorted([*files, (tmp_path / "c", 40)], None, tmp_path / "scratch", merge_rows=4)
    assert (found.key, found.order) == ("b13", 53)


@pytest.mark.scale
def test_the_check_across_parts_holds_a_constant_whatever_the_rows(tmp_path):
    """10,000,000 keys in 8 parts hold what 1,000,000 do (the arrays of one merge round); before, the
    driver concatenated every digest (8 bytes a row, 46 with the key texts) and the worker held a dict."""
    rng = np.random.default_rng(0)
    peaks = {}
    for rows in (1_000_000, 10_000_000):
        files, per_part = [], rows // 8
        for part in range(8):
            digests = np.sort(rng.integers(0, 2**64 - 1, per_part, dtype=np.uint64))
            texts = pc.cast(pa.array(np.arange(part * per_part, (part + 1) * per_part)), pa.string())
            path = tmp_path / f"{rows}-{part}.arrow"
            write_sorted_keys(path, digests, np.arange(per_part, dtype=np.int64), texts)
            files.append((path, part * per_part))
        stats = MergeStats()
        assert merge_sorted(files, None, tmp_path / "scratch", stats) is None
        peaks[rows] = stats.peak_bytes
        assert stats.rounds >= rows // keys_module.MERGE_ROWS
        for path, _ in files:
            path.unlink()
    limit = 6 * (keys_module.MERGE_ROWS + 8 * keys_module.FILE_BATCH_ROWS) * 8
    assert peaks[10_000_000] <= limit and peaks[1_000_000] <= limit, peaks
    assert peaks[10_000_000] < 1.2 * peaks[1_000_000], peaks


SPILL_BUILDER = textwrap.dedent('''
    import stable_datasets as sds

    class Spill(sds.GeneratorBasedBuilder):
        VERSION = sds.Version("1.0.0")

        def _info(self):
            return sds.DatasetInfo(features=sds.Features({"i": sds.Value("int64")}))

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {"parts": list(range(4))})]

        def _generate_examples(self, parts):
            for part in parts:
                for i in range(150):
                    yield KEY, {"i": i}
''')


@pytest.mark.parametrize("num_proc", [1, 2])
def test_a_build_past_the_memory_held_names_the_duplicate_as_before(write_builder, cache_root, monkeypatch, num_proc):
    """Parts spill their keys after 40; a repeat within a part (num_proc=1: one part) or across parts is
    named exactly as the in-memory check names it, and nothing is published."""
    monkeypatch.setattr(keys_module, "MEMORY_KEYS", 40)
    path = write_builder("spill", SPILL_BUILDER.replace("KEY", '"p%d-%d" % (part, i) if i != 120 else "p0-100"'))
    with pytest.raises(ExampleError, match=r"^builder 'spill', split 'train', example key 'p0-100': duplicate "
                                           r"example key within the split$"):
        sds.load_dataset(str(path), split="train", num_proc=num_proc)
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))
    fine = write_builder("fine", SPILL_BUILDER.replace("KEY", '"p%d-%d" % (part, i)'))
    ds = sds.load_dataset(str(fine), split="train", num_proc=num_proc)
    assert ds["i"] == [i for _ in range(4) for i in range(150)]
    assert not list(cache_root.rglob(".keys")) and not list(cache_root.rglob("_keys.arrow"))


def test_key_files_of_parts_an_earlier_version_finished_are_sorted_first(tmp_path):
    """A build killed before an upgrade resumes with its finished parts: their key files hold (digest, key) in
    build order. The check sorts them first and names the first key two parts share."""
    old_schema = pa.schema([("digest", pa.uint64()), ("key", pa.string())])
    parts = []
    for index, keys in enumerate([["c", "a", "b"], ["d", "b", "e", "a"]]):
        folder = part_dir(tmp_path, index)
        folder.mkdir()
        table = pa.table({"digest": pa.array([key_digest(k) for k in keys], pa.uint64()),
                          "key": pa.array([json.dumps(k) for k in keys])}, schema=old_schema)
        with pa.OSFile(str(folder / KEYS_FILE), "wb") as sink, pa.ipc.new_file(sink, old_schema) as out:
            out.write_table(table)
        parts.append(PartResult(index=index, num_rows=len(keys), shards=[], has_keys=True))
    assert find_duplicate_key(tmp_path, parts) == "b"  # part 1's second row; its "a" comes later
    assert [o for _, o, _ in iter_keys(part_dir(tmp_path, 1) / KEYS_FILE)] != [0, 1, 2, 3]  # now sorted by digest
    assert sorted(json.loads(t) for _, _, t in iter_keys(part_dir(tmp_path, 1) / KEYS_FILE)) == ["a", "b", "d", "e"]
