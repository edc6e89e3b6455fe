"""Incremental rebuilds (issue 24 part 5): after files of a generic loader are edited, added or removed,
only the parts of the changed files are read again; the cache equals a full build in a fresh root."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger

import stable_datasets as sds
from stable_datasets.builder.file_groups import content_groups
from stable_datasets.cache.metadata import CacheMetadata
from stable_datasets.loaders.json_files import JsonLoader
from stable_datasets.loaders.webdataset_files import WebDatasetLoader
from stable_datasets.write.reuse import PART_KEYS_FILE, PARTS_KEY

FEATURES = sds.Features({"id": sds.Value("int64"), "text": sds.Value("string")})
TARGET = 3000  # bytes per part in these tests: about two files of 40 rows each


def write_file(folder: Path, name: str, rows: int, tag: str = "") -> None:
    start = sum(map(ord, name)) * 1000
    with open(folder / name, "w") as fh:
        for r in range(rows):
            fh.write(json.dumps({"id": start + r, "text": f"{name} row {r}{tag}"}) + "\n")


def build(data: Path, root: Path, **kwargs) -> tuple[Path, sds.StableDataset]:
    builder = sds.load_builder("json", cache_dir=str(root), data_files=str(data / "*.jsonl"), features=FEATURES)
    directory = builder.prepare("train", **kwargs)["train"]
    return Path(directory), sds.open_cache(directory)


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(JsonLoader, "PART_TARGET_BYTES", TARGET)


@pytest.fixture
def pieces_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the JSON loader reads, in order (the build runs in this process)."""
    seen: list[str] = []
    original = JsonLoader.read_piece

    def counting(self, piece, conform=True):
        seen.append(os.path.basename(piece[0]))
        yield from original(self, piece, conform)

    monkeypatch.setattr(JsonLoader, "read_piece", counting)
    return seen


@pytest.fixture
def log_lines() -> list[str]:
    lines: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda message: lines.append(message.record["message"]), level="INFO")
    yield lines
    logger.remove(sink)


def groups_of(data: Path) -> list[tuple[tuple[str, int, int], ...]]:
    """The loader's file groups, each as its files' (name, size, mtime): what a part's key covers."""
    files = sorted(data.glob("*.jsonl"))
    names = [f.name for f in files]
    stats = [f.stat() for f in files]
    return [tuple((f.name, s.st_size, s.st_mtime_ns) for f, s in zip(files[lo:hi], stats[lo:hi]))
            for lo, hi in content_groups(names, [s.st_size for s in stats], TARGET)]


def test_edit_one_add_one_remove_one_of_twenty_reads_only_their_parts(tmp_path, small_parts, pieces_read, log_lines):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(20):
        write_file(data, f"f{i:02d}.jsonl", 40)
    first_dir, first = build(data, tmp_path / "root")
    before = groups_of(data)
    assert len(before) >= 5  # the test means something only with several parts
    assert CacheMetadata.read(first_dir).extra[PARTS_KEY] == [[key, 1] for key, _ in
                                                              CacheMetadata.read(first_dir).extra[PARTS_KEY]]
    old_rows = first.to_arrow()

    write_file(data, "f03.jsonl", 41, tag=" edited")
    write_file(data, "f07b.jsonl", 5)
    (data / "f12.jsonl").unlink()
    after = groups_of(data)
    pieces_read.clear()
    log_lines.clear()
    again_dir, again = build(data, tmp_path / "root")

    rebuilt = [g for g in after if g not in before]
    assert sorted(pieces_read) == sorted(name for group in rebuilt for name, _, _ in group)
    assert {"f03.jsonl", "f07b.jsonl"} <= set(pieces_read) and len(pieces_read) < 10
    assert f"reused {len(after) - len(rebuilt)} of {len(after)} parts from {first_dir}" in log_lines

    fresh_dir, fresh = build(data, tmp_path / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow())
    assert again_dir.parent.name == fresh_dir.parent.name  # the fingerprint folder
    assert CacheMetadata.read(again_dir).fingerprint == CacheMetadata.read(fresh_dir).fingerprint
    assert len(again) == 20 * 40 + 1 + 5 - 40
    assert again["text"][3 * 40 + 40] == "f03.jsonl row 40 edited"
    assert sds.open_cache(first_dir).to_arrow().equals(old_rows)  # the old cache is untouched and still opens
    assert not list((tmp_path / "root").rglob(".staging*"))


