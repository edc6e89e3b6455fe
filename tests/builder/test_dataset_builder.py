from __future__ import annotations

import json

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.errors import ExampleError
from tests.conftest import TOY_BUILDER

BAD_BUILDER = """
import numpy as np
import stable_datasets as sds

class Bad(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "label": sds.ClassLabel(names=["a", "b"]), "grid": sds.Array2D((2, 2), "int32"),
            "image": sds.Image(), "n": sds.Value("int16")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        good = {"label": 0, "grid": np.zeros((2, 2), np.int32), "image": np.zeros((2, 2), np.uint8), "n": 1}
        for i in range(1500):  # past the first batch, so a failure happens after data was written
            yield f"k{i}", dict(good)
        yield "bad", BAD
"""

CASES = [
    ("{'label': 0, 'grid': np.zeros((2, 2), np.int32), 'image': np.zeros((2, 2), np.uint8)}",
     "field 'n': missing key 'n'"),
    ("{'label': 0, 'grid': np.zeros((2, 2), np.int32), 'image': np.zeros((2, 2), np.uint8), 'n': 1, 'x': 1}",
     "field 'x': unexpected key 'x'"),
    ("{'label': 0, 'grid': np.zeros((2, 2), np.int32), 'image': np.zeros((2, 2), np.uint8), 'n': 'one'}",
     "field 'n': expected an integer for int16, got str"),
    ("{'label': 5, 'grid': np.zeros((2, 2), np.int32), 'image': np.zeros((2, 2), np.uint8), 'n': 1}",
     r"field 'label': label 5 is out of range \[0, 2\)"),
    ("{'label': 0, 'grid': np.zeros((3, 2), np.int32), 'image': np.zeros((2, 2), np.uint8), 'n': 1}",
     r"field 'grid': expected shape \(2, 2\), got \(3, 2\)"),
    ("{'label': 0, 'grid': np.zeros((2, 2), np.float64), 'image': np.zeros((2, 2), np.uint8), 'n': 1}",
     "field 'grid': expected dtype int32, got float64"),
    ("{'label': 0, 'grid': np.zeros((2, 2), np.int32), 'image': b'GIF89a\\x02\\x00\\x02\\x00-broken', 'n': 1}",
     "field 'image': undecodable image"),
]


@pytest.mark.parametrize(("bad", "message"), CASES)
def test_bad_examples_fail_with_context_and_publish_nothing(write_builder, cache_root, bad, message):
    path = write_builder("bad", BAD_BUILDER.replace("BAD", bad))
    with pytest.raises(ExampleError, match=message) as info:
        sds.load_dataset(str(path), split="train")
    assert str(info.value).startswith("builder 'bad', split 'train', example key 'bad', ")
    assert info.value.key == "bad"
    leftovers = [p.name for p in cache_root.rglob("*") if p.is_dir()]
    assert not any(name.startswith(".staging") or name == "train" for name in leftovers), leftovers


def test_duplicate_keys_are_refused(write_builder, cache_root):
    path = write_builder("dup", BAD_BUILDER.replace("BAD", "dict(good)").replace('yield "bad"', 'yield "k7"'))
    with pytest.raises(ExampleError, match="builder 'dup', split 'train', example key 'k7': duplicate example key"):
        sds.load_dataset(str(path), split="train")
    assert not list(cache_root.rglob("_metadata.json"))


def test_generator_must_yield_pairs(write_builder):
    path = write_builder("nopair", TOY_BUILDER.replace("yield i, {", "yield {"))
    with pytest.raises(ExampleError, match="must yield \\(key, example\\) pairs"):
        sds.load_dataset(str(path), split="train")


class Parses(sds.GeneratorBasedBuilder):
    FAIL_AT = 0

    def _info(self):
        return sds.DatasetInfo(features={"x": sds.Value("int64")})

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"starts": [0, 100]})]

    def _generate_examples(self, starts):
        for start in starts:
            for i in range(start, start + 100):
                if i == self.FAIL_AT:
                    raise KeyError(f"missing field 'q' in record {i}")
                yield f"r{i}", {"x": i}


class ParsesLater(Parses):
    FAIL_AT = 142


@pytest.mark.parametrize("num_proc", [None, 2])
def test_an_exception_from_generate_examples_says_where_the_builder_stopped(cache_root, num_proc):
    """The builder's own exception (a KeyError from a missing field in its source file, say) keeps
    its type and gains a note naming the builder, the split and the last key it yielded."""
    with pytest.raises(KeyError, match="record 0") as info:
        sds.load_dataset(Parses, split="train", num_proc=num_proc)
    assert info.value.__notes__ == ["raised by builder 'parses' generating split 'train', before its first example"]
    with pytest.raises(KeyError, match="record 142") as info:
        sds.load_dataset(ParsesLater, split="train", num_proc=num_proc)
    assert info.value.__notes__ == [
        "raised by builder 'parses_later' generating split 'train', after example key 'r141'"]
    assert not list(cache_root.rglob("_metadata.json"))


