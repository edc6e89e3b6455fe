"""engine="ray": parts as tasks on a real local Ray cluster (started here, 2 CPUs), and to_ray()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import stable_datasets as sds
from stable_datasets.errors import ExampleError, StableDatasetsError, WorkerDiedError
from tests.conftest import PARTS_BUILDER, SMALL_FILES

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.cluster]  # one cluster, in one xdist worker


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    # Ray gives a local node a fixed 30 s to register (ray/_private/node.py): on a machine running other test
    # processes that can pass; the start is tried again then, instead of failing the module before any test
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
            break
        except Exception as exc:
            ray.shutdown()
            if "timed out during startup" not in str(exc) or attempt == 2:
                raise
    yield
    ray.shutdown()


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_ray_build_has_the_rows_of_one_process(parts_builder, storage_format):
    options = SMALL_FILES[storage_format]
    expected = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format,
                                layout_options=options).to_arrow()
    ds = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format, layout_options=options,
                          num_proc=2, engine="ray", download_mode="force_rebuild")
    assert ds.to_arrow().equals(expected)
    assert not [p for p in ds.cache_dirs[0].parent.iterdir() if p.name.startswith(".staging")]


def test_a_dead_ray_worker_is_retried(write_builder, tmp_path, monkeypatch):
    marker = tmp_path / "died-once"
    path = write_builder("flaky", PARTS_BUILDER.replace("KEY", "(part, i)").replace(
        "            if str(part) == os.environ.get(\"PARTS_KILL\"):",
        f"            if part == 3 and not os.path.exists({str(marker)!r}):\n"
        f"                open({str(marker)!r}, 'w').close()\n"
        "                os.kill(os.getpid(), signal.SIGKILL)\n"
        "            if str(part) == os.environ.get(\"PARTS_KILL\"):"))
    ds = sds.load_dataset(str(path), split="train", num_proc=2, engine="ray")
    assert marker.exists()  # the first attempt of the second task died
    assert ds["part"] == [p for p in range(5) for _ in range(300)]


def test_ray_worker_that_keeps_dying_fails_cleanly_and_the_next_build_resumes(write_builder, cache_root, tmp_path):
    # the kill switch and the counter are files, not PARTS_KILL/PARTS_COUNTER: the cluster's workers started
    # before this test and do not see its environment, and restarting the cluster twice cost ~25 s
    counter, kill = tmp_path / "generated.txt", tmp_path / "kill-part-4"
    kill.touch()
    parts_builder = write_builder("parts", PARTS_BUILDER.replace("KEY", "(part, i)").replace(
        'os.environ.get("PARTS_KILL")', f'("4" if os.path.exists({str(kill)!r}) else None)').replace(
        'os.environ.get("PARTS_COUNTER")', repr(str(counter))))
    with pytest.raises(WorkerDiedError, match="Ray worker died"):
        sds.load_dataset(str(parts_builder), split="train", num_proc=2, engine="ray")
    assert not list(cache_root.rglob("_metadata.json"))
    staging = next(cache_root.rglob(".staging-train"))
    assert json.loads((staging / ".part-00000" / "_part.json").read_text())["num_rows"] == 600
    kill.unlink()
    counter.write_text("")
    ds = sds.load_dataset(str(parts_builder), split="train", num_proc=2, engine="ray")
    assert counter.read_text().split() == ["2", "3", "4"]  # the finished part was kept
    assert ds["part"] == [p for p in range(5) for _ in range(300)]


def test_bad_data_in_a_ray_task_is_our_error(write_builder, cache_root):
    path = write_builder("parts", PARTS_BUILDER.replace("KEY", "(part, i)").replace('"i": i,', '"i": "x" if part == 4 '
                                                                                    'and i == 7 else i,'))
    with pytest.raises(ExampleError, match=r"example key \(4, 7\), field 'i'"):
        sds.load_dataset(str(path), split="train", num_proc=2, engine="ray")
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))


def _double(row):
    return {"double": row["i"] * 2}


def test_a_duplicate_key_across_ray_parts_is_named_by_range_jobs_on_ray(write_builder, cache_root):
    """The check across parts runs as Ray tasks too (one per digest range); the key named is the first repeat in
    build order: parts 0-2 go to the first task, 3-4 to the second, and (part % 3, i) repeats only across them."""
    path = write_builder("parts", PARTS_BUILDER.replace("KEY", "(part % 3, i)"))
    with pytest.raises(ExampleError, match=r"^builder 'parts', split 'train', example key \[0, 0\]: duplicate example "
                                           r"key within the split$"):
        sds.load_dataset(str(path), split="train", num_proc=2, engine="ray")
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))


def test_map_and_filter_on_ray(parts_builder):
    ds = sds.load_dataset(str(parts_builder), split="train")
    expected = ds.map(_double).to_arrow()
    assert ds.map(_double, num_proc=2, engine="ray", load_from_cache_file=False).to_arrow().equals(expected)
    assert ds.filter(lambda r: r["i"] == 5, num_proc=2, engine="ray")["part"] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_to_ray_hands_the_rows_to_ray_data(parts_builder, storage_format):
    ds = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format)
    rows = ds.to_ray().take_all()  # Ray Data does not keep the order of blocks unless asked to
    assert sorted((r["part"], r["i"], r["text"]) for r in rows) == list(zip(ds["part"], ds["i"], ds["text"]))
    picked = ds.shuffle(seed=1).select(range(10))
    assert sorted((r["part"], r["i"]) for r in picked.to_ray().take_all()) == sorted(zip(picked["part"], picked["i"]))


def test_to_ray_of_a_small_cache_plans_a_few_read_tasks():
    """Before, the row-range datasource gave Ray no size estimate, so Ray planned 200 read tasks for 300 rows
    (seconds of task overhead); now the stored bytes of the rows read are the estimate."""
    ds = sds.StableDataset.from_dict({"i": list(range(300)), "t": [f"row {i}" for i in range(300)]})
    for view in (ds, ds.shuffle(seed=1)):
        materialized = view.to_ray().materialize()
        assert materialized.num_blocks() <= 8
        assert sorted(r["i"] for r in materialized.take_all()) == list(range(300))


def test_ray_engine_without_ray_says_how_to_install_it(parts_builder, tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        import stable_datasets as sds
        try:
            sds.load_dataset({str(parts_builder)!r}, split="train", num_proc=2, engine="ray")
        except ImportError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={"STABLE_DATASETS_CACHE_DIR": str(tmp_path / "c"), "PATH": "/usr/bin:/bin"})
    assert "pip install 'stable-datasets[ray]'" in out.stdout, out.stderr


def test_cli_builds_on_ray(parts_builder, capsys):
    from stable_datasets.cli import main

    assert main(["--json", "build", str(parts_builder), "--num-proc", "2", "--engine", "ray"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["rows"] == 1500


def test_ray_workers_get_the_builder_scripts_helper_modules(tmp_path):
    """A script's folder is a package only in the driver; its local modules go to the workers by value."""
    folder = tmp_path / "helped"
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "__init__.py").write_text("")
    (folder / "lib" / "names.py").write_text("def name(part, i):\n    return f'p{part}-{i}'\n")
    (folder / "scale.py").write_text("FACTOR = 3\n")
    (folder / "helped.py").write_text(textwrap.dedent("""
        import stable_datasets as sds
        from scale import FACTOR
        from .lib.names import name

        class Helped(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({"name": sds.Value("string"), "x": sds.Value("int64")}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {"parts": [0, 1, 2, 3]})]

            def _generate_examples(self, parts):
                for part in parts:
                    for i in range(2):
                        yield (part, i), {"name": name(part, i), "x": FACTOR * i}
    """))
    ds = sds.load_dataset(str(folder), split="train", num_proc=2, engine="ray")
    assert ds["name"] == [f"p{p}-{i}" for p in range(4) for i in range(2)]
    assert ds["x"] == [0, 3] * 4