def test_unchanged_inputs_are_linked_not_copied(tmp_path, small_parts):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        write_file(data, f"f{i:02d}.jsonl", 40)
    first_dir, _ = build(data, tmp_path / "root")
    write_file(data, "f99.jsonl", 3)  # sorts last: only the last group changes
    again_dir, _ = build(data, tmp_path / "root")
    old = {s.sha256: os.stat(first_dir / s.path).st_ino for s in CacheMetadata.read(first_dir).shards}
    new = {s.sha256: os.stat(again_dir / s.path).st_ino for s in CacheMetadata.read(again_dir).shards}
    shared = [digest for digest in new if digest in old]
    assert len(shared) >= len(new) - 2 and all(new[d] == old[d] for d in shared)


def test_a_bad_edit_publishes_nothing_and_the_old_cache_stays(tmp_path, small_parts):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(10):
        write_file(data, f"f{i:02d}.jsonl", 40)
    first_dir, first = build(data, tmp_path / "root")
    (data / "f04.jsonl").write_text('{"id": 1, "text": "ok"}\n{"id": "not a number", "text": 2\n')
    with pytest.raises(Exception, match="f04.jsonl"):
        build(data, tmp_path / "root")
    folders = [p for p in (tmp_path / "root").rglob("train") if p != first_dir]
    assert folders == [] and not list((tmp_path / "root").rglob(".staging*"))
    assert sds.open_cache(first_dir).to_arrow().equals(first.to_arrow())
    write_file(data, "f04.jsonl", 40, tag=" fixed")
    _again_dir, again = build(data, tmp_path / "root")
    _fresh_dir, fresh = build(data, tmp_path / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow())


@pytest.mark.parametrize("storage_format", ["parquet", "lance"])
def test_other_layouts(tmp_path, small_parts, pieces_read, log_lines, storage_format):
    """Parquet shards are reused like Arrow ones; Lance commits one dataset, so it is built whole, and says so."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(10):
        write_file(data, f"f{i:02d}.jsonl", 40)
    build(data, tmp_path / "root", storage_format=storage_format)
    write_file(data, "f05.jsonl", 40, tag=" edited")
    pieces_read.clear()
    log_lines.clear()
    debug_lines: list[str] = []
    sink = logger.add(lambda message: debug_lines.append(message.record["message"]), level="DEBUG",
                      filter=lambda record: record["level"].name == "DEBUG")
    try:
        _, again = build(data, tmp_path / "root", storage_format=storage_format)
    finally:
        logger.remove(sink)
    read = len(pieces_read)
    _, fresh = build(data, tmp_path / "fresh", storage_format=storage_format)
    assert again.to_arrow().equals(fresh.to_arrow())
    if storage_format == "lance":
        assert read == 10
        # a build that can reuse nothing is an ordinary full build: said at DEBUG, not at INFO
        assert any(line.startswith("json 'train': no part of the 1 earlier cache(s)") and "a full build" in line
                   for line in debug_lines)
        assert not [line for line in log_lines if "can be reused" in line]
    else:
        assert read < 10 and any(line.startswith("reused ") for line in log_lines)


def write_tar(folder: Path, name: str, samples: int, tag: str = "") -> None:
    with tarfile.open(folder / name, "w") as tar:
        for s in range(samples):
            data = f"{name} sample {s}{tag}".encode()
            info = tarfile.TarInfo(f"s{s:03d}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_keyed_loader_keeps_part_keys_and_still_finds_duplicates(tmp_path, monkeypatch):
    """WebDataset rows are keyed: reused parts bring their keys, so the check spans the whole split."""
    monkeypatch.setattr(WebDatasetLoader, "PART_TARGET_BYTES", 20_000)
    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        write_tar(data, f"t{i:02d}.tar", 3)

    def load(root: Path, files: list[str] | str) -> tuple[Path, sds.StableDataset]:
        builder = sds.load_builder("webdataset", cache_dir=str(root), data_files=files)
        directory = builder.prepare("train")["train"]
        return Path(directory), sds.open_cache(directory)

    first_dir, _ = load(tmp_path / "root", str(data / "*.tar"))
    assert (first_dir / PART_KEYS_FILE).is_file() and len(CacheMetadata.read(first_dir).extra[PARTS_KEY]) > 2
    write_tar(data, "t03.tar", 4, tag=" edited")
    _, again = load(tmp_path / "root", str(data / "*.tar"))
    _, fresh = load(tmp_path / "fresh", str(data / "*.tar"))
    assert again.to_arrow().equals(fresh.to_arrow()) and len(again) == 12 * 3 + 1
    twice = [str(p) for p in sorted(data.glob("*.tar"))] + [str(data / "t00.tar")]
    with pytest.raises(sds.errors.ExampleError, match="duplicate example key within the split"):
        load(tmp_path / "root", twice)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 60), min_size=1, max_size=12),
       edits=st.lists(st.tuples(st.sampled_from(["edit", "add", "remove", "touch"]), st.integers(0, 99),
                                st.integers(0, 60)), min_size=1, max_size=4))
def test_any_edit_set_equals_a_fresh_build(tmp_path_factory, small_parts, sizes, edits):
    base = tmp_path_factory.mktemp("edits")
    data = base / "data"
    data.mkdir()
    for i, rows in enumerate(sizes):
        write_file(data, f"f{i:02d}.jsonl", rows)
    build(data, base / "root")
    for number, (op, which, rows) in enumerate(edits):
        files = sorted(data.glob("*.jsonl"))
        target = files[which % len(files)] if files else None
        if op == "add" or target is None:
            write_file(data, f"f{which:02d}x{number}.jsonl", rows)
        elif op == "remove" and len(files) > 1:
            target.unlink()
        elif op == "touch":
            os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
        else:
            write_file(data, target.name, rows, tag=f" edit {number}")
    again_dir, again = build(data, base / "root")
    fresh_dir, fresh = build(data, base / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow())
    assert CacheMetadata.read(again_dir).fingerprint == CacheMetadata.read(fresh_dir).fingerprint
    assert CacheMetadata.read(again_dir).num_rows == len(fresh)


LINES_BUILDER = """
import os
import stable_datasets as sds

