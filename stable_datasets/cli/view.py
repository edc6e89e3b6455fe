"""`stable-datasets view`: a read-only viewer of the caches in a browser."""

from __future__ import annotations

import argparse
from typing import Any

from stable_datasets.cli.common import OK, UsageError
from stable_datasets.errors import ConfigurationError
from stable_datasets.roots import resolve_root


def cmd_view(args: argparse.Namespace) -> int:
    """Serve the viewer until Ctrl-C; the URL is the first line printed."""
    from stable_datasets.viewer import serve  # local: its HTTP server imports ~0.2 s of the standard library

    try:
        root = resolve_root(args.cache_dir, check=False).local_path("view")
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    try:
        serve(root, args.host, args.port)
    except OSError as exc:  # the port is taken, or the host is not this machine's
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    return OK


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535 (0: any free port), got {text!r}")
    return value


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    view = sub.add_parser("view", parents=common, help="a read-only viewer of the caches in a browser (127.0.0.1)")
    view.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    view.add_argument("--port", type=port_number, default=8765,
                      help="port (0: any free port); the URL is printed first")
    view.set_defaults(func=cmd_view)
