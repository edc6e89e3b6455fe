"""Progress bars and logging switches shared by every long-running step.

Logging goes through loguru under the "stable_datasets" name: silence it with
`loguru.logger.disable("stable_datasets")`. Progress bars are tqdm: silence them with
`stable_datasets.disable_progress_bars()` or `STABLE_DATASETS_DISABLE_PROGRESS=1`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

from stable_datasets.env import env_flag

T = TypeVar("T")

_progress_enabled: bool | None = None


def disable_progress_bars() -> None:
    global _progress_enabled
    _progress_enabled = False


def enable_progress_bars() -> None:
    global _progress_enabled
    _progress_enabled = True


def progress_enabled() -> bool:
    if _progress_enabled is not None:
        return _progress_enabled
    return not env_flag("STABLE_DATASETS_DISABLE_PROGRESS")


def progress(iterable: Iterable[T] | None = None, **kwargs) -> Iterator[T] | tqdm:
    """A tqdm bar that respects the library-wide switch and stays quiet for short jobs."""
    kwargs.setdefault("mininterval", 0.5)
    kwargs.setdefault("delay", 2.0)
    kwargs.setdefault("leave", False)
    return tqdm(iterable, disable=not progress_enabled(), **kwargs)
