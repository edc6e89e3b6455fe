"""Republishing a cache never disturbs its readers: loads racing a rebuild, and datasets already open."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import build_base, current_build, published_path
from stable_datasets.cli import main
from tests.stress.readers_during_rebuilds import LAYOUTS, prepare, run_layout

ROWS = 12


@pytest.mark.parametrize("layout", ["arrow", "lance"])
def test_loads_racing_a_rebuilder_never_fail(tmp_path, layout):
    """The short form of tests/stress/readers_during_rebuilds.py (numbers in benchmarks/RESULTS.md)."""
    result = run_layout(layout, tmp_path / "work", tmp_path / "cache", readers=2, builds=4, rows=ROWS)
    assert result["errors"] == [] and result["failed"] == 0
    assert result["tried"] > 0 and result["builds"] == 4


def _tags(ds) -> list[str]:
    return ds.with_format("arrow").select_columns(["tag"])[:].column("tag").to_pylist()


def _load(script, clip, layout, **kwargs):
    video = str(clip) if layout == "video_frames" else ""
    storage_format = "arrow" if layout == "video_frames" else layout
    return sds.load_dataset(str(script), split="train", rows=ROWS, video=video, storage_format=storage_format,
                            **kwargs)


def _in_other_process(code: str, cache_root, tag: str) -> None:
    env = {**os.environ, "STABLE_DATASETS_CACHE_DIR": str(cache_root), "BUILD_TAG": tag}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _read_tags_in_forked_worker(ds) -> list[str]:
    return _tags(ds)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_open_dataset_keeps_its_rows_after_republishes(tmp_path, cache_root, monkeypatch, layout):
    script, clip = prepare(tmp_path / "work")
    monkeypatch.setenv("BUILD_TAG", "first")
    ds = _load(script, clip, layout)  # opened, nothing read yet: files are opened lazily
    rows = len(ds)
    rebuild = f"""
        import stable_datasets as sds
        sds.load_dataset({str(script)!r}, split="train", rows={ROWS}, storage_format={layout if layout != "video_frames"
                         else "arrow"!r}, video={str(clip) if layout == "video_frames" else ""!r},
                         download_mode="force_rebuild")
    """
    _in_other_process(rebuild, cache_root, "second")
    assert len(ds) == rows and _tags(ds) == ["first"] * rows
    # `rm` of every cache of the builder, then a build, in another process: still the rows it opened
    _in_other_process("""
        from stable_datasets.cli import main
        assert main(["rm", "tagged"]) == 0
    """ + rebuild.replace('download_mode="force_rebuild"', ""), cache_root, "third")
    assert _tags(ds) == ["first"] * rows
    # a worker forked after all this reopens the files by path: the same build, the same rows
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_read_tags_in_forked_worker, (ds,)) == ["first"] * rows
    assert _tags(_load(script, clip, layout)) == ["third"] * rows
    link = published_path(ds.cache_dirs[0])
    old_build = ds.cache_dirs[0]
    assert old_build.is_dir() and current_build(link) != old_build  # superseded but kept: it is in use
    del ds
    gc.collect()
    assert main(["prune"]) == 0
    assert not old_build.exists()
    assert [p.name for p in link.parent.iterdir() if build_base(p)] == [current_build(link).name]
