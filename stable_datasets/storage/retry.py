"""Bounded retries for transient object-store failures (throttling, timeouts, dropped connections).

`STABLE_DATASETS_STORAGE_RETRIES` attempts in all (default 4), waiting 0.2 s, 0.4 s, 0.8 s ...
(at most 5 s, with jitter) between them. Permanent failures (no such bucket, access denied)
are not retried: each store says which of its errors are transient.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from loguru import logger

from stable_datasets.env import env_number

T = TypeVar("T")
DEFAULT_ATTEMPTS = 4
FIRST_WAIT = 0.2
MAX_WAIT = 5.0


def max_attempts() -> int:
    return env_number("STABLE_DATASETS_STORAGE_RETRIES", DEFAULT_ATTEMPTS, int, lambda n: n >= 1,
                      "must be a whole number of attempts >= 1")


def with_retries(call: Callable[[], T], is_transient: Callable[[BaseException], bool], what: str) -> T:
    """`call()`, again after a transient failure, up to `max_attempts()` times in all."""
    attempts = max_attempts()
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            wait = min(MAX_WAIT, FIRST_WAIT * 2 ** (attempt - 1)) * random.uniform(0.75, 1.25)
            logger.debug("{} failed ({}: {}); attempt {} of {} in {:.2f}s", what, type(exc).__name__, exc,
                         attempt + 1, attempts, wait)
            time.sleep(wait)
    raise AssertionError("unreachable")
