"""`stable-datasets build`: build (or reuse) a dataset's caches."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stable_datasets.cli.common import OK, UsageError, builder_for, key_value, positive_int, text_table
from stable_datasets.dataset.splits import parse_split
from stable_datasets.errors import UnknownSplitError
from stable_datasets.layouts import STORAGE_FORMATS
from stable_datasets.load import load_dataset
from stable_datasets.storage.shard_cache import split_url_of


def cmd_build(args: argparse.Namespace) -> int:
    sets = dict(args.set)
    builder_for(args.name, args.config, args.set, args.cache_dir)  # usage errors before any work
    if args.split is not None:
        try:
            parse_split(args.split)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        result = load_dataset(args.name, split=args.split, name=args.config, storage_format=args.storage_format,
                              cache_dir=args.cache_dir, num_proc=args.num_proc, download_mode=args.download_mode,
                              engine=args.engine, ray_address=args.address, **sets)
    except UnknownSplitError as exc:  # known once the builder named its splits, before any is built
        raise UsageError(str(exc)) from None
    splits = result.items() if isinstance(result, dict) else [(args.split, result)]

    rows = [{"split": s, "rows": len(ds), "path": split_url_of(ds.cache_dirs[0]) or str(ds.cache_dirs[0])}
            for s, ds in splits]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(text_table([[r["split"], r["rows"], r["path"]] for r in rows], ["split", "rows", "path"]))
    return OK


def add_build_arguments(build: argparse.ArgumentParser) -> None:
    """What `build` takes (a place for more: an execution engine and its address)."""
    build.add_argument("name", help="builder name, script path or folder")
    build.add_argument("--split", help="one split (default: all)")
    build.add_argument("--storage-format", default="arrow", choices=sorted(STORAGE_FORMATS))
    build.add_argument("--config", help="builder config name")
    build.add_argument("--num-proc", type=positive_int, metavar="N",
                       help="build each split in this many parts, in parallel")
    build.add_argument("--engine", default="process", choices=["process", "ray"],
                       help="run the parts in forked processes or as Ray tasks")
    build.add_argument("--address", help="the Ray cluster to use (default: $RAY_ADDRESS, else a local one)")
    build.add_argument("--download-mode", default="reuse_dataset_if_exists",
                       choices=["reuse_dataset_if_exists", "force_rebuild", "force_redownload"])
    build.add_argument("--set", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                       help="override a config field (the value is read as JSON when it parses)")


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    build = sub.add_parser("build", parents=common, help="build (or reuse) a dataset's caches")
    add_build_arguments(build)
    build.set_defaults(func=cmd_build)
