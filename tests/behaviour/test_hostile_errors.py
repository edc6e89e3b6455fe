"""Inputs that used to fail with someone else's error (UnicodeEncodeError, cv2.error, a bare
ValueError) or not at all (1e300 stored as inf): each is now an error of ours that names the
builder, split, example key and field."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import ConfigurationError, CorruptCellError, ExampleError


def probe(features: dict, value: dict) -> type:
    class Probe(sds.GeneratorBasedBuilder):
        def _info(self):
            return sds.DatasetInfo(features=sds.Features(features))

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train")]

        def _generate_examples(self):
            yield "fine", {k: None for k in features}
            yield "k1", value

    return Probe


def build_error(features: dict, value: dict) -> str:
    with pytest.raises(ExampleError) as info:
        sds.load_dataset(probe(features, value), split="train")
    return str(info.value)


WHERE = "builder 'probe', split 'train', example key 'k1', field "


@pytest.mark.parametrize("features, value, message", [
    ({"t": sds.Value("string")}, {"t": "a\ud800b"},
     "'t': string has a lone surrogate '\\ud800' at position 1 and cannot be stored as UTF-8: 'a\\ud800b'"),
    ({"t": sds.Sequence(sds.Value("string"))}, {"t": ["ok", "caf\udce9"]},
     "'t[1]': string has a lone surrogate '\\udce9' at position 3 and cannot be stored as UTF-8: 'caf\\udce9'"),
    ({"m": {"name": sds.Value("string")}}, {"m": {"name": "\udfff"}},
     "'m.name': string has a lone surrogate '\\udfff' at position 0"),
    ({"img": sds.Image()}, {"img": np.zeros((0, 0, 3), np.uint8)},
     "'img': an image needs at least one pixel, got shape (0, 0, 3)"),
    ({"img": sds.Image()}, {"img": np.zeros((0, 5), np.uint8)}, "'img': an image needs at least one pixel"),
    ({"x": sds.Value("float32")}, {"x": 1e300},
     "'x': value 1e+300 does not fit float32 (largest finite value 3.40282e+38); it would be stored as inf"),
    ({"x": sds.Value("float16")}, {"x": 70000}, "'x': value 70000.0 does not fit float16"),
    ({"x": sds.Value("float32")}, {"x": 10 ** 400}, "'x': value 1" + "0" * 400 + " does not fit float32"),
    ({"x": sds.Sequence(sds.Value("float32"))}, {"x": [1.0, 1e300]}, "'x[1]': value 1e+300 does not fit float32"),
    ({"x": sds.Sequence(sds.Value("float32"))}, {"x": np.array([1.0, 2.0, -1e300])},
     "'x[2]': value -1e+300 does not fit float32 (it would be stored as -inf)"),
    ({"x": sds.Array2D((1, 2), "float32")}, {"x": np.array([[1.0, 1e300]])},
     "'x[0][1]': value 1e+300 does not fit float32 (it would be stored as inf)"),
    ({"x": sds.Array2D((1, 2), "int8")}, {"x": np.array([[1, 300]])},
     "'x[0][1]': value 300 does not fit int8 (it would be stored as 44)"),
])
def test_unstorable_values_name_builder_split_key_and_field(features, value, message):
    assert build_error(features, value).startswith(WHERE + message)


def test_storable_edge_values_still_round_trip():
    features = {"t": sds.Value("string"), "x": sds.Value("float32"), "s": sds.Sequence(sds.Value("float32")),
                "a": sds.Array2D((1, 3), "float32")}
    value = {"t": "héllo \U0001f600", "x": float("inf"), "s": np.array([np.nan, -np.inf, 3.4e38]),
             "a": np.array([[1.0, np.inf, -2.5]])}
    ds = sds.load_dataset(probe(features, value), split="train")
    row = ds[1]
    assert row["t"] == "héllo \U0001f600" and row["x"] == float("inf")
    assert np.isnan(row["s"][0]) and row["s"][1:] == [-np.inf, np.float32(3.4e38)]
    assert row["a"].tolist() == [[1.0, np.inf, -2.5]]


@pytest.mark.parametrize("text", ["abc", "-5", "nan", "1e3x"])
def test_lock_timeout_that_is_not_a_number(monkeypatch, text):
    monkeypatch.setenv("STABLE_DATASETS_LOCK_TIMEOUT", text)
    with pytest.raises(ConfigurationError, match=f"STABLE_DATASETS_LOCK_TIMEOUT='{text}' is not a number of "
                                                 r"seconds >= 0 \(unset it for the default of one hour\)"):
        sds.load_dataset(probe({"x": sds.Value("int64")}, {"x": 1}), split="train")


def test_lock_timeout_accepts_numbers(monkeypatch):
    from stable_datasets.cache.lock import default_timeout

    for text, seconds in (("0", 0.0), ("2.5", 2.5), (" 60 ", 60.0), ("inf", float("inf")), ("", 3600.0)):
        monkeypatch.setenv("STABLE_DATASETS_LOCK_TIMEOUT", text)
        assert default_timeout() == seconds


def test_damaged_stored_image_is_a_cache_error():
    from stable_datasets.cache.metadata import CacheMetadata

    ds = sds.load_dataset(probe({"img": sds.Image()}, {"img": np.full((4, 4, 3), 7, np.uint8)}), split="train")
    shard = ds.cache_dirs[0] / CacheMetadata.read(ds.cache_dirs[0]).shards[0].path
    data = bytearray(shard.read_bytes())
    png = data.find(b"IDAT")
    data[png + 6] ^= 0xFF  # inside the compressed pixels: the file still maps, the image no longer decodes
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptCellError, match=r"stored image of \d+ bytes could not be decoded \(the cache is "
                                               r"damaged: `stable-datasets verify` finds the file\)"):
        sds.open_cache(ds.cache_dirs[0])[1]
