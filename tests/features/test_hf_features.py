"""Hugging Face's serialized features load as ours, and ours map back, with the real `datasets` package."""

from __future__ import annotations

import json

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.features.hf import from_hf_features, to_hf_features

datasets = pytest.importorskip("datasets")


def _hf_and_ours():
    hf = datasets.Features({
        "id": datasets.Value("int64"),
        "text": datasets.Value("large_string"),
        "label": datasets.ClassLabel(names=["neg", "pos"]),
        "tokens": datasets.List(datasets.Value("int32")),
        "pair": datasets.List(datasets.Value("float32"), length=2),
        "turns": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")}),
        "legacy": datasets.Sequence({"start": datasets.Value("int64"), "tag": datasets.ClassLabel(names=["a", "b"])}),
        "image": datasets.Image(),
        "mask": datasets.Image(mode="L"),
        "grid": datasets.Array2D((2, 3), "int16"),
        "cube": datasets.Array3D((2, 2, 2), "float32"),
        "hyper": datasets.Array4D((1, 2, 3, 4), "uint8"),
        "meta": {"score": datasets.Value("float64"), "ok": datasets.Value("bool"), "raw": datasets.Value("binary")},
        "big": datasets.LargeList(datasets.Value("int8")),
    })
    ours = sds.Features({
        "id": sds.Value("int64"),
        "text": sds.Value("large_string"),
        "label": sds.ClassLabel(names=["neg", "pos"]),
        "tokens": sds.Sequence(sds.Value("int32")),
        "pair": sds.Sequence(sds.Value("float32"), length=2),
        "turns": sds.Sequence({"role": sds.Value("string"), "content": sds.Value("string")}),
        "legacy": {"start": sds.Sequence(sds.Value("int64")), "tag": sds.Sequence(sds.ClassLabel(names=["a", "b"]))},
        "image": sds.Image(),
        "mask": sds.Image(mode="L"),
        "grid": sds.Array2D((2, 3), "int16"),
        "cube": sds.Array3D((2, 2, 2), "float32"),
        "hyper": sds.Array4D((1, 2, 3, 4), "uint8"),
        "meta": {"score": sds.Value("float64"), "ok": sds.Value("bool"), "raw": sds.Value("binary")},
        "big": sds.Sequence(sds.Value("int8")),
    })
    return hf, ours


def test_hf_serialized_features_load_exactly():
    hf, ours = _hf_and_ours()
    loaded = sds.Features.from_dict(hf.to_dict())
    assert loaded.to_dict() == ours.to_dict()
    assert list(loaded) == list(ours)
    assert from_hf_features(hf).to_dict() == ours.to_dict()


def test_dataset_info_json_of_an_in_memory_hf_dataset_loads(tmp_path):
    hf, ours = _hf_and_ours()
    small = datasets.Features({k: hf[k] for k in ("id", "label", "turns", "legacy", "grid")})
    ds = datasets.Dataset.from_dict({
        "id": [1], "label": [1], "turns": [[{"role": "user", "content": "hi"}]],
        "legacy": [{"start": [3, 4], "tag": [0, 1]}], "grid": [[[1, 2, 3], [4, 5, 6]]],
    }, features=small)
    ds.info.write_to_directory(str(tmp_path))
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    loaded = sds.Features.from_dict(info["features"])
    assert loaded.to_dict() == sds.Features({k: ours[k] for k in small}).to_dict()
    # and the rows HF holds encode under our features unchanged
    encoded = loaded.encode(ds[0], "")
    assert np.asarray(encoded.pop("grid")).ravel().tolist() == [1, 2, 3, 4, 5, 6]
    assert encoded == {"id": 1, "label": 1, "turns": [{"role": "user", "content": "hi"}],
                       "legacy": {"start": [3, 4], "tag": [0, 1]}}


def test_legacy_serialized_forms_of_older_datasets_versions():
    """What datasets 2.x wrote into dataset_info.json: `id` keys, Sequence, ClassLabel with num_classes/names_file."""
    old = {
        "text": {"dtype": "string", "id": None, "_type": "Value"},
        "label": {"num_classes": 2, "names": ["neg", "pos"], "names_file": None, "id": None, "_type": "ClassLabel"},
        "ids": {"feature": {"dtype": "int32", "id": None, "_type": "Value"}, "length": -1, "id": None,
                "_type": "Sequence"},
        "answers": {"feature": {"text": {"dtype": "string", "id": None, "_type": "Value"},
                                "answer_start": {"dtype": "int32", "id": None, "_type": "Value"}},
                    "length": -1, "id": None, "_type": "Sequence"},
        "img": {"decode": True, "id": None, "_type": "Image"},
        "nested": [{"a": {"dtype": "int8", "_type": "Value"}}][0],
    }
    loaded = sds.Features.from_dict(old)
    assert loaded.to_dict() == sds.Features({
        "text": sds.Value("string"),
        "label": sds.ClassLabel(names=["neg", "pos"]),
        "ids": sds.Sequence(sds.Value("int32")),
        "answers": {"text": sds.Sequence(sds.Value("string")), "answer_start": sds.Sequence(sds.Value("int32"))},
        "img": sds.Image(),
        "nested": {"a": sds.Value("int8")},
    }).to_dict()


def test_our_canonical_form_still_round_trips():
    _, ours = _hf_and_ours()
    ours["photo"] = sds.Image(format="webp", quality=80, mode="RGBA", decode_to="pil")
    assert sds.Features.from_dict(json.loads(json.dumps(ours.to_dict()))).to_dict() == ours.to_dict()


def test_features_map_to_hf_and_back():
    hf, ours = _hf_and_ours()
    mapped = to_hf_features(ours)
    expected = dict(hf)
    # the legacy Sequence of a dict is HF's struct of lists; ours maps back to that same struct
    expected["legacy"] = {"start": datasets.List(datasets.Value("int64")),
                          "tag": datasets.List(datasets.ClassLabel(names=["a", "b"]))}
    expected["big"] = datasets.List(datasets.Value("int8"))  # ours has one list type
    assert mapped.to_dict() == datasets.Features(expected).to_dict()
    assert sds.Features.from_dict(mapped.to_dict()).to_dict() == ours.to_dict()


def test_unsupported_hf_features_are_errors_naming_the_field():
    with pytest.raises(ValueError, match=r"feature 'when': unsupported dtype 'timestamp\[ms\]'"):
        sds.Features.from_dict(datasets.Features({"when": datasets.Value("timestamp[ms]")}).to_dict())
    with pytest.raises(ValueError, match="feature 'sound': unknown feature type 'Audio'"):
        sds.Features.from_dict({"sound": {"sampling_rate": 16000, "_type": "Audio"}})
    with pytest.raises(ValueError, match="feature 'outer': feature 'inner': missing key 'feature'"):
        sds.Features.from_dict({"outer": {"inner": {"_type": "List"}}})
    with pytest.raises(ValueError, match="clip: Video has no Hugging Face equivalent"):
        to_hf_features(sds.Features({"clip": sds.Video()}))
