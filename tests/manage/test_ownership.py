"""A builder's name is not its identity: `ls`, `prune` and `rm` go by the script a cache came from."""

from __future__ import annotations

import gc
import json
import shutil
import textwrap
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.metadata import METADATA_FILE
from stable_datasets.cli import main
from tests.conftest import TOY_BUILDER

SHAPES = """
import stable_datasets as sds

class Shapes(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"kind": sds.Value("string")}), description="DESCRIPTION")

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        for i, kind in enumerate(["KIND"] * 3):
            yield i, {"kind": kind}
"""


def run(capsys, *argv: str) -> tuple[int, list]:
    code = main(["--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else []


@pytest.fixture
def two_shapes(tmp_path: Path, cache_root: Path) -> tuple[Path, Path]:
    """Two different scripts, in two folders, whose builders are both called `shapes`."""
    scripts = []
    for team, kind in (("alice", "circle"), ("bob", "square")):
        folder = tmp_path / team
        folder.mkdir()
        script = folder / "shapes.py"
        script.write_text(textwrap.dedent(SHAPES).replace("KIND", kind).replace("DESCRIPTION", team))
        scripts.append(script)
    for script in scripts:
        sds.load_dataset(str(script), split="train")
    return scripts[0], scripts[1]


def _kinds(entries: list) -> list[str]:
    return sorted(sds.open_cache(e["path"])[0]["kind"] for e in entries)


def test_caches_of_builders_loaded_by_path_are_current_not_unknown(capsys, two_shapes):
    alice, _bob = two_shapes
    code, listed = run(capsys, "ls")
    assert code == 0 and [(e["name"], e["status"]) for e in listed] == [("shapes", "current")] * 2
    assert sorted(sds.open_cache(e["path"]).cache_metadata[0].builder_source for e in listed) == \
        sorted(str(p.resolve()) for p in two_shapes)
    alice.write_text(alice.read_text().replace('"alice"', '"alice, edited"'))
    _code, listed = run(capsys, "ls")
    assert sorted((_kinds([e]), e["status"]) for e in listed) == [(["circle"], "stale"), (["square"], "current")]


def test_prune_never_removes_another_scripts_current_cache(capsys, two_shapes, monkeypatch):
    alice, _bob = two_shapes
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(alice.parent))  # `shapes` now means alice's
    code, pruned = run(capsys, "prune")
    assert code == 0 and pruned == []
    assert _kinds(run(capsys, "ls")[1]) == ["circle", "square"]


def test_rm_removes_only_the_named_scripts_caches(capsys, two_shapes, monkeypatch):
    _alice, bob = two_shapes
    code = main(["rm", "shapes"])  # two scripts own caches called `shapes`, none is registered
    assert code == 2 and "several builders are named 'shapes'" in capsys.readouterr().err
    assert len(run(capsys, "ls")[1]) == 2
    code, removed = run(capsys, "rm", str(bob))
    assert code == 0 and len(removed) == 1
    assert _kinds(run(capsys, "ls")[1]) == ["circle"]
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(bob.parent))  # `shapes` is bob's: alice's stays
    assert main(["rm", "shapes"]) == 1
    assert _kinds(run(capsys, "ls")[1]) == ["circle"]


def test_caches_written_before_the_source_was_recorded_go_by_name(capsys, write_builder, monkeypatch):
    script = write_builder("toy", TOY_BUILDER)
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(script.parent))
    directory = sds.load_dataset("toy", split="train", rows=3).cache_dirs[0]
    meta_path = Path(directory) / METADATA_FILE
    old = json.loads(meta_path.read_text())
    del old["builder_source"]
    meta_path.write_text(json.dumps(old))
    assert [e["status"] for e in run(capsys, "ls")[1]] == ["current"]
    assert len(run(capsys, "rm", "toy")[1]) == 1


def test_prune_removes_map_caches_with_their_parent_and_empty_folders(capsys, write_builder, cache_root,
                                                                        monkeypatch):
    script = write_builder("toy", TOY_BUILDER)
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(script.parent))
    ds = sds.load_dataset("toy", split="train", rows=4)
    mapped = ds.map(lambda row: {"id2": row["id"] * 2})
    assert mapped[3]["id2"] == 6
    fingerprint_folder = published_path(Path(ds.cache_dirs[0])).parent
    assert any(".map-" in p.name for p in fingerprint_folder.iterdir())
    script.write_text(script.read_text().replace('description="toy data"', 'description="edited"'))
    del ds, mapped  # open datasets pin their builds
    gc.collect()
    code, pruned = run(capsys, "prune")
    assert code == 0
    kinds = sorted(p["kind"] for p in pruned)
    assert kinds[:2] == ["empty folder"] * 2 and "map cache of a stale cache" in kinds and "stale cache" in kinds
    assert not fingerprint_folder.exists()  # with the map cache and lock files of the builds
    assert not (cache_root / "toy").exists()  # the name, config and version folders were left empty too
    assert run(capsys, "ls")[1] == []


def test_prune_removes_a_map_cache_whose_parent_is_gone(capsys, toy_builder, cache_root):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=4)
    ds.map(lambda row: {"id2": row["id"] * 2})
    parent = published_path(Path(ds.cache_dirs[0]))  # the split's link, not its build folder
    del ds
    gc.collect()
    for build in parent.parent.glob(f"{parent.name}@*"):
        shutil.rmtree(build)
    parent.unlink()  # a cache removed by an older `rm`, which left the map cache behind
    code, pruned = run(capsys, "prune")
    assert code == 0 and [p["kind"] for p in pruned if p["kind"] not in ("empty folder", "stored copy no cache uses")
                          ] == ["map cache of a removed cache"]
    assert run(capsys, "ls")[1] == []
    assert not parent.parent.exists()


def test_prune_keeps_a_fingerprint_folder_whose_lock_is_held(capsys, cache_root):
    from stable_datasets.cache.lock import exclusive_lock
    from stable_datasets.manage.ownership import remove_empty_parents

    folder = cache_root / "x" / "default" / "1.0.0" / "abcd"
    with exclusive_lock(folder / ".train.lock"):  # a build about to start
        assert remove_empty_parents(folder / "train", cache_root) == []
    assert folder.is_dir()
    assert remove_empty_parents(folder / "train", cache_root) == [folder, *list(folder.parents)[:3]]
    assert not (cache_root / "x").exists() and cache_root.is_dir()
