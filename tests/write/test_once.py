"""`build_once`: reuse what is there, rebuild what is damaged, and write a split once however many
processes ask for it at the same moment."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from loguru import logger

from stable_datasets.cache.metadata import METADATA_FILE, read_published
from stable_datasets.features.features import Features, Value
from stable_datasets.identity.fingerprint import fingerprint
from stable_datasets.layouts import arrow_shards
from stable_datasets.write import ExampleSource, SplitJobs, WritePlan, build_once
from stable_datasets.write.once import lock_path, published_matches


class NumberSource(ExampleSource):
    """`rows` numbered examples; every pass over them is logged as a line of `log` (in any process)."""

    def __init__(self, rows: int, log: Path, pause: float = 0.0):
        self.rows, self.log, self.pause = rows, log, pause

    def plan_jobs(self, num_jobs, run, workdir):
        return SplitJobs([None])

    def examples(self, job):
        with open(self.log, "a") as f:
            f.write("pass\n")
        time.sleep(self.pause)  # holds the lock long enough for a racing process to wait on it
        for i in range(self.rows):
            yield i, {"x": i}


def _plan(target: Path, rows: int) -> WritePlan:
    inputs = {"test": "build_once", "rows": rows}
    return WritePlan(target=target, layout=arrow_shards.NAME, options={**arrow_shards.DEFAULT_OPTIONS, "batch_rows": 4},
                     fingerprint=fingerprint(inputs), fingerprint_inputs=inputs, builder_name="once",
                     config_name="default", version="1.0.0", split="train", features=Features({"x": Value("int64")}),
                     media_root=target.parent)


def _reuse(plan: WritePlan):
    return lambda: plan.target if published_matches(plan.target, plan.fingerprint) else None


def _passes(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _rows(target: Path) -> int:
    pin, metadata = read_published(target)
    pin.release()
    return metadata.num_rows


def test_writes_once_then_reuses(tmp_path):
    plan, log = _plan(tmp_path / "fp" / "train", 10), tmp_path / "passes.log"
    assert build_once(plan, NumberSource(10, log), reuse=_reuse(plan)) is None  # written by this call
    assert (_passes(log), _rows(plan.target)) == (1, 10)
    assert lock_path(plan.target) == tmp_path / "fp" / ".train.lock"
    assert build_once(plan, NumberSource(10, log), reuse=_reuse(plan)) == plan.target  # found, not written
    assert _passes(log) == 1


def test_the_reuse_check_is_asked_before_and_under_the_lock(tmp_path):
    plan, log = _plan(tmp_path / "fp" / "train", 3), tmp_path / "passes.log"
    asked: list[str] = []

    def reuse():
        asked.append("locked" if lock_path(plan.target).exists() else "unlocked")
        return None

    build_once(plan, NumberSource(3, log), reuse=reuse)
    assert asked == ["unlocked", "locked"]
    asked.clear()
    build_once(plan, NumberSource(3, log), reuse=reuse, checked=True)  # the caller has just asked
    assert asked == ["locked"]
    assert _passes(log) == 2


def test_no_reuse_check_always_writes(tmp_path):
    plan, log = _plan(tmp_path / "fp" / "train", 5), tmp_path / "passes.log"
    build_once(plan, NumberSource(5, log))
    assert build_once(plan, NumberSource(5, log)) is None
    assert (_passes(log), _rows(plan.target)) == (2, 5)


def test_a_damaged_cache_is_rebuilt_with_a_warning(tmp_path):
    plan, log = _plan(tmp_path / "fp" / "train", 6), tmp_path / "passes.log"
    build_once(plan, NumberSource(6, log), reuse=_reuse(plan))
    (plan.target / METADATA_FILE).write_text("{not json")
    warnings: list[str] = []
    logger.enable("stable_datasets")
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    try:
        assert build_once(plan, NumberSource(6, log), reuse=_reuse(plan)) is None
    finally:
        logger.remove(sink)
        logger.disable("stable_datasets")
    assert (_passes(log), _rows(plan.target)) == (2, 6)
    assert warnings and all(w.startswith(f"ignoring unusable cache {plan.target}: ") for w in warnings)
    assert build_once(plan, NumberSource(6, log), reuse=_reuse(plan)) == plan.target  # and is whole again


def test_a_cache_of_another_fingerprint_is_rebuilt(tmp_path):
    target, log = tmp_path / "fp" / "train", tmp_path / "passes.log"
    build_once(_plan(target, 4), NumberSource(4, log))
    plan = _plan(target, 7)
    assert build_once(plan, NumberSource(7, log), reuse=_reuse(plan)) is None
    assert (_passes(log), _rows(target)) == (2, 7)


def _race(target: str, log: str, barrier, results) -> None:
    plan = _plan(Path(target), 20)
    barrier.wait()
    found = build_once(plan, NumberSource(20, Path(log), pause=0.5), reuse=_reuse(plan))
    results.put("reused" if found is not None else "wrote")


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_racing_processes_build_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    target, log = tmp_path / "fp" / "train", tmp_path / "passes.log"
    procs = [ctx.Process(target=_race, args=(str(target), str(log), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert sorted(results.get(timeout=5) for _ in procs) == ["reused", "wrote"]
    assert (_passes(log), _rows(target)) == (1, 20)
