"""Hugging Face `datasets` both ways, with the real package (offline: datasets made in memory)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets import Features, StableDataset

datasets = pytest.importorskip("datasets")


def _hf_dataset():
    pixels = [np.full((3, 2, 3), i * 40, np.uint8) for i in range(4)]
    features = datasets.Features({
        "image": datasets.Image(),
        "label": datasets.ClassLabel(names=["cat", "dog", "eel"]),
        "tokens": datasets.List(datasets.Value("int32")),
        "fixed": datasets.List(datasets.Value("float32"), length=2),
        "grid2": datasets.Array2D((2, 3), "float32"),
        "grid3": datasets.Array3D((1, 2, 2), "int16"),
        "grid4": datasets.Array4D((1, 1, 2, 2), "uint8"),
        "meta": {"score": datasets.Value("float64"), "tags": datasets.List(datasets.Value("string"))},
        "text": datasets.Value("string"),
    })
    data = {
        "image": pixels,
        "label": [0, 2, 1, 0],
        "tokens": [[1, 2], [], [3], [4, 5, 6]],
        "fixed": [[0.5, 1.5], [2.5, 3.5], [4.5, 5.5], [6.5, 7.5]],
        "grid2": [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(4)],
        "grid3": [np.arange(4, dtype=np.int16).reshape(1, 2, 2) * i for i in range(4)],
        "grid4": [np.full((1, 1, 2, 2), i, np.uint8) for i in range(4)],
        "meta": [{"score": i / 2, "tags": ["t"] * i} for i in range(4)],
        "text": ["a", "b", "c", "d"],
    }
    return datasets.Dataset.from_dict(data, features=features), pixels


def test_from_hf_maps_every_feature_and_keeps_values():
    hf, pixels = _hf_dataset()
    ds = StableDataset.from_hf(hf)
    assert ds.column_names == list(hf.features)
    assert ds.features == Features({
        "image": sds.Image(), "label": sds.ClassLabel(names=["cat", "dog", "eel"]),
        "tokens": sds.Sequence(sds.Value("int32")), "fixed": sds.Sequence(sds.Value("float32"), length=2),
        "grid2": sds.Array2D((2, 3), "float32"), "grid3": sds.Array3D((1, 2, 2), "int16"),
        "grid4": sds.Array4D((1, 1, 2, 2), "uint8"),
        "meta": {"score": sds.Value("float64"), "tags": sds.Sequence(sds.Value("string"))},
        "text": sds.Value("string")})
    row = ds[1]
    np.testing.assert_array_equal(row["image"], pixels[1])
    assert row["label"] == 2 and row["tokens"] == [] and row["fixed"] == [2.5, 3.5]
    np.testing.assert_array_equal(row["grid2"], np.arange(6).reshape(2, 3) + 1)
    np.testing.assert_array_equal(ds[3]["grid3"], np.arange(4).reshape(1, 2, 2) * 3)
    assert ds[2]["grid4"].shape == (1, 1, 2, 2) and int(ds[2]["grid4"].max()) == 2
    assert ds[3]["meta"] == {"score": 1.5, "tags": ["t", "t", "t"]} and ds["text"] == ["a", "b", "c", "d"]
    assert StableDataset.from_hf(hf).cache_dirs == ds.cache_dirs  # same content: the same cache


def test_from_hf_follows_the_hf_row_order_and_split_name():
    hf = datasets.Dataset.from_dict({"x": list(range(10))}, split="validation")
    ds = StableDataset.from_hf(hf.select([7, 2, 9]))
    assert ds["x"] == [7, 2, 9] and ds.split == "validation"
    assert StableDataset.from_hf(hf.shuffle(seed=1))["x"] == hf.shuffle(seed=1)["x"]
    with pytest.raises(TypeError, match="index a DatasetDict by split name"):
        StableDataset.from_hf(datasets.DatasetDict({"train": hf}))


def test_to_hf_round_trip():
    hf, pixels = _hf_dataset()
    ds = StableDataset.from_hf(hf)
    back = ds.to_hf()
    assert isinstance(back, datasets.Dataset) and len(back) == 4
    assert back.features == hf.features
    row = back[2]
    np.testing.assert_array_equal(np.asarray(row["image"].convert("RGB")), pixels[2])
    for name in ("label", "tokens", "fixed", "grid2", "grid3", "grid4", "meta", "text"):
        assert back[name] == hf[name], name


def test_to_hf_of_a_view_and_a_selection():
    ds = StableDataset.from_dict({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [0.5, 1.5, 2.5]})
    back = ds.select([2, 0]).remove_columns("c").rename_column("a", "n").to_hf()
    assert back.column_names == ["n", "b"] and back["n"] == [3, 1] and back["b"] == ["z", "x"]


def test_hf_serialized_features_read_by_features_from_dict(tmp_path):
    hf, _ = _hf_dataset()
    assert Features.from_dict(hf.features.to_dict()) == StableDataset.from_hf(hf).features
    # the legacy form: a Sequence of a dict is a struct of lists, and the old "id" keys carry nothing
    legacy = {"answers": {"_type": "Sequence", "feature": {"text": {"dtype": "string", "_type": "Value", "id": None},
                                                            "start": {"dtype": "int32", "_type": "Value", "id": None}},
                          "length": -1, "id": None},
              "ids": {"_type": "Sequence", "feature": {"dtype": "int64", "_type": "Value", "id": None}, "length": 3}}
    assert Features.from_dict(legacy) == Features({
        "answers": {"text": sds.Sequence(sds.Value("string")), "start": sds.Sequence(sds.Value("int32"))},
        "ids": sds.Sequence(sds.Value("int64"), length=3)})
    # a dataset_info.json as datasets writes it
    hf.select_columns(["label", "tokens", "meta"]).save_to_disk(str(tmp_path / "saved"))
    info = json.loads((tmp_path / "saved" / "dataset_info.json").read_text())
    assert Features.from_dict(info["features"]) == Features({
        "label": sds.ClassLabel(names=["cat", "dog", "eel"]), "tokens": sds.Sequence(sds.Value("int32")),
        "meta": {"score": sds.Value("float64"), "tags": sds.Sequence(sds.Value("string"))}})


def test_a_feature_without_equivalent_is_named():
    from stable_datasets.features.hf import to_hf_features

    with pytest.raises(ValueError, match=r"^clip: Video has no Hugging Face equivalent"):
        to_hf_features(Features({"clip": sds.Video(storage="bytes")}))
    with pytest.raises(ValueError, match=r"feature 'a': unknown feature type 'Audio'"):
        Features.from_dict({"a": {"_type": "Audio", "sampling_rate": 16000}})


def test_array_columns_with_null_rows_round_trip_through_hf(tmp_path):
    """A null cell in a fixed-shape array column (Hugging Face allows it) comes in from HF and goes
    back out; before, the nested lists of the other rows were refused as int64."""
    features = datasets.Features({"a": datasets.Array2D((2, 2), "uint8")})
    hf = datasets.Dataset.from_dict({"a": [np.ones((2, 2), np.uint8), None]}, features=features)
    ds = StableDataset.from_hf(hf, cache_dir=tmp_path)
    assert ds.features["a"] == sds.Array2D((2, 2), "uint8")
    assert ds[0]["a"].tolist() == [[1, 1], [1, 1]] and ds[1]["a"] is None
    back = ds.to_hf()
    assert back.features == features and back[0]["a"] == [[1, 1], [1, 1]] and back[1]["a"] is None
    assert StableDataset.from_hf(back, cache_dir=tmp_path).cache_dirs == ds.cache_dirs


def test_hf_timestamp_columns_come_in_as_iso_text(tmp_path):
    import pandas as pd

    when = pd.to_datetime(["2020-01-01 10:00", None]).astype("datetime64[us]")
    hf = datasets.Dataset.from_pandas(pd.DataFrame({"when": when}))
    assert hf.features["when"] == datasets.Value("timestamp[us]")
    ds = StableDataset.from_hf(hf, cache_dir=tmp_path)
    assert ds.features["when"] == sds.Value("string")
    assert ds["when"] == ["2020-01-01 10:00:00.000000", None]