class Lines(sds.GeneratorBasedBuilder):
    INCREMENTAL_FILES = "paths"

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"line": sds.Value("string"), "file": sds.Value("string")}))

    def _split_generators(self, dl_manager):  # data_dir: the files are in the fingerprint by identity
        folder = self.config.data_dir
        paths = sorted(os.path.join(folder, n) for n in os.listdir(folder))
        return [sds.SplitGenerator("train", {"paths": paths, "tags": [os.path.basename(p) for p in paths]})]

    def _generate_examples(self, paths, tags):
        for path, tag in zip(paths, tags):
            with open(path) as fh:
                for number, line in enumerate(fh):
                    yield f"{tag}:{number}", {"line": line.rstrip("\\n"), "file": tag}
"""


def test_a_builder_naming_its_files_is_rebuilt_by_parts(tmp_path, write_builder, monkeypatch, log_lines):
    """`INCREMENTAL_FILES` names the gen_kwargs list of files: a builder's edit rebuilds only its groups."""
    script = write_builder("lines", LINES_BUILDER)
    monkeypatch.setattr(sds.DatasetBuilder, "PART_TARGET_BYTES", 30_000)  # two or three files a part
    data = tmp_path / "lines"
    data.mkdir()
    for i in range(30):
        (data / f"l{i:02d}.txt").write_text("".join(f"file {i} line {r} " * 20 + "\n" for r in range(30)))

    def build(root: Path) -> tuple[Path, sds.StableDataset]:
        directory = sds.load_builder(str(script), cache_dir=str(root), data_dir=str(data)).prepare("train")["train"]
        return Path(directory), sds.open_cache(directory)

    first_dir, _ = build(tmp_path / "root")
    (data / "l11.txt").write_text("edited\n")
    log_lines.clear()
    _, again = build(tmp_path / "root")
    _, fresh = build(tmp_path / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow()) and len(again) == 29 * 30 + 1
    reused = [line for line in log_lines if line.startswith("reused ")]
    assert len(reused) == 1 and reused[0].endswith(f"parts from {first_dir}")
    done, total = map(int, reused[0].split()[1:4:2])
    assert total > 2 and total - 2 <= done < total