def test_loading_one_split_builds_only_that_split(toy_builder, cache_root, tmp_path, monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("TOY_COUNTER", str(counter))
    ds = sds.load_dataset(str(toy_builder), split="test")
    assert ds[0]["id"] == 1000
    assert counter.read_text() == "x"
    published = sorted(published_path(p.parent).name for p in cache_root.rglob("_metadata.json"))
    assert published == ["test"]


def test_configs_defaults_and_overrides(write_builder):
    source = TOY_BUILDER.replace(
        "    BUILDER_CONFIG_CLASS = ToyConfig\n",
        "    BUILDER_CONFIG_CLASS = ToyConfig\n"
        "    BUILDER_CONFIGS = [ToyConfig(name='small', rows=3), ToyConfig(name='big', rows=9)]\n"
        "    DEFAULT_CONFIG_NAME = 'big'\n")
    path = write_builder("cfg", source)
    assert len(sds.load_dataset(str(path), split="train")) == 9
    assert len(sds.load_dataset(str(path), split="train", name="small")) == 3
    assert len(sds.load_dataset(str(path), split="train", name="small", rows=4)) == 4
    with pytest.raises(ValueError, match=r"has no config 'huge'; configs are \['big', 'small'\]"):
        sds.load_builder(str(path), "huge")
    with pytest.raises(ValueError, match=r"ToyConfig has no field\(s\) \['colour'\]"):
        sds.load_builder(str(path), colour="red")
    with pytest.raises(ValueError, match="ToyConfig.rows expects int, got str '3'"):
        sds.load_builder(str(path), rows="3")
    with pytest.raises(ValueError, match="ToyConfig.rows expects int, got bool True"):
        sds.load_builder(str(path), rows=True)


def test_metadata_records_everything(toy_builder, cache_root):
    ds = sds.load_dataset(str(toy_builder), split="train")
    directory = ds.cache_dirs[0]
    meta = json.loads((directory / "_metadata.json").read_text())
    assert meta["num_rows"] == 50 and meta["split"] == "train" and meta["layout"] == "arrow_shards"
    assert meta["builder_name"] == "toy" and meta["config_name"] == "default" and meta["version"] == "1.0.0"
    assert meta["fingerprint"] == directory.parent.name
    assert meta["fingerprint_inputs"]["config"]["rows"] == 50
    assert meta["features"] == ds.features.to_dict()
    assert meta["info"]["description"] == "toy data"
    assert meta["library_version"] == sds.__version__ and meta["created_at"]
    from stable_datasets.cache.publish import file_sha256

    for shard in meta["shards"]:
        path = directory / shard["path"]
        assert path.stat().st_size == shard["num_bytes"]
        assert file_sha256(path) == shard["sha256"]
    assert sum(s["num_rows"] for s in meta["shards"]) == 50
    relative = published_path(directory).relative_to(cache_root).parts
    assert relative[:3] == ("toy", "default", "1.0.0") and relative[4] == "train"


def test_builder_api_without_script(cache_root):
    class Squares(sds.GeneratorBasedBuilder):
        def _info(self):
            return sds.DatasetInfo(features={"x": sds.Value("int32"), "sq": sds.Value("int64")})

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator(sds.Split.TRAIN, {"n": 5})]

        def _generate_examples(self, n):
            for i in range(n):
                yield i, {"x": i, "sq": i * i}

    ds = sds.load_dataset(Squares, split="train")
    assert ds["sq"] == [0, 1, 4, 9, 16]
    assert Squares.builder_name() == "squares"
    assert isinstance(ds[0]["x"], int)
    np.testing.assert_array_equal(ds.with_format("numpy")["sq"], [0, 1, 4, 9, 16])


def test_unknown_split_and_bad_modes(toy_builder):
    with pytest.raises(ValueError, match=r"has no split 'validation'; splits are \['test', 'train'\]"):
        sds.load_dataset(str(toy_builder), split="validation")
    with pytest.raises(ValueError, match="download_mode must be one of"):
        sds.load_dataset(str(toy_builder), split="train", download_mode="sometimes")
    with pytest.raises(ValueError, match="cannot parse split 'train\\[x\\]'"):
        sds.load_dataset(str(toy_builder), split="train[x]")


