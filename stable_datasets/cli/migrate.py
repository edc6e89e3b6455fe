"""`stable-datasets migrate`: convert caches of the upstream stable-datasets into ours (the source is only
read)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from stable_datasets.cache.paths import cache_root
from stable_datasets.cli.common import OK, positive_int
from stable_datasets.layouts import STORAGE_FORMATS
from stable_datasets.migrate import migrate_cache, plan_migrations


def cmd_migrate(args: argparse.Namespace) -> int:
    source = Path(args.path).expanduser()
    dest = Path(args.dest) if args.dest else cache_root(args.cache_dir) / "migrated" / source.resolve().name
    done = []
    for migration in plan_migrations(source, dest):
        metadata = migrate_cache(migration.source, migration.dest, storage_format=args.storage_format,
                                 num_proc=args.num_proc)
        done.append({"source": str(migration.source), "path": str(migration.dest), "rows": metadata.num_rows,
                     "layout": metadata.layout})
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        for item in done:
            print(f"migrated {item['source']} -> {item['path']} ({item['rows']:,} rows, {item['layout']})")
    return OK


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    migrate = sub.add_parser("migrate", parents=common,
                             help="convert caches of the upstream stable-datasets into ours (the source is only read)")
    migrate.add_argument("path", help="an upstream cache folder, or a folder holding several")
    migrate.add_argument("--dest", help="where the converted cache goes (for a folder of caches: one folder each "
                                        "inside it); default <cache root>/migrated/<name of PATH>")
    migrate.add_argument("--storage-format", default="arrow", choices=sorted(STORAGE_FORMATS))
    migrate.add_argument("--num-proc", type=positive_int, metavar="N", help="convert in this many parts, in parallel")
    migrate.set_defaults(func=cmd_migrate)
