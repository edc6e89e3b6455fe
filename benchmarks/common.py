"""Helpers shared by the benchmarks: timing, quiet mode, scratch folders, tables."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Best wall time of `repeats` runs, with the cyclic GC paused as `timeit` does (for every side)."""
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
        finally:
            gc.enable()
    return min(times)


def best_of_each(fns: list[Callable[[], object]], repeats: int = 5) -> list[float]:
    """Best wall time of each function, run in turns (a, b, a, b, ...) so that a slow spell on a
    shared machine hits every side alike instead of one side's whole measurement."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], best_of(fn, 1))
    return best


def quiet() -> None:
    """No progress bars or log lines from the library while measuring."""
    import os

    from loguru import logger

    os.environ["STABLE_DATASETS_DISABLE_PROGRESS"] = "1"
    logger.disable("stable_datasets")


def work_dir(prefix: str):
    """A scratch folder for one run ($BENCH_DIR chooses the disk)."""
    import os
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("BENCH_DIR")))


def print_table(header: list[str], rows: list[tuple], right: tuple[int, ...] = ()) -> None:
    """A Markdown table; columns whose index is in `right` are right-aligned (numbers)."""
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---:" if j in right else "---" for j in range(len(header))) + " |")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
