"""Timing shared by the benchmarks."""

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
