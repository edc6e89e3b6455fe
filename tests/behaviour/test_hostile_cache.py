"""Other people's work and files: prune never removes a live build's staging; path-stored
videos never change the user's source file; small indexing and failed-build rules."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.cache.inventory import staging_is_orphaned
from stable_datasets.cache.publish import OWNER_FILE
from stable_datasets.cli import main

HOST = socket.gethostname()
DAY = 86400


def staging(root: Path, name: str, owner: dict | None = None, age: float = 2 * DAY) -> Path:
    path = root / "x" / "default" / "1.0.0" / "abc" / name
    path.mkdir(parents=True)
    if owner is not None:
        (path / OWNER_FILE).write_text(json.dumps(owner))
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_live_owner_on_this_host_is_never_orphaned_whatever_its_age(cache_root):
    live = staging(cache_root, ".staging-train", {"host": HOST, "pid": os.getpid(), "started": time.time()})
    named = staging(cache_root, f".staging-test-{HOST}-{os.getpid()}-cafecafe")
    assert not staging_is_orphaned(live, 0) and not staging_is_orphaned(named, 0)
    assert main(["prune", "--max-staging-age", "0"]) == 0
    assert live.exists() and named.exists()


def test_dead_reused_and_foreign_owners(cache_root):
    dead = staging(cache_root, ".staging-a", {"host": HOST, "pid": (1 << 22) + 12345,  # above pid_max
                                              "started": time.time()}, age=0)
    # our pid, but the build it names started a day before this process did: the pid was reused
    reused = staging(cache_root, ".staging-b", {"host": HOST, "pid": os.getpid(), "started": time.time() - DAY},
                     age=0)
    old_foreign = staging(cache_root, ".staging-c", {"host": "elsewhere", "pid": 1, "started": 0}, age=2 * DAY)
    young_foreign = staging(cache_root, ".staging-d", {"host": "elsewhere", "pid": 1, "started": 0}, age=60)
    unreadable = staging(cache_root, ".staging-e", age=60)
    (unreadable / OWNER_FILE).write_text("{not json")
    verdicts = {p.name: staging_is_orphaned(p, DAY) for p in (dead, reused, old_foreign, young_foreign, unreadable)}
    assert verdicts == {".staging-a": True, ".staging-b": True, ".staging-c": True, ".staging-d": False,
                        ".staging-e": False}
    with pytest.raises(ValueError, match="max_age_seconds must be >= 0, got -3600"):
        staging_is_orphaned(dead, -3600)


def test_prune_during_a_live_build_keeps_its_staging(tmp_path, toy_builder, cache_root):
    """A real build in another process, slowed down; prune with a zero age runs while it writes."""
    env = {**os.environ, "TOY_SLEEP": "0.05", "STABLE_DATASETS_CACHE_DIR": str(cache_root)}
    script = f"import stable_datasets as sds; print(len(sds.load_dataset({str(toy_builder)!r}, split='train')))"
    build = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(cache_root.rglob(f".staging-*/{OWNER_FILE}")) and time.monotonic() < deadline:
            time.sleep(0.05)
        found = list(cache_root.rglob(f".staging-*/{OWNER_FILE}"))
        assert found, "the build never started"
        assert main(["prune", "--max-staging-age", "0"]) == 0
        assert found[0].parent.exists()
    finally:
        out, _ = build.communicate(timeout=300)
    assert build.returncode == 0 and out.strip() == "50"


# -- path-stored videos ----------------------------------------------------------------------
VIDEO_BUILDER = """
from dataclasses import dataclass, field
import stable_datasets as sds

@dataclass
class ClipsConfig(sds.BuilderConfig):
    files: list = field(default_factory=list)

class Clips(sds.GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = ClipsConfig

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"video": sds.Video(storage="path")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"files": self.config.files})]

    def _generate_examples(self, files):
        for i, path in enumerate(files):
            yield i, {"video": path}
"""


def _clip(path: Path, seed: int) -> Path:
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 5, (16, 16), True)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        writer.write(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8))
    writer.release()
    return path


def test_path_videos_leave_the_source_file_alone(tmp_path, write_builder):
    source = _clip(tmp_path / "private.mp4", 0)
    os.chmod(source, 0o600)
    before = (source.stat().st_mode & 0o777, source.stat().st_ino, source.read_bytes())
    path = write_builder("clips", VIDEO_BUILDER)
    ds = sds.load_dataset(str(path), split="train", files=[str(source)])
    stored = ds.cache_dirs[0] / json.loads((ds.cache_dirs[0] / "_metadata.json").read_text())[
        "extra_files"][0]["path"]
    assert (source.stat().st_mode & 0o777, source.stat().st_ino, source.read_bytes()) == before
    assert stored.stat().st_ino != source.stat().st_ino  # a copy (or a copy-on-write clone), never a hard link
    assert stored.read_bytes() == before[2]
    with open(source, "r+b") as fh:  # the user edits the source in place
        fh.seek(100)
        fh.write(b"\0" * 16)
    assert stored.read_bytes() == before[2]
    assert main(["verify", str(ds.cache_dirs[0])]) == 0


# -- small ones ------------------------------------------------------------------------------
def test_bool_keys_are_refused_and_negative_indices_named_as_given(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=359).select_columns(["id"])
    for key in (True, False, np.bool_(True)):
        with pytest.raises(TypeError, match="cannot index a dataset with a bool"):
            ds[key]
    with pytest.raises(IndexError, match=r"^index -360 is out of range for a dataset of 359 rows$"):
        ds[-360]
    with pytest.raises(IndexError, match=r"^index -360 is out of range for a dataset of 359 rows$"):
        ds.select(range(359))[-360]
    with pytest.raises(IndexError, match=r"^index 359 is out of range for a dataset of 359 rows$"):
        ds[359]
    assert ds[-359] == {"id": 0} and ds[np.int64(-1)] == {"id": 358}


@pytest.mark.parametrize(("error", "kept"), [(KeyboardInterrupt, True), (OSError, True), (RuntimeError, False)])
def test_failed_build_staging_is_kept_or_removed_as_documented(monkeypatch, toy_builder, cache_root, error, kept):
    """docs/caches-and-fingerprints.md: interrupts and OS errors keep the journaled shards, other errors don't."""
    from stable_datasets.layouts import arrow_shards

    real_write, calls = arrow_shards.Writer.write, {"n": 0}

    def failing_write(self, batch):
        calls["n"] += 1
        if calls["n"] == 2:  # after the first batch of 1000 rows, in finished (journaled) shards
            raise error("stop")
        return real_write(self, batch)

    monkeypatch.setattr(arrow_shards.Writer, "write", failing_write)
    with pytest.raises(error):
        sds.load_dataset(str(toy_builder), split="train", rows=2000, layout_options={"max_shard_size": 4096})
    assert not list(cache_root.rglob("_metadata.json"))
    staging = list(cache_root.rglob(".staging-train"))
    assert bool(staging) == kept
    if kept:
        journals = list(staging[0].rglob("_journal.jsonl"))  # the part's journal of finished shards
        assert journals and journals[0].read_text().count("\n") >= 1
        assert json.loads((staging[0] / OWNER_FILE).read_text())["pid"] == os.getpid()
    monkeypatch.setattr(arrow_shards.Writer, "write", real_write)
    ds = sds.load_dataset(str(toy_builder), split="train", rows=2000, layout_options={"max_shard_size": 4096})
    assert ds["id"] == list(range(2000)) and not list(cache_root.rglob(".staging-*"))
