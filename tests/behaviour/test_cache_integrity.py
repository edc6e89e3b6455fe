"""Caches that cannot serve wrong rows: one folder per split name, `_metadata.json` checked on open."""

from __future__ import annotations

import json

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.paths import folder_name_to_split, split_folder_name
from stable_datasets.cli import main
from stable_datasets.errors import CacheError, StableDatasetsError
from stable_datasets.layouts.open import verify_cache
from tests.stress.readers_during_rebuilds import prepare

TRICKY_SPLITS = ["train", "train.", "训练", "测试", "..", "_", ".", "a/b", "a%2Fb", "x@0123456789abcdef"]

SPLITS_BUILDER = """
import stable_datasets as sds

class Splits(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"split": sds.Value("string"), "i": sds.Value("int64")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator(name, {"name": name}) for name in NAMES]

    def _generate_examples(self, name):
        for i in range(3):
            yield i, {"split": name, "i": i}
"""


def test_split_folder_names_are_one_to_one_and_reversible():
    folders = [split_folder_name(name) for name in TRICKY_SPLITS]
    assert len(set(folders)) == len(folders)
    assert [folder_name_to_split(f) for f in folders] == TRICKY_SPLITS
    assert folders[:2] == ["train", "train."] and split_folder_name("validation") == "validation"
    assert all(not f.startswith(".") and "@" not in f and "/" not in f for f in folders)
    assert split_folder_name("训练") == "%E8%AE%AD%E7%BB%83"


@pytest.mark.parametrize(("name", "message"), [("", "must not be empty"), ("a\x00b", "NUL"),
                                               ("\ud800x", "not valid Unicode"), ("训" * 30, "too long")])
def test_names_that_cannot_be_folders_are_refused(name, message):
    with pytest.raises(StableDatasetsError, match=message):
        split_folder_name(name)


def test_every_split_gets_its_own_rows(write_builder, cache_root):
    names = [n for n in TRICKY_SPLITS if "/" not in n]  # SplitGenerator refuses "/" (and "[]+:")
    path = write_builder("splits", SPLITS_BUILDER.replace("NAMES", repr(names)))
    every = sds.load_dataset(str(path))  # split=None builds every split, whatever its name
    assert sorted(every) == sorted(names) and all(every[n]["split"] == [n] * 3 for n in names)
    assert len({published_path(every[n].cache_dirs[0]) for n in names}) == len(names)
    for name in [n for n in names if "%" not in n and "@" not in n]:  # what parse_split reads
        assert sds.load_dataset(str(path), split=name)["split"] == [name] * 3, name
    assert sds.load_dataset(str(path), split="测试")["split"] == ["测试"] * 3


def test_config_folders_are_one_to_one(cache_root):
    from stable_datasets.cache.paths import fingerprint_dir

    folders = {fingerprint_dir(cache_root, "b", config, "1.0.0", "f") for config in ("a/b", "a_b", "a.b", ".a", "a")}
    assert len(folders) == 5


def test_a_split_name_that_cannot_be_stored_fails_the_build_clearly(write_builder):
    path = write_builder("splits", SPLITS_BUILDER.replace("NAMES", repr(["训" * 40])))
    with pytest.raises(StableDatasetsError, match="too long to be a folder name"):
        sds.load_dataset(str(path), split="训" * 40)


# -- _metadata.json ---------------------------------------------------------------------------------
def _mutations():
    def shard_rows(meta, delta):
        meta["shards"][0]["num_rows"] += delta
        return meta

    return {
        "num_rows lowered": (lambda m: {**m, "num_rows": m["num_rows"] - 1}, "num_rows is"),
        "num_rows raised": (lambda m: {**m, "num_rows": m["num_rows"] + 100}, "num_rows is"),
        "num_rows a string": (lambda m: {**m, "num_rows": str(m["num_rows"])}, "num_rows must be an integer, got str"),
        "num_rows negative": (lambda m: {**m, "num_rows": -1}, "num_rows must be a non-negative integer"),
        "a list": (lambda m: [m], "must hold a JSON object, got a list"),
        "unknown layout": (lambda m: {**m, "layout": "zip_shards"}, "unknown layout 'zip_shards'"),
        "no shards": (lambda m: {k: v for k, v in m.items() if k != "shards"}, "has no 'shards'"),
        "shard not an object": (lambda m: {**m, "shards": [7]}, r"shards\[0\] must be an object"),
        "shard size a string": (lambda m: {**m, "shards": [{**m["shards"][0], "num_bytes": "9"}]},
                                r"shards\[0\].num_bytes must be a non-negative integer"),
        "shard leaves the folder": (lambda m: {**m, "shards": [{**m["shards"][0], "path": "../x.arrow"}]},
                                    "leaves the cache directory"),
        "bad checksum text": (lambda m: {**m, "shards": [{**m["shards"][0], "sha256": "zz"}]}, "64 hex digits"),
        "features not readable": (lambda m: {**m, "features": {"x": {"_type": "Nope"}}}, "features cannot be read"),
        "shard rows only": (lambda m: shard_rows(m, -1), "num_rows is"),
        "not JSON": (None, "not JSON"),
        "not UTF-8": (b"\xff\xfe{\x00", "invalid cache metadata: not UTF-8 text"),
    }


