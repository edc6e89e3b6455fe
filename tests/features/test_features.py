from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.errors import EncodingError
from stable_datasets.features import feature_from_dict
from stable_datasets.features.encoder import BatchEncoder

ALL_FEATURES = [
    *[sds.Value(d) for d in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                             "float16", "float32", "float64", "string", "binary")],
    sds.ClassLabel(names=["cat", "dog"]),
    sds.ClassLabel(num_classes=3),
    sds.Sequence(sds.Value("int32")),
    sds.Sequence(sds.Value("string"), length=2),
    sds.List({"a": sds.Value("int8"), "b": sds.Sequence(sds.Image())}),
    sds.Array2D((2, 3), "float32"),
    sds.Array3D((1, 2, 3), "uint8"),
    sds.Array4D((1, 1, 2, 2), "int64"),
    sds.Image(),
    sds.Image(format="jpeg", quality=90),
    sds.Features({"x": sds.Value("int64"), "nested": {"y": sds.Sequence(sds.Value("float64"))}}),
]


@pytest.mark.parametrize("feature", ALL_FEATURES, ids=repr)
def test_canonical_dict_round_trips_exactly(feature):
    features = sds.Features({"col": feature})
    data = features.to_dict()
    again = sds.Features.from_dict(json.loads(json.dumps(data)))
    assert again == features
    assert again.to_dict() == data
    assert again.arrow_schema.field("col").type == features.arrow_schema.field("col").type


def test_canonical_dict_shape():
    features = sds.Features({"label": sds.ClassLabel(names=["a", "b"]), "m": {"v": sds.Value("int8")}})
    assert features.to_dict() == {
        "label": {"_type": "ClassLabel", "names": ["a", "b"], "num_classes": 2},
        "m": {"_type": "Struct", "fields": {"v": {"_type": "Value", "dtype": "int8"}}},
    }


def test_unknown_feature_type_is_named():
    with pytest.raises(ValueError, match="unknown feature type 'Audio'"):
        feature_from_dict({"_type": "Audio"})


def test_value_dtype_aliases_and_errors():
    assert sds.Value(np.float32).dtype == "float32"
    assert sds.Value(int).dtype == "int64"
    assert sds.Value("float").dtype == "float32"
    with pytest.raises(ValueError, match="unsupported dtype 'complex64'"):
        sds.Value("complex64")


@pytest.mark.parametrize(("feature", "value", "message"), [
    (sds.Value("int8"), 300, "value 300 is out of range for int8"),
    (sds.Value("uint8"), -1, "out of range for uint8"),
    (sds.Value("int64"), "3", "expected an integer for int64, got str"),
    (sds.Value("int64"), 1.5, "expected an integer"),
    (sds.Value("float32"), "x", "expected a number"),
    (sds.Value("string"), 3, "expected a str, got int"),
    (sds.Value("binary"), "text", "expected bytes, got str"),
    (sds.Value("bool"), 1, "expected a bool"),
    (sds.ClassLabel(names=["a", "b"]), 2, r"label 2 is out of range \[0, 2\)"),
    (sds.ClassLabel(names=["a", "b"]), "c", "unknown class name 'c'"),
    (sds.Sequence(sds.Value("int32")), 5, "expected a list, got int"),
    (sds.Sequence(sds.Value("int32"), length=2), [1], "expected a list of length 2, got length 1"),
    (sds.Array2D((2, 2), "float32"), np.zeros((2, 3)), r"expected shape \(2, 2\), got \(2, 3\)"),
    (sds.Array2D((2, 2), "int32"), np.zeros((2, 2), dtype=np.float64), "expected dtype int32, got float64"),
    (sds.Image(), b"not an image", "undecodable image: 12 bytes"),
    (sds.Image(), np.zeros((4, 4), dtype=np.float32), r"image arrays must be uint8 \(or uint16 for png\), got float32"),
    (sds.Image(), np.zeros((4, 4, 2), dtype=np.uint8), "must be HxW, HxWx1, HxWx3 or HxWx4"),
    (sds.Image(), "/does/not/exist.png", "cannot read image file '/does/not/exist.png'"),
])
def test_encode_rejects_bad_values_with_field_name(feature, value, message):
    with pytest.raises(EncodingError, match=message) as info:
        feature.encode(value, "outer.col")
    assert info.value.field == "outer.col"
    assert str(info.value).startswith("field 'outer.col': ")


def test_struct_keys_are_checked_with_their_path():
    features = sds.Features({"a": sds.Value("int8"), "m": {"x": sds.Value("int8")}})
    with pytest.raises(EncodingError, match="missing key 'x'") as info:
        features.encode({"a": 1, "m": {}}, "")
    assert info.value.field == "m.x"
    with pytest.raises(EncodingError, match="unexpected key 'zz'") as info:
        features.encode({"a": 1, "m": {"x": 1}, "zz": 2}, "")
    assert info.value.field == "zz"


def test_class_label_conversions():
    label = sds.ClassLabel(names=["cat", "dog", "eel"])
    assert label.str2int("dog") == 1
    assert label.str2int(["eel", "cat"]) == [2, 0]
    assert label.int2str(2) == "eel"
    assert label.int2str([0, 1]) == ["cat", "dog"]
    assert label.encode("eel", "f") == 2 and label.encode(np.int64(1), "f") == 1
    with pytest.raises(ValueError, match="out of range"):
        label.int2str(3)
    with pytest.raises(ValueError, match="does not match 2 names"):
        sds.ClassLabel(num_classes=3, names=["a", "b"])
    assert sds.ClassLabel(num_classes=2).names == ["0", "1"]


