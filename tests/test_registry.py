from __future__ import annotations

from importlib import metadata

import pytest

import stable_datasets as sds
from stable_datasets import registry
from stable_datasets.errors import BuilderNotFoundError, StableDatasetsError
from tests.conftest import TOY_BUILDER


def test_bundled_builders_are_listed():
    names = sds.list_builders()
    assert {"digits", "mnist", "cifar10"} <= set(names)
    assert "__init__" not in names


def test_resolve_by_path_folder_and_search_path(tmp_path, monkeypatch, write_builder):
    script = write_builder("toy", TOY_BUILDER)
    assert registry.resolve_builder_class(str(script)).builder_name() == "toy"
    folder = tmp_path / "myset"
    folder.mkdir()
    (folder / "myset.py").write_text(TOY_BUILDER)
    assert registry.resolve_builder_class(str(folder)).builder_name() == "myset"
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(script.parent))
    assert "toy" in sds.list_builders()
    assert registry.resolve_builder_class("toy").builder_name() == "toy"
    assert len(sds.load_dataset("toy", split="train", rows=2)) == 2


def test_search_path_wins_over_bundled(tmp_path, monkeypatch):
    folder = tmp_path / "override"
    folder.mkdir()
    (folder / "digits.py").write_text(TOY_BUILDER)
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(folder))
    assert registry.resolve_builder_class("digits")._script_path == str((folder / "digits.py").resolve())


def test_entry_points(monkeypatch):
    ep = metadata.EntryPoint(name="plugin_toy", value="stable_datasets.builder.builder:GeneratorBasedBuilder",
                             group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"plugin_toy": ep})
    assert "plugin_toy" in sds.list_builders()
    assert registry.resolve_builder_class("plugin_toy") is sds.GeneratorBasedBuilder


def test_unknown_name_lists_close_matches():
    with pytest.raises(BuilderNotFoundError, match="no builder named 'digit'; did you mean 'digits'"):
        sds.load_builder("digit")
    with pytest.raises(BuilderNotFoundError, match="builder script /nope/x.py does not exist"):
        sds.load_builder("/nope/x.py")


def test_script_without_builder(write_builder):
    path = write_builder("empty", "X = 1\n")
    with pytest.raises(StableDatasetsError, match="defines no DatasetBuilder subclass"):
        sds.load_builder(str(path))


def test_a_cache_folder_given_to_load_dataset_is_not_read_as_json_data(tmp_path):
    """Before, load_dataset(<a cache folder>) inferred the "json" loader from `_metadata.json` and
    served that file as one row; a cache folder (a split's or its fingerprint folder) now points
    at open_cache."""
    ds = sds.StableDataset.from_dict({"x": [1, 2, 3]}, cache_dir=tmp_path)
    for folder in (ds.cache_dirs[0], ds.cache_dirs[0].parent):
        with pytest.raises(BuilderNotFoundError, match=r"is a stable-datasets cache, not a folder of data files: "
                                                       r"open it with stable_datasets\.open_cache"):
            sds.load_dataset(str(folder))
    assert sds.open_cache(ds.cache_dirs[0])["x"] == [1, 2, 3]


def test_a_bare_folder_name_in_the_working_directory_is_that_folder_when_no_builder_has_the_name(
        tmp_path, monkeypatch):
    """As Hugging Face reads load_dataset("data"); before: "no builder named 'data'". A builder of
    that name still wins (the folder is only the fallback)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("x\n1\n2\n")
    assert sds.load_dataset("data", split="train", cache_dir=tmp_path / "cache")["x"] == [1, 2]
    (tmp_path / "digits").mkdir()
    (tmp_path / "digits" / "train.csv").write_text("x\n1\n")
    assert sds.load_builder("digits").builder_name() == "digits"
    with pytest.raises(BuilderNotFoundError, match="no builder named 'nothing_here'"):
        sds.load_dataset("nothing_here", split="train")
