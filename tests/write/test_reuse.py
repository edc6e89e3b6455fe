"""Reused parts keep their example keys: a keyed build saves its parts' keys in one file beside the shards
(`save_part_keys`), and a later build that reuses some of those parts cuts each one's keys back into its own
digest-range files (`_split_part_keys`), as many ranges as that build has workers."""

from __future__ import annotations

import types

import numpy as np
import pyarrow as pa

from stable_datasets.write.key_check import find_duplicate_key
from stable_datasets.write.keys import RangedKeyWriter, iter_keys, key_digest, key_marker, write_sorted_keys
from stable_datasets.write.parts import KEY_RANGES_DIR, PartResult, part_dir
from stable_datasets.write.reuse import REUSED_DIR, _split_part_keys, save_part_keys


def _part(staging, index: int, keys: list[str], ranges: int) -> PartResult:
    writer = RangedKeyWriter(part_dir(staging, index) / KEY_RANGES_DIR, ranges, 2)
    write_sorted_keys(writer, np.array([key_digest(key_marker(k)) for k in keys], np.uint64),
                      np.arange(len(keys), dtype=np.int64), pa.array([f'"{k}"' for k in keys]), 2)
    return PartResult(index=index, num_rows=len(keys), shards=[], has_keys=True, key_counts=writer.counts)


def test_reused_parts_get_their_keys_back_cut_into_this_builds_ranges(tmp_path):
    keys = [[f"a{i}" for i in range(9)], [f"b{i}" for i in range(7)], [f"c{i}" for i in range(5)]]
    old = tmp_path / "old"
    assert save_part_keys(old, [_part(old, i, k, 3) for i, k in enumerate(keys)])  # an earlier build of 3 workers
    staging = tmp_path / "staging"
    reused = {index: PartResult(index=index, num_rows=0, shards=[], has_keys=True, location=REUSED_DIR)
              for index in (0, 1)}
    (staging / REUSED_DIR).mkdir(parents=True)
    # this build's parts 0 and 1 are the old parts 2 and 0; it has 2 workers
    assert _split_part_keys(types.SimpleNamespace(directory=old), staging, {0: 2, 1: 0}, reused, 2)
    assert [len(p.key_counts) for p in reused.values()] == [2, 2]
    assert [sum(p.key_counts) for p in reused.values()] == [5, 9]
    texts = [t for path in reused[1].key_files(staging) for _, _, t in iter_keys(path)]
    assert sorted(texts) == sorted(f'"{k}"' for k in keys[0])  # the old part 0's keys, in digest order
    assert [d for path in reused[1].key_files(staging) for d, _, _ in iter_keys(path)] == sorted(
        key_digest(key_marker(k)) for k in keys[0])
    built = _part(staging, 2, ["n0", "a4", "n1", "c2"], 2)  # a part built anew repeats a key of each
    assert find_duplicate_key(staging, [*reused.values(), built]) == "a4"  # build order: c.., a.., then n0, a4
