"""Where stable-datasets' log messages go: loguru by default, the standard `logging` module on request.

The library logs through loguru under names `stable_datasets.<module>`. An application that
configures the standard `logging` module calls `use_standard_logging()` (or sets
`STABLE_DATASETS_LOGGING=standard` before importing stable_datasets): from then on each message
goes to `logging.getLogger("stable_datasets.<module>")` at its level, so logging's levels,
handlers and filters decide what is shown (`logging.getLogger("stable_datasets").setLevel(
logging.WARNING)` quiets the progress notes), and loguru's default stderr sink no longer prints
them. Sinks the application added to loguru itself keep receiving everything.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from loguru import logger

from stable_datasets.env import env_text

PACKAGE = "stable_datasets"
_state: dict[str, Any] = {"sink": None, "stderr": None}


def _ours(record: dict[str, Any]) -> bool:
    name = record["name"] or ""
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def _forward(message: Any) -> None:
    record = message.record
    level = logging.getLevelName(record["level"].name)
    target = logging.getLogger(record["name"])
    levelno = level if isinstance(level, int) else record["level"].no
    if not target.isEnabledFor(levelno):
        return
    exception = record["exception"]
    exc_info = (exception.type, exception.value, exception.traceback) if exception else None
    target.handle(target.makeRecord(record["name"], levelno, record["file"].path, record["line"],
                                    record["message"], (), exc_info, record["function"]))


def use_standard_logging(enabled: bool = True) -> None:
    """Send stable-datasets' messages to the standard `logging` module (True) or back to loguru (False).

    loguru's default stderr sink (id 0), when the application has not removed it, is replaced by the
    same sink without stable-datasets' messages; `use_standard_logging(False)` puts it back as it was.
    """
    if enabled and _state["sink"] is None:
        _state["sink"] = logger.add(_forward, level=0, filter=_ours, format="{message}", catch=True)
        try:
            logger.remove(0)
        except ValueError:  # the application configured loguru's sinks itself: leave them
            return
        _state["stderr"] = logger.add(sys.stderr, filter=lambda record: not _ours(record),
                                      level=env_text("LOGURU_LEVEL") or "DEBUG")
    elif not enabled and _state["sink"] is not None:
        logger.remove(_state["sink"])
        _state["sink"] = None
        if _state["stderr"] is not None:
            logger.remove(_state["stderr"])
            _state["stderr"] = None
            logger.add(sys.stderr, level=env_text("LOGURU_LEVEL") or "DEBUG")


def standard_logging_requested() -> bool:
    return (env_text("STABLE_DATASETS_LOGGING") or "").lower() in ("standard", "logging", "stdlib")