def test_a_build_stopped_midway_shows_nothing_and_the_next_run_finishes_it(tmp_path, small_parts, monkeypatch):
    """An infrastructure failure (a lost disk, a killed worker) keeps the staging folder for the next run, which
    links the reused parts again; nothing is visible meanwhile, and `verify` finds the result whole."""
    from stable_datasets.layouts.open import verify_cache

    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        write_file(data, f"f{i:02d}.jsonl", 40)
    build(data, tmp_path / "root")
    write_file(data, "f06.jsonl", 40, tag=" edited")
    original = JsonLoader.read_piece

    def failing(self, piece, conform=True):
        if piece[0].endswith("f06.jsonl"):
            raise OSError("the disk went away")
        yield from original(self, piece, conform)

    monkeypatch.setattr(JsonLoader, "read_piece", failing)
    with pytest.raises(OSError, match="the disk went away"):
        build(data, tmp_path / "root")
    published = [p for p in (tmp_path / "root").rglob("_metadata.json")]
    assert len(published) == 1 and list((tmp_path / "root").rglob(".staging*"))  # kept, not visible
    monkeypatch.setattr(JsonLoader, "read_piece", original)
    again_dir, again = build(data, tmp_path / "root")
    _, fresh = build(data, tmp_path / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow()) and verify_cache(again_dir) == []
    assert not list((tmp_path / "root").rglob(".staging*"))


def test_parallel_builds_reuse_parts_too(tmp_path, small_parts, log_lines):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        write_file(data, f"f{i:02d}.jsonl", 40)
    first_dir, _ = build(data, tmp_path / "root", num_proc=2)
    write_file(data, "f02.jsonl", 7, tag=" edited")
    log_lines.clear()
    _, again = build(data, tmp_path / "root", num_proc=2)
    _, fresh = build(data, tmp_path / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow())
    assert any(line.startswith("reused ") and line.endswith(f"parts from {first_dir}") for line in log_lines)


@pytest.mark.timeout(120)
def test_object_store_roots_build_whole_and_say_so(tmp_path, small_parts, s3_env, log_lines):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(6):
        write_file(data, f"f{i:02d}.jsonl", 40)
    load = lambda: sds.load_dataset("json", data_files=str(data / "*.jsonl"), split="train",  # noqa: E731
                                    features=FEATURES)
    assert len(load()) == 240
    write_file(data, "f03.jsonl", 5, tag=" edited")
    log_lines.clear()
    again = load()
    assert len(again) == 205 and again["text"][3 * 40] == "f03.jsonl row 0 edited"
    assert "json 'train': on an object-store root no part of an earlier cache is reused: a full build" in log_lines
    assert not any(line.startswith("reused ") for line in log_lines)


def _damage_in_place(directory: Path) -> Path:
    """Change a byte of the cache's first shard where a row's text is, keeping its size (bit rot, a bad disk)."""
    shard = directory / CacheMetadata.read(directory).shards[0].path
    data = shard.read_bytes()
    at = data.index(b" row 1")
    shard.chmod(0o644)
    with open(shard, "r+b") as fh:
        fh.seek(at + 1)
        fh.write(b"R")
    return shard


def test_a_rebuild_never_links_a_damaged_part_and_verify_finds_nothing(tmp_path, small_parts, log_lines):
    """A reused part's files were checked by size only: a same-size damage that `verify` reports was linked into
    the new cache (its rows wrong, its metadata's checksum false). Checked by sha256 now, as the dedup store is."""
    from stable_datasets.layouts.open import verify_cache

    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        write_file(data, f"f{i:02d}.jsonl", 40)
    first_dir, first = build(data, tmp_path / "root")
    del first
    shard = _damage_in_place(first_dir)
    assert [p.split(": ")[1].split(" ")[0] for p in verify_cache(first_dir)] == ["sha256"]
    write_file(data, "f99.jsonl", 3)  # sorts last: only the last group changes, the damaged part is reusable
    again_dir, again = build(data, tmp_path / "root")
    assert verify_cache(again_dir) == []
    _fresh_dir, fresh = build(data, tmp_path / "fresh")
    assert again.to_arrow().equals(fresh.to_arrow())
    assert os.stat(again_dir / CacheMetadata.read(again_dir).shards[0].path).st_ino != shard.stat().st_ino


def test_force_rebuild_reuses_no_part(tmp_path, small_parts, pieces_read, log_lines):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        write_file(data, f"f{i:02d}.jsonl", 40)
    _first_dir, first = build(data, tmp_path / "root")
    del first
    write_file(data, "f99.jsonl", 3)
    build(data, tmp_path / "root")  # an incremental rebuild: the first cache's parts are reused
    write_file(data, "f98.jsonl", 3)
    pieces_read.clear()
    log_lines.clear()
    _again_dir, again = build(data, tmp_path / "root", download_mode="force_rebuild")
    assert sorted(pieces_read) == sorted(p.name for p in data.glob("*.jsonl"))
    assert not [line for line in log_lines if line.startswith("reused ")]
    assert len(again) == 12 * 40 + 3 + 3
