"""map: what cannot be fingerprinted is not reused (one warning), and new_fingerprint= names a result."""

from __future__ import annotations

import threading

import pytest
from loguru import logger

import stable_datasets as sds


def test_an_unhashable_function_is_run_again_with_one_warning_and_new_fingerprint_reuses(cache_root):
    ds = sds.StableDataset.from_dict({"x": [1, 2, 3]})
    lock = threading.Lock()

    def double(row):
        with lock:
            return {"y": row["x"] * 2}

    warnings: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    try:
        first, second = ds.map(double), ds.map(double)
    finally:
        logger.remove(sink)
    assert first["y"] == second["y"] == [2, 4, 6]
    assert first.cache_dirs != second.cache_dirs  # not reused
    assert len(warnings) == 1 and warnings[0].startswith("map: cannot fingerprint ") \
        and warnings[0].endswith("its result will not be reused (pass new_fingerprint= to name it yourself)")
    named = ds.map(double, new_fingerprint="double-v1")
    assert ds.map(double, new_fingerprint="double-v1").cache_dirs == named.cache_dirs
    assert ds.map(double, new_fingerprint="double-v2").cache_dirs != named.cache_dirs


def test_new_fingerprint_must_be_a_name():
    ds = sds.StableDataset.from_dict({"x": [1]})
    with pytest.raises(ValueError, match=r"^map: new_fingerprint must be a non-empty string, got ''$"):
        ds.map(lambda row: row, new_fingerprint="")
    with pytest.raises(ValueError, match="differ; give one"):
        ds.map(lambda row: row, new_fingerprint="a", cache_fingerprint="b")
