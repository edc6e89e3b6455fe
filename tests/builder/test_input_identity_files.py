"""Inputs enter the fingerprint by what they are: files behind a glob, their size/mtime or content, ETags."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

import stable_datasets as sds
from stable_datasets.cache.content_hashes import MEMO_FILE
from tests.http_server import FileServer

JSONL_BUILDER = """
import json
import stable_datasets as sds
from stable_datasets.builder.data_files import normalize_data_files

class Chat(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"text": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        out = []
        for split, paths in normalize_data_files(self.config.data_files, "chat").items():
            local = [p if "://" not in p else str(dl_manager.download(p)) for p in paths]
            out.append(sds.SplitGenerator(split, {"paths": local}))
        return out

    def _generate_examples(self, paths):
        for path in paths:
            with open(path) as fh:
                for number, line in enumerate(fh):
                    yield f"{path}:{number}", json.loads(line)
"""


def _write_jsonl(path, n, start=0):
    path.write_text("".join(json.dumps({"text": f"record {i}"}) + "\n" for i in range(start, start + n)))


@pytest.fixture
def chat(write_builder):
    return str(write_builder("chat", JSONL_BUILDER))


def _load(script, data_files, **kwargs):
    return sds.load_dataset(script, split="train", data_files=data_files, **kwargs)


def test_rewritten_file_is_rebuilt_not_served_stale(chat, tmp_path):
    data = tmp_path / "chat.jsonl"
    _write_jsonl(data, 50)
    first = _load(chat, str(data))
    assert len(first) == 50
    _write_jsonl(data, 80)
    second = _load(chat, str(data))
    assert len(second) == 80
    assert second[79]["text"] == "record 79"
    assert second.cache_dirs[0] != first.cache_dirs[0]


def test_glob_follows_added_and_removed_files(chat, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    _write_jsonl(folder / "a.jsonl", 3)
    pattern = str(folder / "*.jsonl")
    assert len(_load(chat, pattern)) == 3
    _write_jsonl(folder / "b.jsonl", 4, start=10)
    assert len(_load(chat, pattern)) == 7
    (folder / "a.jsonl").unlink()
    ds = _load(chat, pattern)
    assert [r["text"] for r in ds] == [f"record {i}" for i in range(10, 14)]


def test_touching_a_file_rebuilds_in_stat_mode_but_not_in_sha256_mode(chat, tmp_path):
    data = tmp_path / "chat.jsonl"
    _write_jsonl(data, 5)
    stat_a = sds.load_builder(chat, data_files=str(data)).fingerprint()
    sha_a = sds.load_builder(chat, data_files=str(data), input_identity="sha256").fingerprint()
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert sds.load_builder(chat, data_files=str(data)).fingerprint() != stat_a
    assert sds.load_builder(chat, data_files=str(data), input_identity="sha256").fingerprint() == sha_a
    # same size, other bytes, old mtime restored: only the content hash sees it
    data.write_text(data.read_text().replace("record 1", "record 7"))
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert sds.load_builder(chat, data_files=str(data), input_identity="sha256").fingerprint() != sha_a


def test_content_hash_is_memoized_per_path_size_mtime(chat, tmp_path, cache_root):
    data = tmp_path / "chat.jsonl"
    _write_jsonl(data, 5)
    builder = sds.load_builder(chat, data_files=str(data), input_identity="sha256")
    builder.fingerprint()
    with sqlite3.connect(cache_root / MEMO_FILE) as db:
        rows = db.execute("SELECT path, size, sha256 FROM hashes").fetchall()
    assert rows == [(str(data), data.stat().st_size, __import__("hashlib").sha256(data.read_bytes()).hexdigest())]
    # a planted wrong hash for the same path/size/mtime/inode is what the memo answers: proof it is not recomputed
    with sqlite3.connect(cache_root / MEMO_FILE) as db:
        db.execute("UPDATE hashes SET sha256 = 'planted'")
    assert builder.fingerprint_inputs()["input_files"]["data_files"]["train"]["entries"][0][2] == "sha256:planted"


def test_content_hash_memo_survives_concurrent_processes(chat, tmp_path, cache_root):
    files = []
    for i in range(20):
        files.append(tmp_path / f"f{i}.jsonl")
        _write_jsonl(files[-1], 2, start=i)
    code = ("import sys, stable_datasets as sds; "
            "print(sds.load_builder(sys.argv[1], data_files=sys.argv[2:], input_identity='sha256').fingerprint())")
    procs = [subprocess.Popen([sys.executable, "-c", code, chat, *map(str, files)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ}) for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    assert len({out.strip() for out, _ in outputs}) == 1
    with sqlite3.connect(cache_root / MEMO_FILE) as db:
        assert db.execute("SELECT count(*) FROM hashes").fetchone() == (20,)


def test_missing_input_file_is_a_clear_error(chat, tmp_path):
    with pytest.raises(FileNotFoundError, match="data file .*nothere.jsonl does not exist"):
        sds.load_builder(chat, data_files=str(tmp_path / "nothere.jsonl")).fingerprint()
    with pytest.raises(ValueError, match="input_identity must be one of"):
        sds.load_builder(chat, data_files=str(tmp_path), input_identity="md5").fingerprint()


def test_data_dir_contents_are_part_of_the_fingerprint(toy_builder, tmp_path):
    folder = tmp_path / "raw"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "x.bin").write_bytes(b"1")
    before = sds.load_builder(str(toy_builder), data_dir=str(folder)).fingerprint()
    (folder / ".hidden").write_bytes(b"ignored")
    assert sds.load_builder(str(toy_builder), data_dir=str(folder)).fingerprint() == before
    (folder / "sub" / "y.bin").write_bytes(b"2")
    assert sds.load_builder(str(toy_builder), data_dir=str(folder)).fingerprint() != before


def test_info_shows_the_input_fingerprint(chat, tmp_path, cache_root):
    from stable_datasets.cli import main

    data = tmp_path / "chat.jsonl"
    _write_jsonl(data, 3)
    ds = _load(chat, str(data))
    recorded = json.loads((ds.cache_dirs[0] / "_metadata.json").read_text())["fingerprint_inputs"]["input_files"]
    entry = recorded["data_files"]["train"]
    assert entry["files"] == 1 and entry["bytes"] == data.stat().st_size
    assert entry["entries"] == [[str(data), data.stat().st_size, data.stat().st_mtime_ns]]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["info", str(ds.cache_dirs[0])]) == 0
    assert f"  input_files: {json.dumps(recorded)}\n" in out.getvalue()


def test_remote_file_identified_by_etag(chat, tmp_path):
    with FileServer() as server:
        server.files["/chat.jsonl"] = b'{"text": "one"}\n'
        server.validators["/chat.jsonl"] = {"ETag": '"v1"'}
        url = server.url + "/chat.jsonl"
        assert [r["text"] for r in _load(chat, url)] == ["one"]
        gets = server.hits("/chat.jsonl")
        assert [r["text"] for r in _load(chat, url)] == ["one"]  # reused: HEAD only, no download
        assert server.hits("/chat.jsonl") == gets
        inputs = sds.load_builder(chat, data_files=url).fingerprint_inputs()["input_files"]
        assert inputs["data_files"]["train"]["entries"] == [[url, 16, {"ETag": '"v1"'}]]
        server.files["/chat.jsonl"] = b'{"text": "one"}\n{"text": "two"}\n'
        server.validators["/chat.jsonl"] = {"ETag": '"v2"'}
        assert [r["text"] for r in _load(chat, url)] == ["one", "two"]  # new fingerprint, and a fresh download


def test_remote_file_without_validators_identified_by_downloaded_checksum(chat, tmp_path):
    import hashlib

    body = b'{"text": "only"}\n'
    with FileServer() as server:
        server.files["/plain.jsonl"] = body
        url = server.url + "/plain.jsonl"
        inputs = sds.load_builder(chat, data_files=url).fingerprint_inputs()["input_files"]
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        assert inputs["data_files"]["train"]["entries"] == [[url, len(body), digest]]
        assert [r["text"] for r in _load(chat, url)] == ["only"]
        assert server.hits("/plain.jsonl") == 1  # the identity's download is the one the build uses


def test_files_named_by_other_config_fields_via_files_identity(write_builder, tmp_path):
    source = """
    import csv
    from dataclasses import dataclass
    import stable_datasets as sds
    from stable_datasets.identity.inputs import files_identity

    @dataclass
    class LabelsConfig(sds.BuilderConfig):
        labels: str = ""

    class Labels(sds.GeneratorBasedBuilder):
        BUILDER_CONFIG_CLASS = LabelsConfig

        def _info(self):
            return sds.DatasetInfo(features=sds.Features({"name": sds.Value("string")}))

        def _fingerprint_extra(self):
            return {"labels": files_identity([self.config.labels])}

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {})]

        def _generate_examples(self):
            with open(self.config.labels, newline="") as fh:
                for i, row in enumerate(csv.reader(fh)):
                    yield i, {"name": row[0]}
    """
    script = str(write_builder("labels", source))
    csv_file = tmp_path / "labels.csv"
    csv_file.write_text("cat\ndog\n")
    assert sds.load_dataset(script, split="train", labels=str(csv_file))["name"] == ["cat", "dog"]
    csv_file.write_text("cat\ndog\nemu\n")
    assert sds.load_dataset(script, split="train", labels=str(csv_file))["name"] == ["cat", "dog", "emu"]


@pytest.mark.parametrize("validators", [{"ETag": '"v1"'}, {}])
def test_unreachable_server_reuses_the_cache_of_the_downloaded_copy(chat, validators):
    from stable_datasets.errors import DownloadError

    with FileServer() as server:
        server.files["/chat.jsonl"] = b'{"text": "kept"}\n'
        server.validators["/chat.jsonl"] = validators
        url = server.url + "/chat.jsonl"
        first = _load(chat, url)
        with pytest.raises(DownloadError, match=r"cannot identify data file .*/missing.jsonl: .*HTTP 404"):
            _load(chat, server.url + "/missing.jsonl")
    offline = _load(chat, url)  # the server is gone: same fingerprint from what the download recorded
    assert offline.cache_dirs == first.cache_dirs and offline["text"] == ["kept"]


def test_fast_glob_matches_glob_glob(tmp_path, monkeypatch):
    import glob

    from stable_datasets.builder.data_files import glob_pattern

    for name in ["a.jsonl", "b.jsonl", ".hidden.jsonl", "c.txt"]:
        (tmp_path / name).write_text("")
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    for pattern in [f"{tmp_path}/*.jsonl", f"{tmp_path}/*", f"{tmp_path}/.*", f"{tmp_path}/[ab].jsonl",
                    f"{tmp_path}/?.txt", f"{tmp_path}/nothere/*.jsonl", f"{tmp_path}/*/*.jsonl",
                    f"{tmp_path}/**/*.jsonl", "*.jsonl", "./*.txt", "sub/*"]:
        # files only (dir.jsonl is a folder), and '**' crosses folders, as Hugging Face resolves data_files
        expected = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        assert glob_pattern(pattern) == expected, pattern
    assert f"{tmp_path}/dir.jsonl" not in glob_pattern(f"{tmp_path}/*.jsonl")
    assert glob_pattern(f"{tmp_path}/**/*.jsonl") == [f"{tmp_path}/a.jsonl", f"{tmp_path}/b.jsonl",
                                                      f"{tmp_path}/sub/d.jsonl"]


def test_a_symlink_is_identified_by_the_file_it_points_to(tmp_path):
    # data/current -> releases/v1 swapped to releases/v2, whose files have the same sizes and
    # mtimes (copied with cp -p, or unpacked from one archive): before, the entry was the link's
    # path with the target's size and mtime, so the swap reused the v1 cache
    for version, value in (("v1", "1"), ("v2", "2")):
        (tmp_path / "releases" / version).mkdir(parents=True)
        (tmp_path / "releases" / version / "t.csv").write_text(f"x\n{value}\n")
        os.utime(tmp_path / "releases" / version / "t.csv", ns=(1_700_000_000_000_000_000,) * 2)
    (tmp_path / "data").mkdir()
    os.symlink(tmp_path / "releases" / "v1", tmp_path / "data" / "current")
    os.symlink(tmp_path / "releases" / "v1" / "t.csv", tmp_path / "data" / "t.csv")
    for files in (str(tmp_path / "data" / "current" / "t.csv"), str(tmp_path / "data" / "t.csv")):
        first = sds.load_dataset("csv", data_files=files, split="train")
        assert first["x"] == [1]
        entries = first.cache_metadata[0].fingerprint_inputs["input_files"]["data_files"]["train"]["entries"]
        assert entries[0][0] == str(tmp_path / "releases" / "v1" / "t.csv")  # the resolved path, as docs say
    os.remove(tmp_path / "data" / "current")
    os.symlink(tmp_path / "releases" / "v2", tmp_path / "data" / "current")
    os.remove(tmp_path / "data" / "t.csv")
    os.symlink(tmp_path / "releases" / "v2" / "t.csv", tmp_path / "data" / "t.csv")
    for files in (str(tmp_path / "data" / "current" / "t.csv"), str(tmp_path / "data" / "t.csv")):
        assert sds.load_dataset("csv", data_files=files, split="train")["x"] == [2]
    walked = sds.load_builder("csv", data_dir=str(tmp_path / "data" / "current"))
    entries = walked.input_files_identity()["data_dir"]["entries"]
    assert entries[0][0] == str(tmp_path / "releases" / "v2" / "t.csv")


def test_a_symlink_loop_in_a_data_dir_lists_each_file_once(tmp_path):
    # before: OSError [Errno 40] Too many levels of symbolic links: '.../sub/up/sub/up/...'
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "sub" / "a.txt").write_text("line\n")
    os.symlink("..", tmp_path / "data" / "sub" / "up")
    assert sds.load_dataset("text", data_dir=str(tmp_path / "data"), split="train")["text"] == ["line"]
