"""`ls` knows what made every cache; `prune` removes what is superseded and never what is in use."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.cache.inventory import find_caches
from stable_datasets.cli import main
from stable_datasets.manage.inventory import annotate, parse_duration, plan_prune
from tests.conftest import TOY_BUILDER


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def ls_json(capsys, *argv: str) -> list[dict]:
    _code, out = run(capsys, "--json", "ls", *argv)
    assert _code == 0
    return json.loads(out)


def write_csv(path: Path, rows: list[int]) -> None:
    path.write_text("a\n" + "".join(f"{r}\n" for r in rows))


def load_csv(folder: Path) -> sds.StableDataset:
    return sds.load_dataset("csv", data_files=str(folder / "*.csv"), split="train")


def test_every_kind_of_cache_says_what_made_it(capsys, write_builder, tmp_path, monkeypatch):
    script = write_builder("toy", TOY_BUILDER)
    sds.load_dataset(str(script), split="train", rows=3)
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "one.csv", [1, 2])
    write_csv(data / "two.csv", [3])
    monkeypatch.chdir(tmp_path)
    csv = sds.load_dataset("csv", data_files="data/*.csv", split="train")
    csv.map(lambda row: {"b": row["a"] * 2})
    sds.StableDataset.from_dict({"x": [1, 2, 3, 4]})
    listed = ls_json(capsys, "--long")
    kinds = sorted((e["name"], e["kind"], e["status"]) for e in listed)
    assert kinds == [("csv", "loader", "current"), ("csv", "map", "current"), ("in_memory", "in_memory", "current"),
                     ("toy", "builder", "current")]
    made = next(e["made_by"] for e in listed if e["kind"] == "loader")
    assert made["data_files"] == "data/*.csv"  # as given
    assert made["data_files_resolved"] == {"train": {"count": 2, "files": [str(data / "one.csv"),
                                                                           str(data / "two.csv")]}}
    assert made["spec"]["config"]["data_files"] == str(data / "*.csv")  # the spec is absolute
    mapped = next(e for e in listed if e["kind"] == "map")
    assert mapped["made_by"]["parent"] == str(published_path(csv.cache_dirs[0]))
    function = f"{__name__}.test_every_kind_of_cache_says_what_made_it.<locals>.<lambda>"
    assert mapped["inputs"] == [f"made by: map {function} of {published_path(csv.cache_dirs[0])}"]
    toy = next(e for e in listed if e["kind"] == "builder")
    assert toy["made_by"]["script"] == str(script) and toy["inputs"][0] == f"made by: builder toy ({script})"
    _code, out = run(capsys, "info", str(published_path(csv.cache_dirs[0])))
    assert _code == 0 and f"files (train): {data / 'one.csv'}, {data / 'two.csv'}" in out.splitlines()
    assert "made by: loader csv (" in out
    _code, out = run(capsys, "ls", "--long", "csv")
    assert _code == 0
    assert f"    files (train): {data / 'one.csv'}, {data / 'two.csv'}" in out.splitlines()
    assert "toy" not in out and "in_memory" not in out


def test_ls_sums_per_dataset_and_in_total(capsys, write_builder):
    script = write_builder("toy", TOY_BUILDER)
    train = sds.load_dataset(str(script), split="train", rows=3)
    test = sds.load_dataset(str(script), split="test", rows=3)
    small = sds.StableDataset.from_dict({"x": [1, 2]})
    sizes = [sum(s.num_bytes for s in d.cache_metadata[0].shards) for d in (train, test, small)]
    _code, out = run(capsys, "--json", "ls", "--summary")
    assert json.loads(out) == {"total": {"caches": 3, "bytes": sum(sizes), "rows": 8},
                               "datasets": {"in_memory/from_dict": {"caches": 1, "bytes": sizes[2], "rows": 2},
                                            "toy": {"caches": 2, "bytes": sizes[0] + sizes[1], "rows": 6}}}
    _code, out = run(capsys, "ls")
    lines = out.splitlines()
    assert lines[0].split() == ["name", "config", "version", "split", "layout", "rows", "size", "age", "used",
                                "status"]
    assert lines[-1].split()[:3] == ["total", "3", "8"]
    assert [line.split()[:3] for line in lines[-3:-1]] == [["in_memory/from_dict", "1", "2"], ["toy", "2", "6"]]
    _code, out = run(capsys, "ls", "--summary", "toy")
    assert [line.split()[:3] for line in out.splitlines()] == [["dataset", "caches", "rows"], ["toy", "2", "6"],
                                                               ["total", "2", "6"]]


def test_an_edited_input_file_supersedes_its_cache_and_prune_removes_it_with_its_map(capsys, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", [1, 2])
    first = load_csv(data)
    first_map = first.map(lambda row: {"b": row["a"] + 1})
    old, old_map = published_path(first.cache_dirs[0]), published_path(first_map.cache_dirs[0])
    del first, first_map
    gc.collect()
    time.sleep(0.01)
    write_csv(data / "a.csv", [5, 6, 7])
    second = load_csv(data)
    second_map = second.map(lambda row: {"b": row["a"] + 1})
    statuses = {e["path"]: e["status"] for e in ls_json(capsys)}
    new, new_map = str(published_path(second.cache_dirs[0])), str(published_path(second_map.cache_dirs[0]))
    assert statuses == {str(old): "superseded", str(old_map): "superseded", new: "current", new_map: "current"}
    _code, out = run(capsys, "prune", "--dry-run")
    assert out.splitlines() == [f"would remove superseded cache: {old}",
                                f"would remove map cache of a removed cache: {old_map}"]
    assert old.exists() and old_map.exists()
    run(capsys, "prune")
    assert not old.exists() and not old_map.exists()
    assert second_map["b"] == [6, 7, 8] and second["a"] == [5, 6, 7]
    assert sorted(e["path"] for e in ls_json(capsys)) == sorted([new, new_map])


def test_prune_never_removes_a_cache_a_live_process_has_open(capsys, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", [1])
    held = load_csv(data)  # this process keeps it open
    old = published_path(held.cache_dirs[0])
    time.sleep(0.01)
    write_csv(data / "a.csv", [2, 3])
    load_csv(data)
    _code, out = run(capsys, "prune")
    assert out.splitlines() == ["nothing to prune", f"kept (in use by a live process): {old}"]
    assert held["a"] == [1]
    _code, out = run(capsys, "--json", "prune", "--dry-run")
    assert json.loads(out) == [{"kind": "kept", "path": str(old), "removed": False,
                                "reason": "in use by a live process"}]
    del held
    gc.collect()
    assert run(capsys, "prune")[1].splitlines()[0] == f"removed superseded cache: {old}"


def test_a_killed_reader_leaves_no_pin_behind(capsys, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", [1])
    old = published_path(load_csv(data).cache_dirs[0])
    gc.collect()
    reader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        import stable_datasets as sds
        ds = sds.open_cache({str(old)!r})
        print(ds["a"], flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "[1]"
        time.sleep(0.01)
        write_csv(data / "a.csv", [2])
        load_csv(data)
        assert run(capsys, "prune")[1].splitlines()[-1] == f"kept (in use by a live process): {old}"
        os.kill(reader.pid, signal.SIGKILL)
        reader.wait(timeout=30)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert run(capsys, "prune")[1].splitlines()[0] == f"removed superseded cache: {old}"
    assert not old.exists()


def _three_versions(tmp_path: Path) -> list[Path]:
    data = tmp_path / "data"
    data.mkdir()
    built = []
    for rows in ([1], [1, 2], [1, 2, 3]):
        write_csv(data / "a.csv", rows)
        built.append(published_path(load_csv(data).cache_dirs[0]))
        gc.collect()
        time.sleep(0.01)
    return built


def test_keep_last_keeps_the_newest_versions(capsys, tmp_path):
    oldest, middle, newest = _three_versions(tmp_path)
    _code, out = run(capsys, "prune", "--keep-last", "2")
    assert out.splitlines()[0] == f"removed superseded cache: {oldest}"
    assert f"kept (one of the last 2): {middle}" in out.splitlines()
    assert not oldest.exists() and middle.exists() and newest.exists()


def test_older_than_spares_caches_used_recently(capsys, tmp_path):
    oldest, middle, newest = _three_versions(tmp_path)
    _code, out = run(capsys, "prune", "--older-than", "1d")
    assert out.splitlines()[0] == "nothing to prune"
    assert sorted(out.splitlines()[1:]) == sorted([f"kept (used recently): {oldest}",
                                                   f"kept (used recently): {middle}"])
    day_ago = time.time() - 2 * 86400
    for build in (oldest.parent / os.readlink(oldest), middle.parent / os.readlink(middle)):
        os.utime(build / "_metadata.json", (day_ago, day_ago))
    _code, out = run(capsys, "prune", "--older-than", "1d")
    assert sorted(out.splitlines()[:2]) == sorted([f"removed superseded cache: {oldest}",
                                                   f"removed superseded cache: {middle}"])
    assert newest.exists()


def test_bad_prune_options_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["prune", "--older-than", "soon"])
    assert exc.value.code == 2
    assert "expected a duration such as 7d, 12h, 30m or 2w, got 'soon'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["prune", "--keep-last", "0"])
    assert "expected a positive integer, got '0'" in capsys.readouterr().err


def test_durations():
    assert [parse_duration(t) for t in ("30s", "2m", "1.5h", "2d", "1w", "3")] == [30, 120, 5400, 172800, 604800,
                                                                                    259200]


def test_a_cache_that_records_nothing_says_so(capsys, cache_root):
    ds = sds.StableDataset.from_dict({"x": [1]})
    build = ds.cache_dirs[0]
    metadata = json.loads((build / "_metadata.json").read_text())
    del metadata["made_by"]
    (build / "_metadata.json").write_text(json.dumps(metadata))
    (entry,) = ls_json(capsys, "--long")
    assert entry["kind"] == "unrecorded" and entry["status"] == "unknown"
    assert entry["inputs"] == ["made by: not recorded (written before stable-datasets recorded what made a cache)"]


def test_the_plan_asks_each_builder_once(write_builder, monkeypatch):
    from stable_datasets.manage import ownership

    script = write_builder("toy", TOY_BUILDER)
    for rows in (2, 3, 4):
        sds.load_dataset(str(script), split="train", rows=rows)
    calls = []
    real = ownership.builder_class
    monkeypatch.setattr(ownership, "builder_class", lambda *a: calls.append(a) or real(*a))
    entries = find_caches(Path(os.environ["STABLE_DATASETS_CACHE_DIR"]))
    annotate(entries)
    assert [e.status for e in entries] == ["current"] * 3  # three configs: three lineages, none superseded
    assert len(calls) == 1
    assert plan_prune(entries).remove == []


def test_prune_removes_superseded_caches_on_an_object_store_root(capsys, s3_env, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", [1])
    load_csv(data)
    time.sleep(1.1)  # the store's modification times are in seconds
    write_csv(data / "a.csv", [2, 3])
    assert load_csv(data)["a"] == [2, 3]
    listed = ls_json(capsys)
    assert sorted(e["status"] for e in listed) == ["current", "superseded"]
    old = next(e["path"] for e in listed if e["status"] == "superseded")
    out = run(capsys, "prune")[1].splitlines()
    assert f"removed superseded cache: {old}" in out
    assert [e["status"] for e in ls_json(capsys)] == ["current"]
    assert load_csv(data)["a"] == [2, 3]


@pytest.mark.parametrize("identity", ["sha256", "stat"])
def test_the_cache_of_the_inputs_on_disk_now_is_current_after_an_edit_is_reverted(capsys, tmp_path, identity):
    """`ls` took the newest cache of a lineage as current: after an edit was reverted, the cache built from the
    edit was current and `prune` removed the one that matches the files on disk. Judged by the inputs now."""
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", [1, 2])
    original = (data / "a.csv").stat()

    def load() -> sds.StableDataset:
        return sds.load_dataset("csv", data_files=str(data / "*.csv"), split="train", input_identity=identity)

    first = published_path(load().cache_dirs[0])
    write_csv(data / "a.csv", [5, 6, 7])  # an edit, built
    edited = published_path(load().cache_dirs[0])
    write_csv(data / "a.csv", [1, 2])  # reverted (a restored copy keeps its time: cp -p, a backup, rsync -t)
    os.utime(data / "a.csv", ns=(original.st_atime_ns, original.st_mtime_ns))
    gc.collect()
    assert edited != first
    statuses = {e["path"]: e["status"] for e in ls_json(capsys)}
    assert statuses == {str(first): "current", str(edited): "superseded"}
    _code, out = run(capsys, "prune")
    assert out.splitlines()[0] == f"removed superseded cache: {edited}" and str(first) not in out
    assert first.exists() and not edited.exists()
    assert published_path(load().cache_dirs[0]) == first  # and it is what a load reuses


def test_an_edited_loader_input_makes_its_cache_stale(capsys, tmp_path):
    """A loader's cache is judged against its files too (it could not be asked before: it needs data_files)."""
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", [1, 2])
    folder = published_path(sds.load_dataset("csv", data_files=str(data / "*.csv"), split="train",
                                             features=sds.Features({"a": sds.Value("int32")})).cache_dirs[0])
    gc.collect()
    assert [(e["path"], e["status"]) for e in ls_json(capsys)] == [(str(folder), "current")]
    time.sleep(0.01)
    write_csv(data / "a.csv", [1, 2, 3])
    assert [(e["path"], e["status"]) for e in ls_json(capsys)] == [(str(folder), "stale")]
