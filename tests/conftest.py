from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import stable_datasets as sds
from tests.gcs_server import gcs_endpoint, gcs_env  # noqa: F401  (fixtures: a GCS server on 127.0.0.1)
from tests.ray_cluster import cluster  # noqa: F401  (fixture: Ray nodes that share no disk, started per module)
from tests.s3_server import moto_endpoint, s3_env, s3_requests  # noqa: F401  (fixtures: an S3 server on 127.0.0.1)

os.environ.setdefault("STABLE_DATASETS_DISABLE_PROGRESS", "1")
# Ray in tests: no usage reporting, and Ray Data's usage collector does not query a Prometheus server that is not
# there (each refused query logged a traceback into the CI log); ensure_ray sets the second for users too
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DATA_USAGE_DISABLED", "1")

#: fixtures that start a local object-store server: a test using one is marked `remote` (pyproject.toml's markers)
OBJECT_STORE_FIXTURES = frozenset({"s3_env", "moto_endpoint", "s3_requests", "gcs_env", "gcs_endpoint"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`remote` on every test that uses an object-store server, whatever folder it is in (the other markers,
    `scale`, `cluster` and `browser`, are written on their tests)."""
    for item in items:
        if OBJECT_STORE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.remote)


@pytest.fixture(autouse=True)
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache root and builder search path."""
    root = tmp_path / "cache"
    monkeypatch.setenv("STABLE_DATASETS_CACHE_DIR", str(root))
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "object-store"))  # remote roots' local side
    monkeypatch.delenv("STABLE_DATASETS_BUILDERS_PATH", raising=False)
    monkeypatch.delenv("STABLE_DATASETS_URL_REWRITES", raising=False)
    return root


@pytest.fixture(autouse=True)
def _quiet_logs():
    from loguru import logger

    logger.disable("stable_datasets")
    yield
    logger.enable("stable_datasets")


# layout options that cut a small build into many files (so parts, shards and fragments are several)
SMALL_FILES = {"arrow": {"max_shard_size": 4096, "batch_rows": 64},
               "parquet": {"max_shard_size": 4096, "row_group_bytes": 1024, "batch_rows": 64},
               "lance": {"max_rows_per_file": 200, "batch_rows": 64}}


class IndexRows(sds.GeneratorBasedBuilder):
    """`ROWS` rows whose `idx` column is each row's position: the identity that order, resume and mixing tests
    count (every row once, none lost). Subclassed per row count by the `index_cache` fixture."""

    ROWS = 0

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"idx": sds.Value("int64")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"rows": self.ROWS})]

    def _generate_examples(self, rows):
        for i in range(rows):
            yield i, {"idx": i}


@pytest.fixture(scope="session")
def index_cache(tmp_path_factory):
    """`index_cache(rows, **load_options)`: the train split of an `IndexRows` cache, built once per
    (rows, options) in a test process, each in its own root."""
    built = {}

    def make(rows: int, **options):
        key = (rows, json.dumps(options, sort_keys=True, default=str))
        if key not in built:
            builder = type(f"IndexRows{rows}", (IndexRows,), {"ROWS": rows})
            root = tmp_path_factory.mktemp(f"index-rows-{rows}")
            built[key] = sds.load_dataset(builder, split="train", cache_dir=root, **options)
        return built[key]

    return make


@pytest.fixture
def warnings_logged():
    """The text of every warning stable-datasets logs during the test (logging is otherwise off in tests)."""
    from loguru import logger

    messages: list[str] = []
    logger.enable("stable_datasets")
    handle = logger.add(lambda m: messages.append(str(m)), level="WARNING")
    yield messages
    logger.remove(handle)
    logger.disable("stable_datasets")


@pytest.fixture
def write_builder(tmp_path: Path):
    """Write a builder script `<name>.py` under tmp_path/builders and return its path."""

    def write(name: str, source: str) -> Path:
        folder = tmp_path / "builders"
        folder.mkdir(exist_ok=True)
        path = folder / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        return path

    return write


TOY_BUILDER = """
import os
from dataclasses import dataclass
import numpy as np
import stable_datasets as sds

@dataclass
class ToyConfig(sds.BuilderConfig):
    rows: int = 50

class Toy(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")
    BUILDER_CONFIG_CLASS = ToyConfig

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "id": sds.Value("int64"),
            "text": sds.Value("string"),
            "label": sds.ClassLabel(names=["neg", "pos"]),
            "vec": sds.Sequence(sds.Value("float32")),
            "grid": sds.Array2D((2, 3), "int16"),
            "meta": {"score": sds.Value("float64"), "tags": sds.Sequence(sds.Value("string"))},
        }), description="toy data")

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"start": 0}), sds.SplitGenerator("test", {"start": 1000})]

    def _generate_examples(self, start):
        counter = os.environ.get("TOY_COUNTER")
        if counter:
            with open(counter, "a") as fh:
                fh.write("x")
        kill_at = int(os.environ.get("TOY_KILL_AT", "-1"))
        pause = float(os.environ.get("TOY_SLEEP", "0"))
        for i in range(start, start + self.config.rows):
            if i - start == kill_at:
                import signal
                os.kill(os.getpid(), signal.SIGKILL)
            if pause:
                import time
                time.sleep(pause)
            yield i, {
                "id": i,
                "text": f"row {i}",
                "label": i % 2,
                "vec": [float(i)] * (i % 4),
                "grid": np.arange(6, dtype=np.int16).reshape(2, 3) + i,
                "meta": {"score": i / 2, "tags": ["a"] * (i % 3)},
            }
"""


@pytest.fixture
def toy_builder(write_builder) -> Path:
    return write_builder("toy", TOY_BUILDER)


# Five "parts" of rows in one list gen_kwarg, so num_proc divides them; KEY is replaced by the test.
# PARTS_KILL=<part> SIGKILLs the worker when it reaches that part; PARTS_COUNTER logs each part generated.
PARTS_BUILDER = """
import os, signal
import stable_datasets as sds

class Parts(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "part": sds.Value("int32"), "i": sds.Value("int64"), "text": sds.Value("string"),
            "vec": sds.Sequence(sds.Value("float32")), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"parts": list(range(5)), "rows": 300})]

    def _generate_examples(self, parts, rows):
        for part in parts:
            if str(part) == os.environ.get("PARTS_KILL"):
                os.kill(os.getpid(), signal.SIGKILL)
            counter = os.environ.get("PARTS_COUNTER")
            if counter:
                with open(counter, "a") as fh:
                    fh.write(f"{part}\\n")
            for i in range(rows):
                yield KEY, {"part": part, "i": i, "text": f"{part}:{i}", "vec": [float(i)] * (i % 3),
                            "blob": bytes([part]) * (i % 5)}
"""


@pytest.fixture
def parts_builder(write_builder) -> Path:
    return write_builder("parts", PARTS_BUILDER.replace("KEY", "(part, i)"))


@pytest.fixture
def fast_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory (/dev/shm) when there is room: on this machine's ext4 (mounted with discard) creating
    and removing a file costs ~1.4 ms, 100 s for 70,000 shards; on tmpfs 40 us."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 1 << 30):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="sds-many-shards-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
