"""What every command of `stable-datasets` shares: exit codes, the usage error, the options every command
takes, argument types, and how values and errors are printed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from stable_datasets.errors import BuilderNotFoundError, StableDatasetsError
from stable_datasets.load import load_builder
from stable_datasets.manage.inventory import parse_duration

OK, PROBLEM, USAGE = 0, 1, 2


def size_text(num: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while num >= 1024 and power < len(units) - 1:
        num /= 1024
        power += 1
    return f"{num:.0f} B" if power == 0 else f"{num:.1f} {units[power]}"


def age_text(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{seconds:.0f}s"


def text_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def iso_time(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="seconds") if seconds else ""


class UsageError(StableDatasetsError):
    """A bad command line value found after parsing (exit code 2)."""


def key_value(item: str) -> tuple[str, Any]:
    """`--set rows=100`: the value parsed as JSON when it parses, else kept as text."""
    key, equals, value = item.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {item!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def hours_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of hours >= 0, got {text!r}")
    return value


def duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    text = lines[0]
    for line in lines[1:]:
        text += (" " if text.endswith(":") else "; ") + line

    return text if isinstance(exc, StableDatasetsError | UsageError) else f"{type(exc).__name__}: {text}"


def builder_for(target: str, config: str | None, sets: Sequence[tuple[str, Any]], cache_dir: str | None) -> Any:
    """The builder a command names, with its config and overrides; a name, config or field that
    does not exist is a usage error (nothing is built)."""
    try:
        return load_builder(target, config, cache_dir=cache_dir, **dict(sets))
    except BuilderNotFoundError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError) as exc:  # an unknown config name or field, a field value it refuses
        raise UsageError(str(exc)) from None


def common_options(defaults: bool) -> argparse.ArgumentParser:
    """Options every command takes, before or after its name (`ls --json` and `--json ls`).

    Sub-commands get them with suppressed defaults, so a value given before the command name
    is not reset by the sub-command's parser.
    """
    common = argparse.ArgumentParser(add_help=False)
    default = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    common.add_argument("--cache-dir", default=default(None),
                        help="cache root (default: $STABLE_DATASETS_CACHE_DIR or ~/.cache/stable_datasets)")
    common.add_argument("--json", action="store_true", default=default(False), help="machine-readable output")
    common.add_argument("--debug", action="store_true", default=default(False),
                        help="show the traceback of an error")
    return common
