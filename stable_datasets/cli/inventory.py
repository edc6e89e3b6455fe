"""`stable-datasets ls` and `info`: what caches there are, and what a builder or cache holds."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from stable_datasets.cli.common import OK, age_text, builder_for, iso_time, size_text, text_table
from stable_datasets.cli.targets import caches_named, entries_named
from stable_datasets.manage.inventory import annotate, describe_inputs, kind_of, last_used, totals
from stable_datasets.roots import resolve_root


def cmd_ls(args: argparse.Namespace) -> int:
    root = resolve_root(args.cache_dir)
    entries: list[Any] = root.entries()
    root.note_listed(entries)
    annotate(entries)
    if args.name:
        entries = caches_named(args.name, entries)
    whole, per = totals(entries)
    if args.json:
        if args.summary:
            print(json.dumps({"total": vars(whole), "datasets": {name: vars(t) for name, t in per.items()}}, indent=2))
            return OK
        listed = []
        for e in entries:
            item = e.to_dict() | {"age_seconds": round(e.age_seconds), "kind": kind_of(e.metadata) or "unrecorded",
                                  "last_used": iso_time(last_used(e))}
            if args.long:
                item |= {"made_by": e.metadata.made_by, "inputs": describe_inputs(e.metadata)}
            listed.append(item)
        print(json.dumps(listed, indent=2))
        return OK
    if not entries:
        where = root
        print(f"no caches of {args.name!r} under {where}" if args.name else f"no caches under {where}")
        return OK
    if not args.summary:
        now = time.time()
        rows = [[e.metadata.builder_name, e.metadata.config_name, e.metadata.version, e.metadata.split,
                 e.metadata.layout, f"{e.metadata.num_rows:,}", size_text(e.size), age_text(e.age_seconds),
                 age_text(max(0.0, now - last_used(e))), e.status] for e in entries]
        table = text_table(rows, ["name", "config", "version", "split", "layout", "rows", "size", "age", "used",
                              "status"]).splitlines()
        print(table[0])
        for line, entry in zip(table[1:], entries):
            print(line)
            if args.long:
                print(f"    path: {entry.location}")
                for detail in describe_inputs(entry.metadata):
                    print(f"    {detail}")
        print()
    totals_rows = [[name, f"{t.caches:,}", f"{t.rows:,}", size_text(t.bytes)] for name, t in per.items()]
    totals_rows.append(["total", f"{whole.caches:,}", f"{whole.rows:,}", size_text(whole.bytes)])
    print(text_table(totals_rows, ["dataset", "caches", "rows", "size"]))
    return OK


def cmd_info(args: argparse.Namespace) -> int:
    entries = entries_named(args.target, resolve_root(args.cache_dir))
    if entries:
        info = [{**e.to_dict(), "features": e.metadata.features, "fingerprint_inputs": e.metadata.fingerprint_inputs,
                 "info": e.metadata.info, "shards": len(e.metadata.shards), "made_by": e.metadata.made_by,
                 "inputs": describe_inputs(e.metadata)} for e in entries]
    else:
        builder = builder_for(args.target, args.config, (), args.cache_dir)
        info = [{"name": builder.builder_name(), "config": builder.config.name, "version": str(builder.version),
                 "configs": [c.name for c in builder.BUILDER_CONFIGS], "features": builder.features.to_dict(),
                 "info": builder.info.to_dict(), "fingerprint": builder.fingerprint(),
                 "fingerprint_inputs": builder.fingerprint_inputs(), "cache_dir": str(builder.cache_dir())}]
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return OK
    for item in info:
        for key in ("name", "config", "version", "split", "layout", "rows", "fingerprint", "path", "cache_dir",
                    "configs"):
            if key in item:
                print(f"{key:12} {item[key]}")
        for line in item.get("inputs", []):
            print(line)
        print("features:")
        for name, spec in item["features"].items():
            print(f"  {name}: {json.dumps(spec)}")
        inputs = dict(item["fingerprint_inputs"])
        inputs.pop("features", None)
        print("fingerprint inputs:")
        for key, value in inputs.items():
            print(f"  {key}: {json.dumps(value, default=str)}")
        print()
    return OK


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    ls = sub.add_parser("ls", parents=common, help="list every cache: rows, size, last use, status, and the sums "
                                                   "per dataset")
    ls.add_argument("name", nargs="?", help="only the caches of this builder or loader (a name, script path or "
                                            "folder)")
    ls.add_argument("--long", "-l", action="store_true", help="also where each cache is and what made it (builder, "
                                                              "script, data files as given and resolved, parent)")
    ls.add_argument("--summary", action="store_true", help="only the sums per dataset and the total")
    ls.set_defaults(func=cmd_ls)

    info = sub.add_parser("info", parents=common, help="features, splits and fingerprint inputs of a builder or cache")
    info.add_argument("target", help="a cache folder, or a builder name, script path or folder")
    info.add_argument("--config")
    info.set_defaults(func=cmd_info)
