"""`stable-datasets catalog`: the datasets of the catalog (docs/catalog.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stable_datasets.catalog.card import catalog_entries, catalog_markdown, catalog_text
from stable_datasets.cli.common import OK


def cmd_catalog(args: argparse.Namespace) -> int:
    """The catalog's datasets (docs/catalog.md), as a table, Markdown or JSON lines."""
    entries = catalog_entries()
    if args.json:
        for entry in entries:
            print(json.dumps(entry.to_dict()))
    else:
        print(catalog_markdown(entries) if args.markdown else catalog_text(entries), end="")
    return OK


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    catalog = sub.add_parser("catalog", parents=common, help="the datasets of the catalog: task, splits and rows, "
                                                             "download size, extra, automatic or manual download")
    catalog.add_argument("--markdown", action="store_true", help="as the table of docs/catalog.md")
    catalog.set_defaults(func=cmd_catalog)