def _encode_decode(feature, value, numpy=False):
    encoder = BatchEncoder(sds.Features({"c": feature}))
    encoder.add({"c": value})
    batch = encoder.flush()
    column = batch.column(0)
    row = feature.decode(column[0].as_py(), numpy=numpy)
    col = feature.decode_array(column, numpy=numpy)
    return row, col


def test_image_round_trip_rgb_exact_and_grayscale_expanded():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    row, col = _encode_decode(sds.Image(), rgb)
    np.testing.assert_array_equal(row, rgb)
    np.testing.assert_array_equal(col[0], rgb)
    gray = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    row, _ = _encode_decode(sds.Image(), gray)
    assert row.shape == (4, 6, 3) and row.dtype == np.uint8
    np.testing.assert_array_equal(row[:, :, 1], gray)
    rgba = np.dstack([rgb, np.full((5, 7), 255, np.uint8)])
    row, _ = _encode_decode(sds.Image(), rgba)
    np.testing.assert_array_equal(row, rgb)


def test_image_accepts_bytes_paths_and_dicts(tmp_path):
    rgb = np.full((3, 3, 3), 7, dtype=np.uint8)
    png = sds.Image().encode(rgb, "c")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    path = tmp_path / "x.png"
    path.write_bytes(png)
    assert sds.Image().encode(path, "c") == png
    assert sds.Image().encode(str(path), "c") == png
    assert sds.Image().encode({"bytes": png, "path": None}, "c") == png
    jpeg = sds.Image(format="jpeg", quality=80).encode(rgb, "c")
    assert jpeg[:2] == b"\xff\xd8"
    assert sds.Image().decode(png, decode=False) == png


def test_arrays_decode_to_zero_copy_views():
    grid = np.arange(6, dtype=np.float32).reshape(2, 3)
    row, col = _encode_decode(sds.Array2D((2, 3), "float32"), grid)
    np.testing.assert_array_equal(row, grid)
    assert col[0].shape == (2, 3)
    encoder = BatchEncoder(sds.Features({"c": sds.Array2D((2, 3), "float32")}))
    for k in range(4):
        encoder.add({"c": grid + k})
    column = encoder.flush().column(0)
    stacked = sds.Array2D((2, 3), "float32").decode_array(column, numpy=True)
    assert stacked.shape == (4, 2, 3)
    assert not stacked.flags.owndata  # a view of the Arrow buffer, not a copy
    np.testing.assert_array_equal(stacked[3], grid + 3)


def test_sequence_outputs_lists_or_arrays():
    feature = sds.Sequence(sds.Value("int32"))
    row, col = _encode_decode(feature, [1, 2, 3])
    assert row == [1, 2, 3] and col == [[1, 2, 3]]
    row, col = _encode_decode(feature, np.array([4, 5], dtype=np.int64), numpy=True)
    assert isinstance(row, np.ndarray) and row.dtype == np.int32
    np.testing.assert_array_equal(col[0], [4, 5])
    with pytest.raises(EncodingError, match="cannot store ndarray"):
        feature.encode(np.array([1.5]), "s")


def test_nulls_are_allowed():
    features = sds.Features({"v": sds.Value("int32"), "i": sds.Image(), "s": sds.Sequence(sds.Value("int8"))})
    encoder = BatchEncoder(features)
    encoder.add({"v": None, "i": None, "s": None})
    batch = encoder.flush()
    assert batch.column(0).null_count == 1
    assert features["v"].decode_array(batch.column(0)) == [None]


def test_infer_features_from_arrow():
    schema = pa.schema([("a", pa.int32()), ("b", pa.list_(pa.string())), ("c", pa.struct([("d", pa.float64())]))])
    features = sds.Features.from_arrow_schema(schema)
    assert features == sds.Features({"a": sds.Value("int32"), "b": sds.Sequence(sds.Value("string")),
                                     "c": {"d": sds.Value("float64")}})
    stored = sds.Features({"img": sds.Image()})
    assert sds.Features.from_arrow_schema(stored.arrow_schema) == stored


@pytest.mark.parametrize("fmt", ["png", "jpeg", "webp"])
def test_truncated_or_foreign_bytes_are_refused(fmt):
    rgb = np.random.default_rng(1).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    good = sds.Image(format=fmt).encode(rgb, "c")
    assert sds.Image().encode(good, "c") == good
    with pytest.raises(EncodingError, match="undecodable image"):
        sds.Image().encode(good[: len(good) // 2], "c")
    with pytest.raises(EncodingError, match="undecodable image"):
        sds.Image().encode(b"%PDF-1.4 not an image", "c")


def test_unsigned_arrays_take_python_ints_and_int64_arrays_that_fit():
    """Python ints become int64 in numpy; an Array2D("uint8") from nested lists (a mask, a tiny
    image) or from np.array(...) of int64 is stored when every value fits, and an element that
    does not fit is named."""
    feature = sds.Array2D((2, 2), "uint8")
    stored = feature.encode([[0, 1], [254, 255]], "mask")
    assert stored.dtype == np.uint8 and stored.tolist() == [0, 1, 254, 255]
    assert feature.encode(np.array([[1, 2], [3, 4]]), "mask").tolist() == [1, 2, 3, 4]
    with pytest.raises(EncodingError, match=r"value -1 does not fit uint8") as info:
        feature.encode([[0, 1], [-1, 3]], "mask")
    assert info.value.field == "mask[1][0]"
    with pytest.raises(EncodingError, match=r"value 256 does not fit uint8"):
        feature.encode([[0, 1], [2, 256]], "mask")
    with pytest.raises(EncodingError, match="expected dtype uint8, got float64"):
        feature.encode([[0.5, 1], [2, 3]], "mask")