def test_an_exception_ray_cannot_rebuild_stops_the_other_tasks_and_names_the_example(write_builder, cache_root,
                                                                                      tmp_path):
    """A user's exception class whose __init__ takes other arguments than its message cannot be unpickled in the
    driver. The build still fails as bad data: the other parts stop before it returns, nothing stays staged, and
    the error names the builder, the split and the last example key, as it does for any exception of the user's."""
    beats = tmp_path / "beats.txt"
    path = write_builder("rebuildless", f"""
        import os, time
        import stable_datasets as sds

        class NeedsTwo(Exception):
            def __init__(self, a, b):
                super().__init__(f"needs two: {{a}} {{b}}")

        class Rebuildless(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({{"part": sds.Value("int32"), "i": sds.Value("int64")}}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {{"parts": [0, 1]}})]

            def _generate_examples(self, parts):
                for part in parts:
                    for i in range(3000):
                        if part == 0 and i == 3:
                            # once part 1 runs: its worker can take seconds to start on a busy machine
                            deadline = time.monotonic() + 120
                            while not os.path.exists({str(beats)!r}) and time.monotonic() < deadline:
                                time.sleep(0.01)
                            raise NeedsTwo(1, 2)
                        if part == 1:
                            with open({str(beats)!r}, "a") as fh:
                                fh.write("x")
                            time.sleep(0.01)
                        yield (part, i), {{"part": part, "i": i}}
    """)
    with pytest.raises(StableDatasetsError, match=r"raised by builder 'rebuildless' generating split 'train', "
                                                  r"after example key \(0, 2\)") as caught:
        sds.load_dataset(str(path), split="train", num_proc=2, engine="ray")
    assert "needs two: 1 2" in str(caught.value)
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))
    beaten = beats.stat().st_size
    time.sleep(0.5)
    assert beats.stat().st_size == beaten  # part 1 was stopped, not left writing into a removed staging folder


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_ray_address_nobody_answers_fails_at_once_naming_it(parts_builder, tmp_path, how):
    """A mistyped --address or $RAY_ADDRESS: before, a GCS address that refuses connections left the build
    waiting for minutes (Ray retries 'Failed to connect to GCS ... within 5 seconds' over and over), and a
    ray:// one failed after 30 s with 'ConnectionError: ray client connection timeout', naming no address."""
    address = {"argument": "127.0.0.1:1", "environment": "ray://127.0.0.1:1"}[how]
    script = textwrap.dedent(f"""
        import stable_datasets as sds
        from stable_datasets.errors import StableDatasetsError
        try:
            sds.load_dataset({str(parts_builder)!r}, split="train", num_proc=2, engine="ray",
                             ray_address={None if how == "environment" else address!r})
        except StableDatasetsError as exc:
            print(exc)
    """)
    env = {**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "c"), "RAY_ADDRESS": address}
    if how != "environment":
        env.pop("RAY_ADDRESS")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=25, env=env)
    source = "$RAY_ADDRESS" if how == "environment" else "ray_address"
    assert out.stdout.strip().startswith(f"cannot reach the Ray cluster at {address} ({source}): "), out.stderr[-3000:]
    assert not list((tmp_path / "c").rglob(".staging*")) and not list((tmp_path / "c").rglob("_metadata.json"))


