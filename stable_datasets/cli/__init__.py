"""`stable-datasets`: build, list, inspect, verify and clean caches from the shell.

Exit codes: 0 ok, 1 a problem with the data (a corrupt or missing cache, a failed build or
download), reported in one line; 2 a usage error (an unknown option, a bad value, a config or
builder that does not exist). `--json`, `--cache-dir` and `--debug` (show tracebacks) go
before or after the command. Output cut short by a closed pipe (`| head`) ends quietly.

One module per group of commands; each adds its commands with `add_commands(sub, common)`. A new
command is a module with that function, named in COMMANDS (the order `--help` lists them in).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from stable_datasets.cli import build, catalog, inventory, megatron, migrate, upkeep, view
from stable_datasets.cli.common import OK, PROBLEM, USAGE, UsageError, common_options, one_line
from stable_datasets.version import __version__

__all__ = ["COMMANDS", "OK", "PROBLEM", "USAGE", "UsageError", "build_parser", "main"]

#: the command modules, in the order `stable-datasets --help` lists their commands
COMMANDS = (build, inventory, upkeep, migrate, catalog, view, megatron)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stable-datasets", description=__doc__.split("\n")[0],
                                     parents=[common_options(defaults=True)])
    parser.add_argument("--version", action="version", version=f"stable-datasets {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = [common_options(defaults=False)]
    for commands in COMMANDS:
        commands.add_commands(sub, common)
    return parser


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (`| head`): stop without a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
    return OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except UsageError as exc:
        print(f"{parser.prog} {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        print(f"{parser.prog}: {one_line(exc)}", file=sys.stderr)
        return PROBLEM