MUTATIONS = _mutations()


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_damaged_metadata_is_a_clear_error_then_rebuilt(toy_builder, capsys, mutation):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=30)
    link = published_path(ds.cache_dirs[0])
    metadata_file = link / "_metadata.json"
    change, message = MUTATIONS[mutation]
    if isinstance(change, bytes):
        metadata_file.write_bytes(change)
    elif change is None:
        metadata_file.write_text("{not json")
    else:
        metadata_file.write_text(json.dumps(change(json.loads(metadata_file.read_text()))))
    with pytest.raises(CacheError, match=message) as raised:
        sds.open_cache(link)
    assert str(metadata_file.resolve()) in str(raised.value)
    assert verify_cache(link) and main(["verify", str(link)]) == 1
    capsys.readouterr()
    assert main(["verify", "toy"]) == 1  # by builder name: the unreadable cache is found by its folder
    assert "BAD" in capsys.readouterr().out
    rebuilt = sds.load_dataset(str(toy_builder), split="train", rows=30)
    assert rebuilt["id"] == list(range(30)) and verify_cache(link) == []


LAYOUT_KWARGS = {"arrow": {}, "parquet": {"storage_format": "parquet"}, "lance": {"storage_format": "lance"}}


def _tagged(tmp_path, layout):
    script, clip = prepare(tmp_path / "work")
    if layout == "video_frames":
        return sds.load_dataset(str(script), split="train", rows=3, video=str(clip))
    return sds.load_dataset(str(script), split="train", rows=30, **LAYOUT_KWARGS[layout])


@pytest.mark.parametrize("layout", ["arrow", "parquet", "lance", "video_frames"])
def test_row_counts_are_checked_both_ways_on_every_layout(tmp_path, capsys, layout):
    ds = _tagged(tmp_path, layout)
    link = published_path(ds.cache_dirs[0])
    metadata_file = link / "_metadata.json"
    original = json.loads(metadata_file.read_text())
    for delta in (-1, 1):
        # num_rows alone: the shard entries disagree with it
        metadata_file.write_text(json.dumps({**original, "num_rows": original["num_rows"] + delta}))
        with pytest.raises(CacheError, match="num_rows is"):
            sds.open_cache(link)
        assert main(["verify", "tagged"]) == 1
        # num_rows and the shard entries changed together: the stored files disagree
        meta = json.loads(json.dumps(original))
        data = next(s for s in meta["shards"] if s["num_rows"])
        data["num_rows"] += delta
        if layout == "video_frames":
            meta["extra"]["videos"][-1]["frames"] += delta
        else:
            meta["num_rows"] += delta
        metadata_file.write_text(json.dumps(meta))
        problems = verify_cache(link)
        assert len(problems) == 1 and ("holds" in problems[0]), problems
        with pytest.raises(CacheError, match="holds"):
            sds.open_cache(link)[0]
    capsys.readouterr()
    metadata_file.write_text(json.dumps(original))
    assert verify_cache(link) == [] and main(["verify", "tagged"]) == 0


def test_verify_reports_a_cache_whose_metadata_is_gone_from_the_folder_it_is_given(toy_builder, capsys):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=5)
    link = published_path(ds.cache_dirs[0])
    (link / "_metadata.json").write_text("[]")
    code = main(["verify", str(link)])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("BAD") and "must hold a JSON object" in out


def test_a_damaged_cache_found_by_load_dataset_is_rebuilt_in_a_new_build(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=20)
    link = published_path(ds.cache_dirs[0])
    meta = json.loads((link / "_metadata.json").read_text())
    (link / "_metadata.json").write_text(json.dumps({**meta, "num_rows": 19}))
    rebuilt = sds.load_dataset(str(toy_builder), split="train", rows=20)
    assert len(rebuilt) == 20 and rebuilt.cache_dirs[0] != ds.cache_dirs[0]