@pytest.mark.parametrize("storage_format", ["lance"])  # Arrow and Parquet read from the local shard cache
def test_to_ray_of_a_cache_in_object_storage(s3_env, toy_builder, storage_format):
    """A remote Lance cache is read in place from the store, so it has no Lance dataset on local disk. Before,
    to_ray() gave Ray's read_lance that missing local folder: 'ValueError: Dataset at path .../data.lance was not
    found'. Now Ray Data reads it from the store, with the cache's storage options."""
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format=storage_format)
    rows = ds.to_ray().take_all()
    assert sorted((r["id"], r["text"]) for r in rows) == list(zip(ds["id"], ds["text"]))


def test_a_builder_from_the_users_own_package_runs_on_ray_workers_that_cannot_import_it(tmp_path, monkeypatch):
    """A builder class imported from a package on the driver's sys.path only (not installed): the class's
    module and the package's modules it uses go to the workers by value. Before, only the class's own module
    did: the workers failed with 'RaySystemError: System error: No module named 'h7userpkg''."""
    package = tmp_path / "project" / "h7userpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "scaling.py").write_text("def triple(x):\n    return 3 * x\n")
    (package / "offsets.py").write_text("OFFSET = 100\n")
    (package / "builders.py").write_text(textwrap.dedent("""
        import stable_datasets as sds
        from h7userpkg import offsets
        from h7userpkg.scaling import triple

        class PackagedRows(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({"x": sds.Value("int64")}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {"xs": list(range(8))})]

            def _generate_examples(self, xs):
                for x in xs:
                    yield x, {"x": triple(x) + offsets.OFFSET}
    """))
    monkeypatch.syspath_prepend(str(package.parent))
    from h7userpkg.builders import PackagedRows

    try:
        ds = sds.load_dataset(PackagedRows, split="train", num_proc=2, engine="ray")
        assert ds["x"] == [3 * x + 100 for x in range(8)]
    finally:
        for name in [n for n in sys.modules if n.startswith("h7userpkg")]:
            del sys.modules[name]


