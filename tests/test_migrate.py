"""`stable-datasets migrate`: upstream caches become ours, through the write path; the source is only read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.cli import main
from stable_datasets.layouts.open import verify_cache
from tests.upstream_caches import (
    write_tiny_video,
    write_upstream_cache,
    write_upstream_frames_cache,
    write_upstream_lance_cache,
)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _migrate(capsys, *argv: str) -> tuple[int, list]:
    code = main(["--json", "migrate", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else []


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_migrate_converts_an_upstream_cache_and_leaves_it_untouched(capsys, tmp_path, cache_root, storage_format):
    upstream = write_upstream_cache(tmp_path / "upstream" / "mnist_default_train_0123456789abcdef", [3, 4])
    before = _snapshot(upstream)
    expected = sds.open_cache(upstream)
    dest = tmp_path / "ours"
    code, done = _migrate(capsys, str(upstream), "--dest", str(dest), "--storage-format", storage_format)
    assert code == 0 and done == [{"source": str(upstream.resolve()), "path": str(dest.absolute()), "rows": 7,
                                   "layout": {"arrow": "arrow_shards", "parquet": "parquet_shards",
                                              "lance": "lance_rows"}[storage_format]}]
    assert _snapshot(upstream) == before
    ours = sds.open_cache(dest)
    meta = ours.cache_metadata[0]
    assert (meta.builder_name, meta.config_name, meta.split, meta.num_rows) == ("mnist", "default", "train", 7)
    assert all(len(s.sha256) == 64 for s in meta.shards) and verify_cache(dest) == []
    assert ours.features == expected.features
    for i in range(7):
        got, want = ours[i], expected[i]
        assert np.array_equal(got["image"], want["image"])
        assert {k: v for k, v in got.items() if k != "image"} == {k: v for k, v in want.items() if k != "image"}
    assert ours.with_format("python", decode=False)[5]["image"] == expected.with_format("python", decode=False)[5][
        "image"]  # the stored PNG bytes, not re-encoded


def test_migrate_a_folder_of_upstream_caches_in_parallel_parts(capsys, tmp_path, cache_root):
    root = tmp_path / "upstream-root"
    write_upstream_cache(root / "mnist_default_train_0123456789abcdef", [5, 6, 7])
    write_upstream_cache(root / "mnist_default_test_fedcba9876543210", [])  # an empty split: zero shards
    write_upstream_lance_cache(root / "cifar_default_train_00112233445566ff", 4)
    (root / "not-a-cache").mkdir()
    code, done = _migrate(capsys, str(root), "--num-proc", "2")
    assert code == 0
    assert [(Path(d["path"]).relative_to(cache_root), d["rows"]) for d in done] == [
        (Path("migrated/upstream-root/cifar_default_train_00112233445566ff"), 4),
        (Path("migrated/upstream-root/mnist_default_test_fedcba9876543210"), 0),
        (Path("migrated/upstream-root/mnist_default_train_0123456789abcdef"), 18)]
    train = sds.open_cache(done[2]["path"])
    assert [r["caption"] for r in train] == [f"digit {i}" for i in range(18)]  # parts joined in order
    assert len(sds.open_cache(done[1]["path"])) == 0
    main(["--json", "ls"])
    listed = json.loads(capsys.readouterr().out)
    assert sorted((e["name"], e["split"], e["status"]) for e in listed) == [
        ("cifar", "train", "unknown"), ("mnist", "test", "unknown"), ("mnist", "train", "unknown")]
    assert main(["prune"]) == 0 and "nothing to prune" in capsys.readouterr().out  # never deleted as stale


def test_migrate_refuses_what_it_cannot_convert(capsys, tmp_path, cache_root, toy_builder):
    ours = sds.load_dataset(str(toy_builder), split="train", rows=3).cache_dirs[0]
    assert main(["migrate", str(ours)]) == 1
    assert "not a cache of the upstream stable-datasets" in capsys.readouterr().err
    assert main(["migrate", str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err
    upstream = write_upstream_cache(tmp_path / "up" / "toy_default_train_0123456789abcdef", [2])
    assert main(["migrate", str(upstream), "--dest", str(ours)]) == 1
    assert "a cache is already published there" in capsys.readouterr().err
    assert main(["migrate", str(upstream), "--dest", str(upstream / "inside")]) == 1
    assert "must be outside the upstream cache" in capsys.readouterr().err
    frames = write_upstream_cache(tmp_path / "frames", [1], layout="lance-video-frames")
    assert main(["migrate", str(frames), "--dest", str(tmp_path / "f")]) == 1
    assert "an upstream lance-video-frames cache must list its videos" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()


def test_a_migration_that_fails_midway_publishes_nothing(tmp_path, cache_root, monkeypatch):
    from stable_datasets import migrate

    upstream = write_upstream_cache(tmp_path / "up" / "toy_default_train_0123456789abcdef", [4, 4])
    real = migrate.UpstreamRows.examples

    def dies_after_five(self, job):
        for position, row in real(self, job):
            if position == 5:
                raise RuntimeError("source went away")
            yield position, row

    monkeypatch.setattr(migrate.UpstreamRows, "examples", dies_after_five)
    with pytest.raises(RuntimeError, match="source went away"):
        migrate.migrate_cache(upstream, tmp_path / "dest")
    assert not (tmp_path / "dest").exists() and not list(tmp_path.rglob(".staging-*"))
    monkeypatch.setattr(migrate.UpstreamRows, "examples", real)
    assert len(sds.open_cache(migrate.migrate_cache(upstream, tmp_path / "dest") and tmp_path / "dest")) == 8


@pytest.mark.parametrize("storage_format", ["arrow", "parquet"])
def test_an_empty_split_is_read_with_zero_shards_or_one_empty_shard(tmp_path, toy_builder, storage_format):
    """Upstream writes an empty split as zero shards, we write one empty shard: both forms read."""
    ds = sds.load_dataset(str(toy_builder), split="train", rows=0, storage_format=storage_format)
    build = ds.cache_dirs[0]
    assert [s.num_rows for s in ds.cache_metadata[0].shards] == [0] and len(ds) == 0
    meta = json.loads((build / "_metadata.json").read_text())
    for shard in meta["shards"]:
        (build / shard["path"]).unlink()
    (build / "_metadata.json").write_text(json.dumps({**meta, "shards": []}))
    zero = sds.open_cache(build)
    assert len(zero) == 0 and list(zero) == [] and zero.features == ds.features and verify_cache(build) == []
    upstream = write_upstream_cache(tmp_path / "up" / "toy_default_test_0123456789abcdef", [0])  # one empty shard
    assert len(sds.open_cache(upstream)) == 0
    assert len(sds.open_cache(write_upstream_cache(tmp_path / "up" / "toy_default_val_0123456789abcdef", []))) == 0


def test_migrate_an_upstream_video_frames_cache_copies_its_frames(capsys, tmp_path, cache_root):
    videos = [(write_tiny_video(tmp_path / "a.mp4"), {"label": 3, "caption": "five"}),
              (write_tiny_video(tmp_path / "b.mp4", frames=7), {"label": 4, "caption": "seven"})]
    upstream = write_upstream_frames_cache(tmp_path / "up" / "clips_default_train_0123456789abcdef", videos)
    before = _snapshot(upstream)
    for path, _ in videos:
        path.unlink()  # the source videos are gone: the frames are copied, not decoded again
    dest = tmp_path / "ours"
    code, done = _migrate(capsys, str(upstream), "--dest", str(dest))
    assert code == 0 and done[0]["layout"] == "lance_video_frames" and done[0]["rows"] == 2
    assert _snapshot(upstream) == before
    ours, theirs = sds.open_cache(dest, window_length=3, hop=2), sds.open_cache(upstream, window_length=3, hop=2)
    meta = ours.cache_metadata[0]
    assert [(v["frames"], v["first_row"], v["height"], v["source"]) for v in meta.extra["videos"]] == [
        (5, 0, 12, str(videos[0][0])), (7, 5, 12, str(videos[1][0]))]
    assert verify_cache(dest) == [] and len(ours) == len(theirs) == 5
    raw_ours, raw_theirs = ours.with_format("python", decode=False), theirs.with_format("python", decode=False)
    for i in range(5):
        assert raw_ours[i] == raw_theirs[i]  # the same WebP bytes, windows and columns
    assert ours[4]["caption"] == "seven" and ours[4]["frame_indices"] == [4, 5, 6]
