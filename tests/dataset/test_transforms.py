"""map: what cannot be fingerprinted is not reused (one warning), and new_fingerprint= names a result."""

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


def _three(lib, info_of):
    """HF's test_concatenate data: three datasets, the first two with descriptions."""
    data = [{"id": [0, 1, 2]}, {"id": [3, 4, 5]}, {"id": [6, 7]}]
    infos = [info_of("Dataset1"), info_of("Dataset2"), None]
    return [lib.from_dict(d, info=i) for d, i in zip(data, infos)]


def test_concatenate_datasets_joins_descriptions_and_resets_a_disparate_format_as_hugging_face_does():
    datasets = pytest.importorskip("datasets")
    theirs = _three(datasets.Dataset, lambda d: datasets.DatasetInfo(description=d))
    ours = _three(sds.StableDataset, lambda d: sds.DatasetInfo(features={"id": sds.Value("int64")}, description=d))
    their_joined, joined = datasets.concatenate_datasets(theirs), sds.concatenate_datasets(ours)
    assert joined["id"] == their_joined["id"][:] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert joined.info.description == their_joined.info.description == "Dataset1\n\nDataset2"
    for group in (theirs, ours):
        group[0].set_format("numpy")
    assert datasets.concatenate_datasets(theirs).format["type"] is None  # HF's "reset"
    reset = sds.concatenate_datasets(ours)
    assert reset.format["type"] == "python" and reset[:2]["id"] == [0, 1]
    for group in (theirs, ours):
        group[1].set_format("numpy")
        group[2].set_format("numpy")
    assert datasets.concatenate_datasets(theirs).format["type"] == "numpy"
    kept = sds.concatenate_datasets(ours)
    assert kept.format["type"] == "numpy" and kept["id"].tolist() == list(range(8))


def test_concatenate_datasets_keeps_a_shared_format_and_its_other_columns_and_takes_info_and_split():
    a = sds.StableDataset.from_dict({"x": [1, 2], "t": ["a", "b"]}).with_format("numpy", columns=["x"],
                                                                                 output_all_columns=True)
    b = sds.StableDataset.from_dict({"x": [3], "t": ["c"]}).with_format("numpy", columns=["x"],
                                                                         output_all_columns=True)
    joined = sds.concatenate_datasets([a, b])
    assert joined[2] == {"x": 3, "t": "c"} and type(joined[2]["x"]) is np.int64 and type(joined[2]["t"]) is str
    empty = b.select([]).with_format("python")  # without rows: left out of the format rule, as Hugging Face does
    assert sds.concatenate_datasets([a, empty]).format["type"] == "numpy"
    given = sds.DatasetInfo(features=a.features, description="mine")
    named = sds.concatenate_datasets([a, b], info=given, split="all")
    assert named.info.description == "mine" and named.split == "all"
    same = sds.concatenate_datasets([a, a])
    assert same.info == a.info and same.split == "train+train"


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