def test_ctrl_c_during_a_ray_build_stops_its_tasks_before_the_next_build_resumes(write_builder, cache_root,
                                                                                tmp_path):
    """Ctrl-C in a notebook and run the cell again: the driver stays joined to the cluster, so tasks left running
    would keep writing into the staging folder that the next build resumes from (two writers in one part).
    Before, KeyboardInterrupt left every task running; now they are cancelled before it reaches the user."""
    import _thread
    import threading

    beats, slow = tmp_path / "beats.txt", tmp_path / "slow"  # beats.txt-<part>: one "x" a row while slow
    slow.touch()
    path = write_builder("slowparts", f"""
        import os, time
        import stable_datasets as sds

        class Slowparts(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({{"part": sds.Value("int32"), "i": sds.Value("int64")}}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {{"parts": [0, 1]}})]

            def _generate_examples(self, parts):
                for part in parts:
                    for i in range(200):
                        if os.path.exists({str(slow)!r}):
                            with open({str(beats)!r} + f"-{{part}}", "a") as fh:
                                fh.write("x")
                            time.sleep(0.05)
                        yield (part, i), {{"part": part, "i": i}}
    """)

    def written() -> list[int]:
        return [p.stat().st_size if p.exists() else 0 for p in (tmp_path / "beats.txt-0", tmp_path / "beats.txt-1")]

    def press_ctrl_c():
        # both tasks are writing rows: a worker process can take seconds to start on a busy machine, and until
        # then the second task has not begun (the sum of both parts' rows would be reached by the first alone)
        deadline = time.monotonic() + 60  # else the assertion below says which part never ran
        while min(written()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        _thread.interrupt_main()

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        sds.load_dataset(str(path), split="train", num_proc=2, engine="ray")
    beaten = written()
    time.sleep(0.5)
    assert written() == beaten and min(beaten) >= 5  # both tasks were writing; neither is now
    slow.unlink()
    ds = sds.load_dataset(str(path), split="train", num_proc=2, engine="ray")
    assert ds["part"] == [0] * 200 + [1] * 200 and ds["i"] == list(range(200)) * 2


def test_a_ray_address_other_than_the_joined_cluster_is_named_in_a_warning():
    from loguru import logger

    from stable_datasets.write.engines import ensure_ray

    messages: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(messages.append, level="WARNING", format="{message}")
    try:
        ensure_ray("127.0.0.1:1")
        ensure_ray(ray.get_runtime_context().gcs_address)  # the joined cluster itself: nothing to say
    finally:
        logger.remove(sink)
        logger.disable("stable_datasets")
    assert len(messages) == 1 and "ray_address=127.0.0.1:1 is not used" in messages[0]
    assert ray.get_runtime_context().gcs_address in messages[0]


def test_ray_data_usage_queries_are_off_unless_the_user_turned_them_on(monkeypatch):
    """Before: every Ray Data execution asked Prometheus at localhost:9090 for usage counters and logged a
    traceback for each refused query (the CI log was full of them); ensure_ray turns them off, keeping a user's own
    setting."""
    from ray.data._internal.usage.collector import usage_collection_disabled

    from stable_datasets.write.engines import ensure_ray

    monkeypatch.delenv("RAY_DATA_USAGE_DISABLED", raising=False)
    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    ensure_ray()
    assert os.environ["RAY_DATA_USAGE_DISABLED"] == "1" and usage_collection_disabled()
    monkeypatch.setenv("RAY_DATA_USAGE_DISABLED", "0")
    ensure_ray()
    assert os.environ["RAY_DATA_USAGE_DISABLED"] == "0"