def test_a_typo_in_a_split_sum_fails_before_any_split_is_built(toy_builder, tmp_path):
    with pytest.raises(ValueError, match=r"has no split 'tset'; splits are \['test', 'train'\]"):
        sds.load_dataset(str(toy_builder), split="train+tset", cache_dir=tmp_path)
    assert not list(tmp_path.rglob("_metadata.json"))  # 'train' was not built first
    assert len(sds.load_dataset(str(toy_builder), split="train+test", cache_dir=tmp_path)) > 0
    with pytest.raises(ValueError, match="has no split 'tset'"):  # cached splits do not hide the typo
        sds.load_dataset(str(toy_builder), split="train+tset", cache_dir=tmp_path)


def test_failed_build_leaves_no_hashing_threads(write_builder):
    import threading

    path = write_builder("bad", BAD_BUILDER.replace("BAD", "{'label': 9}"))
    with pytest.raises(ExampleError):
        sds.load_dataset(str(path), split="train")
    assert not [t for t in threading.enumerate() if t.name.startswith("hash ")]


SHARDED_BUILDER = """
import stable_datasets as sds

class Sharded(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features={"part": sds.Value("int32"), "i": sds.Value("int64")})

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"parts": list(range(5)), "rows": 700})]

    def _generate_examples(self, parts, rows):
        for part in parts:
            for i in range(rows):
                yield KEY, {"part": part, "i": i}
"""


def test_num_proc_builds_the_same_rows_in_order(write_builder):
    path = write_builder("sharded", SHARDED_BUILDER.replace("KEY", "(part, i)"))
    sequential = sds.load_dataset(str(path), split="train")
    parallel = sds.load_dataset(str(path), split="train", num_proc=2, download_mode="force_rebuild")
    # num_proc is not part of the fingerprint: the same cache, rebuilt
    assert [published_path(d) for d in parallel.cache_dirs] == [published_path(d) for d in sequential.cache_dirs]
    assert len(parallel) == 3500
    assert parallel["part"] == [p for p in range(5) for _ in range(700)]
    meta = json.loads((parallel.cache_dirs[0] / "_metadata.json").read_text())
    assert [s["path"] for s in meta["shards"]] == ["shard-00000.arrow", "shard-00001.arrow"]
    assert not [p for p in parallel.cache_dirs[0].iterdir() if p.name.startswith(".job")]


def test_num_proc_finds_duplicate_keys_across_workers(write_builder, cache_root):
    path = write_builder("sharded", SHARDED_BUILDER.replace("KEY", "i"))
    with pytest.raises(ExampleError, match="duplicate example key"):
        sds.load_dataset(str(path), split="train", num_proc=2)
    assert not list(cache_root.rglob("_metadata.json"))


def test_split_gen_kwargs():
    from stable_datasets.builder.builder import split_gen_kwargs

    jobs = split_gen_kwargs({"files": ["a", "b", "c"], "labels": [1, 2, 3], "mode": "x"}, 2)
    assert jobs == [{"files": ["a", "b"], "labels": [1, 2], "mode": "x"},
                    {"files": ["c"], "labels": [3], "mode": "x"}]
    assert split_gen_kwargs({"mode": "x"}, 4) == [{"mode": "x"}]
    assert len(split_gen_kwargs({"files": ["a", "b"]}, 8)) == 2
    with pytest.raises(ValueError, match="equal lengths"):
        split_gen_kwargs({"files": ["a"], "labels": [1, 2]}, 2)


def test_errors_survive_pickling():
    import pickle

    from stable_datasets.errors import EncodingError

    err = pickle.loads(pickle.dumps(ExampleError("b", "train", ("k", 1), "f.g", "bad value")))
    assert str(err) == "builder 'b', split 'train', example key ('k', 1), field 'f.g': bad value"
    assert err.key == ("k", 1) and err.field == "f.g"
    enc = pickle.loads(pickle.dumps(EncodingError("a.b", "nope")))
    assert str(enc) == "field 'a.b': nope" and enc.field == "a.b"


@pytest.mark.parametrize("storage_format", ["arrow", "lance"])
def test_failed_build_publishes_nothing_in_any_layout(write_builder, cache_root, storage_format):
    import threading

    path = write_builder("bad", BAD_BUILDER.replace("BAD", "{**good, 'label': 9}"))
    with pytest.raises(ExampleError, match="field 'label': label 9 is out of range"):
        sds.load_dataset(str(path), split="train", storage_format=storage_format)
    assert not list(cache_root.rglob("_metadata.json"))
    assert not [p for p in cache_root.rglob(".staging*")]
    assert not [t for t in threading.enumerate() if t.name in ("lance writer",) or t.name.startswith("hash ")]
