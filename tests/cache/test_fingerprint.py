from __future__ import annotations

import shutil

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError
from tests.conftest import TOY_BUILDER


def _load(path, **kwargs):
    return sds.load_dataset(str(path), split="train", **kwargs)


def _calls(counter):
    return len(counter.read_text()) if counter.exists() else 0


@pytest.fixture
def counter(tmp_path, monkeypatch):
    path = tmp_path / "calls"
    monkeypatch.setenv("TOY_COUNTER", str(path))
    return path


def test_unchanged_builder_reopens_without_generating(toy_builder, counter):
    first = _load(toy_builder)
    assert _calls(counter) == 1
    again = _load(toy_builder)
    assert _calls(counter) == 1
    assert again.cache_dirs == first.cache_dirs
    assert again[3]["text"] == "row 3"


@pytest.mark.parametrize(("old", "new"), [
    ('sds.ClassLabel(names=["neg", "pos"])', 'sds.ClassLabel(names=["negative", "positive"])'),
    ('"text": sds.Value("string")', '"text": sds.Value("large_string")'),
    ('sds.Version("1.0.0")', 'sds.Version("1.0.1")'),
    ('description="toy data"', 'description="toy data, edited"'),  # any source edit
])
def test_changes_make_a_new_fingerprint_and_rebuild(write_builder, counter, old, new):
    path = write_builder("toy", TOY_BUILDER)
    before = _load(path)
    assert old in TOY_BUILDER
    write_builder("toy", TOY_BUILDER.replace(old, new))
    after = _load(path)
    assert _calls(counter) == 2
    assert after.cache_dirs[0].parent.name != before.cache_dirs[0].parent.name
    assert before.cache_dirs[0].exists()  # old cache untouched; it is simply never served


def test_image_format_changes_fingerprint(write_builder, counter):
    source = TOY_BUILDER.replace('"text": sds.Value("string"),', '"text": sds.Value("string"), "img": sds.Image(),')
    source = source.replace('"text": f"row {i}",', '"text": f"row {i}", "img": np.zeros((2, 2), np.uint8),')
    path = write_builder("toy", source)
    png = _load(path)
    write_builder("toy", source.replace("sds.Image()", 'sds.Image(format="webp")'))
    webp = _load(path)
    assert _calls(counter) == 2
    assert png.cache_dirs[0].parent != webp.cache_dirs[0].parent
    assert webp.features["img"].format == "webp"


def test_config_field_and_storage_options_change_fingerprint(toy_builder, counter):
    a = _load(toy_builder)
    b = _load(toy_builder, rows=7)
    c = _load(toy_builder, layout_options={"compression": "zstd"})
    assert _calls(counter) == 3
    assert len({a.cache_dirs[0], b.cache_dirs[0], c.cache_dirs[0]}) == 3
    assert len(b) == 7


def test_builder_fingerprint_is_deterministic(toy_builder):
    one = sds.load_builder(str(toy_builder)).fingerprint()
    two = sds.load_builder(str(toy_builder)).fingerprint()
    assert one == two and len(one) == 16
    assert sds.load_builder(str(toy_builder), rows=3).fingerprint() != one


def test_download_modes_rebuild(toy_builder, counter):
    _load(toy_builder)
    _load(toy_builder, download_mode="force_rebuild")
    assert _calls(counter) == 2
    _load(toy_builder, download_mode="force_redownload")
    assert _calls(counter) == 3
    _load(toy_builder)
    assert _calls(counter) == 3


def test_cache_opens_from_metadata_alone(toy_builder, tmp_path):
    ds = _load(toy_builder)
    moved = tmp_path / "elsewhere" / "train"
    shutil.copytree(ds.cache_dirs[0], moved)
    toy_builder.unlink()
    opened = sds.open_cache(moved)
    assert opened.features == ds.features
    assert opened.info.description == "toy data"
    assert opened[49]["meta"] == {"score": 24.5, "tags": ["a"]}
    assert len(opened) == 50


def test_truncated_shard_is_refused_and_rebuilt(toy_builder, counter):
    ds = _load(toy_builder)
    shard = ds.cache_dirs[0] / "shard-00000.arrow"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(CacheError, match="shard-00000.arrow: shard is .* bytes but _metadata.json records"):
        sds.open_cache(ds.cache_dirs[0])
    rebuilt = _load(toy_builder)
    assert _calls(counter) == 2
    assert rebuilt[10]["id"] == 10


def _exec_builder(body: str):
    namespace: dict = {"sds": sds, "__name__": "notebook_cell"}
    exec(compile(body, "<notebook>", "exec"), namespace)
    return namespace["Cell"]


CELL = """
class Cell(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features={"x": sds.Value("int64")})
    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train")]
    def _generate_examples(self):
        for i in range(3):
            yield i, {"x": i * FACTOR}
"""


def test_builders_without_source_fingerprint_their_bytecode():
    one = _exec_builder(CELL.replace("FACTOR", "2"))().fingerprint()
    same = _exec_builder(CELL.replace("FACTOR", "2"))().fingerprint()
    other = _exec_builder(CELL.replace("FACTOR", "3"))().fingerprint()
    assert one == same and one != other
