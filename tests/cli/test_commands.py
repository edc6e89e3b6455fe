from __future__ import annotations

import json
import os
import socket

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cli import main
from tests.conftest import TOY_BUILDER


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture
def toy_on_path(write_builder, monkeypatch):
    path = write_builder("toy", TOY_BUILDER)
    monkeypatch.setenv("STABLE_DATASETS_BUILDERS_PATH", str(path.parent))
    return path


def test_build_ls_info_json(capsys, toy_on_path):
    code, out = run(capsys, "--json", "build", "toy", "--set", "rows=7")
    assert code == 0
    built = json.loads(out)
    assert {b["split"]: b["rows"] for b in built} == {"train": 7, "test": 7}
    code, out = run(capsys, "--json", "ls")
    listed = json.loads(out)
    assert sorted((e["split"], e["rows"], e["status"]) for e in listed) == [("test", 7, "current"),
                                                                           ("train", 7, "current")]
    code, out = run(capsys, "ls")
    assert "toy" in out and "arrow_shards" in out and "current" in out
    code, out = run(capsys, "info", built[0]["path"])
    assert code == 0 and "fingerprint" in out and '"_type": "ClassLabel"' in out


@pytest.mark.parametrize(("storage_format", "layout"), [("lance", "lance_rows"), ("parquet", "parquet_shards")])
def test_build_takes_every_storage_format(capsys, toy_on_path, storage_format, layout):
    code, out = run(capsys, "--json", "build", "toy", "--split", "train", "--storage-format", storage_format,
                    "--set", "rows=4")
    assert code == 0
    built = json.loads(out)
    assert [b["rows"] for b in built] == [4]
    assert sds.open_cache(built[0]["path"]).cache_metadata[0].layout == layout


def test_stale_caches_are_listed_and_pruned(capsys, toy_on_path, write_builder):
    run(capsys, "build", "toy", "--split", "train")
    write_builder("toy", TOY_BUILDER.replace('description="toy data"', 'description="edited"'))
    code, out = run(capsys, "--json", "ls")
    assert [e["status"] for e in json.loads(out)] == ["stale"]
    code, out = run(capsys, "prune", "--dry-run")
    assert code == 0 and "would remove stale cache" in out
    assert len(json.loads(run(capsys, "--json", "ls")[1])) == 1
    code, out = run(capsys, "prune")
    assert "removed stale cache" in out
    assert json.loads(run(capsys, "--json", "ls")[1]) == []


def test_prune_removes_orphaned_staging(capsys, cache_root):
    dead = cache_root / "x" / "default" / "1.0.0" / "abc" / f".staging-train-{socket.gethostname()}-999999-deadbeef"
    alive = dead.with_name(f".staging-train-{socket.gethostname()}-{os.getpid()}-cafecafe")
    dead.mkdir(parents=True)
    alive.mkdir()
    _code, out = run(capsys, "prune")
    assert f"removed orphaned staging: {dead}" in out
    assert not dead.exists() and alive.exists()


def test_prune_removes_decompressed_copies_of_edited_or_removed_files(capsys, cache_root, tmp_path):
    import gzip

    source = tmp_path / "d.csv.gz"
    source.write_bytes(gzip.compress(b"a\n1\n"))
    old = published_path(sds.load_dataset("csv", data_files=str(source), split="train").cache_dirs[0])
    copies = cache_root / "downloads" / "decompressed"
    (first,) = copies.iterdir()
    assert run(capsys, "prune")[1] == "nothing to prune\n"  # its file is unchanged: the copy stays
    source.write_bytes(gzip.compress(b"a\n2\n3\n"))
    assert sds.load_dataset("csv", data_files=str(source), split="train")["a"] == [2, 3]
    (second,) = [c for c in copies.iterdir() if c != first]
    assert (second / "d.csv").read_bytes() == b"a\n2\n3\n"
    code, out = run(capsys, "prune", "--dry-run")
    assert code == 0 and out == (f"would remove superseded cache: {old}\n"  # the cache of the file before its edit
                                 f"would remove decompressed copy of a changed or removed file: {first}\n")
    assert first.exists()
    out = run(capsys, "prune")[1].splitlines()
    assert out[:2] == [f"removed superseded cache: {old}", f"removed decompressed copy of a changed or removed file: "
                                                          f"{first}"]
    assert not old.exists() and all(line.startswith(("removed empty folder: ", "removed stored copy no cache uses: "))
                                    for line in out[2:])
    assert sorted(copies.iterdir()) == [second]
    source.unlink()
    run(capsys, "prune")
    assert not copies.exists() or list(copies.iterdir()) == []


@pytest.mark.parametrize("storage_format", ["arrow", "lance"])
def test_verify_finds_flipped_bytes_and_truncation(capsys, toy_builder, storage_format):
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)
    directory = ds.cache_dirs[0]
    assert run(capsys, "verify", str(directory))[0] == 0
    shard = max((directory / s.path for s in ds.cache_metadata[0].shards), key=lambda p: p.stat().st_size)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    code, out = run(capsys, "verify", str(directory))
    assert code == 1 and f"{shard}: sha256" in out and "BAD" in out
    shard.write_bytes(bytes(data[:100]))
    code, out = run(capsys, "--json", "verify", str(directory))
    assert code == 1 and json.loads(out)[0]["problems"] == [f"{shard}: 100 bytes, expected {len(data)}"]


def test_rm_and_exit_codes(capsys, toy_on_path):
    run(capsys, "build", "toy", "--split", "test")
    code, out = run(capsys, "rm", "toy", "--dry-run")
    assert code == 0 and "would remove" in out
    code, out = run(capsys, "rm", "toy")
    assert code == 0 and "removed" in out
    assert run(capsys, "rm", "toy")[0] == 1
    assert run(capsys, "verify", "nothing-here")[0] == 1
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert main(["build", "toy", "--split", "test", "--set", "rows=-"]) == 2
    assert "ToyConfig.rows expects int, got str '-'" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"stable-datasets {sds.__version__}\n"


def test_view_refuses_an_object_store_root(capsys):
    assert main(["--cache-dir", "s3://bucket/cache", "view", "--port", "0"]) == 2
    assert capsys.readouterr().err == ("stable-datasets view: error: view serves a local cache root; an object-store "
                                       "root is not supported yet\n")
