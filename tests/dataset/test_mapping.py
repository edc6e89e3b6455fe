"""map (dataset/mapping.py): what cannot be fingerprinted is not reused (one warning), new_fingerprint= names a
result, the output's features as Hugging Face decides them, and a function returning None."""

from __future__ import annotations

import threading

import numpy as np
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


def test_map_infers_a_replaced_column_and_a_changed_struct_as_hugging_face_does():
    datasets = pytest.importorskip("datasets")
    rows = {"x": [1, 2], "y": ["a", "b"]}
    theirs = datasets.Dataset.from_dict(rows).map(lambda r: {"x": f"{r['x']}!"}, remove_columns=["x"])
    ours = sds.StableDataset.from_dict(rows).map(lambda r: {"x": f"{r['x']}!"}, remove_columns=["x"])
    assert ours.features == sds.Features({"x": sds.Value("string"), "y": sds.Value("string")})
    assert str(theirs.features["x"]) == "Value('string')"
    assert ours[:] == theirs[:] == {"x": ["1!", "2!"], "y": ["a", "b"]}
    structs = {"s": [{"a": 1}, {"a": 2}]}

    def grow(row):
        return {"s": {"a": row["s"]["a"], "b": "new"}}

    theirs = datasets.Dataset.from_dict(structs).map(grow)
    ours = sds.StableDataset.from_dict(structs).map(grow)
    assert ours.features == sds.Features({"s": {"a": sds.Value("int64"), "b": sds.Value("string")}})
    assert ours[:] == theirs[:] == {"s": [{"a": 1, "b": "new"}, {"a": 2, "b": "new"}]}


@pytest.mark.parametrize("batched", [False, True])
def test_map_keeps_an_int_column_for_whole_floats_and_infers_floats_for_fractions_as_hugging_face_does(batched):
    datasets = pytest.importorskip("datasets")

    def whole(rows):
        return {"label": [float(v) for v in rows["label"]], "v": [v * 1.0 for v in rows["v"]]} if batched \
            else {"label": float(rows["label"]), "v": rows["v"] * 1.0}

    def fractions(rows):
        return {"label": [v + 0.5 for v in rows["label"]], "v": [v * 1.5 for v in rows["v"]]} if batched \
            else {"label": rows["label"] + 0.5, "v": rows["v"] * 1.5}

    data = {"label": [0, 1], "v": [1, 2]}
    theirs = datasets.Dataset.from_dict(data, features=datasets.Features(
        {"label": datasets.ClassLabel(names=["n", "p"]), "v": datasets.Value("int32")}))
    features = sds.Features({"label": sds.ClassLabel(names=["n", "p"]), "v": sds.Value("int32")})
    ours = sds.StableDataset.from_dict(data, features=features)
    kept, their_kept = ours.map(whole, batched=batched), theirs.map(whole, batched=batched)
    assert kept.features == features and isinstance(their_kept.features["label"], datasets.ClassLabel)
    assert kept[:] == their_kept[:] == {"label": [0, 1], "v": [1, 2]}
    assert type(kept[1]["label"]) is int
    floats, their_floats = ours.map(fractions, batched=batched), theirs.map(fractions, batched=batched)
    assert floats.features == sds.Features({"label": sds.Value("float64"), "v": sds.Value("float64")})
    assert floats[:] == their_floats[:] == {"label": [0.5, 1.5], "v": [1.5, 3.0]}


def test_map_keeps_the_formats_columns_and_output_all_columns():
    ds = sds.StableDataset.from_dict({"x": [1, 2], "t": ["a", "b"]}).with_format("numpy", columns=["x"],
                                                                                  output_all_columns=True)
    out = ds.map(lambda r: {"y": int(r["x"]) * 10})
    assert out.format == {"type": "numpy", "columns": ("x",), "decode": True, "output_all_columns": True}
    assert out[1] == {"x": 2, "t": "b", "y": 20} and type(out[1]["x"]) is np.int64 and type(out[1]["y"]) is int
    gone = ds.map(lambda r: {"z": 0}, remove_columns=["x"])
    assert gone.format["columns"] is None and type(gone[0]["t"]) is np.str_  # the format's column went


def test_map_values_of_mixed_kinds_in_a_column_keep_its_feature_and_the_error_names_the_row():
    ds = sds.StableDataset.from_dict({"x": [1, 2, 3]})
    with pytest.raises(sds.errors.ExampleError, match=r"example key 1, field 'x': expected an integer"):
        ds.map(lambda r: {"x": "two" if r["x"] == 2 else r["x"]})


def _map_folders(root):
    """The map results (and staging folders) under `root`; a lock file stays beside a build, as for any build."""
    return sorted(p.name for p in root.rglob("*.map-*") if p.is_dir())


def test_map_returning_none_runs_once_per_row_and_keeps_the_dataset_and_its_fingerprint(cache_root):
    """HF's test_map "no transform" case: `map(lambda x: None)` gives the same dataset, same fingerprint."""
    datasets = pytest.importorskip("datasets")
    rows = {"filename": [f"my_name-train_{i}" for i in range(30)]}
    theirs = datasets.Dataset.from_dict(rows)
    assert theirs.map(lambda x: None)._fingerprint == theirs._fingerprint
    ours = sds.StableDataset.from_dict(rows)
    seen: list[str] = []
    same = ours.map(lambda row: seen.append(row["filename"]))
    assert seen == rows["filename"]  # every row once, in order
    assert same.fingerprint == ours.fingerprint and len(same) == 30 and same.cache_dirs == ours.cache_dirs
    assert _map_folders(cache_root) == []  # nothing written
    batches: list[int] = []
    assert ours.map(lambda b: batches.append(len(b["filename"])), batched=True, batch_size=8).fingerprint == \
        ours.fingerprint
    assert batches == [8, 8, 8, 6]
    parallel = ours.map(lambda b: None, batched=True, batch_size=8, num_proc=2)
    assert parallel.fingerprint == ours.fingerprint and _map_folders(cache_root) == []


def test_map_returning_none_with_remove_columns_only_removes_them():
    ds = sds.StableDataset.from_dict({"x": [1, 2], "y": ["a", "b"]})
    out = ds.map(lambda row: None, remove_columns=["y"])
    assert out.column_names == ["x"] and out["x"] == [1, 2] and out.cache_dirs == ds.cache_dirs


@pytest.mark.parametrize("num_proc", [None, 2])
def test_map_returning_none_for_some_rows_only_is_an_error(num_proc):
    ds = sds.StableDataset.from_dict({"x": list(range(20))})
    with pytest.raises(sds.errors.StableDatasetsError,
                       match=r"^map: the function returned None for some rows and a dict for others \(.*\); return "
                             r"a dict for every row, or None for every row to run it for its effects only$"):
        ds.map(lambda row: None if row["x"] < 15 else {"y": 1}, num_proc=num_proc)


def test_map_of_no_function_writes_the_rows_anew(cache_root):
    ds = sds.StableDataset.from_dict({"x": [1, 2, 3]}).select([2, 0])
    flat = ds.map(None)
    assert flat["x"] == [3, 1] and not flat.cache_files[0]["view"] and flat.fingerprint != ds.fingerprint
    assert _map_folders(cache_root) != []  # a result is found where the tests above find none
