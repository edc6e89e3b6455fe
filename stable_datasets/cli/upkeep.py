"""`stable-datasets verify`, `prune` and `rm`: check caches, and remove the ones no longer needed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from stable_datasets.cache.paths import downloads_dir, safe_name
from stable_datasets.cli.common import OK, PROBLEM, duration_arg, hours_arg, positive_int
from stable_datasets.cli.targets import builder_name, caches_of_builder, entries_named
from stable_datasets.loaders.compressed import stale_copies
from stable_datasets.manage.inventory import annotate, plan_prune
from stable_datasets.roots import locate, resolve_root, root_for


def _print_verify(args: argparse.Namespace, report: list[dict[str, Any]]) -> int:
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for item in report:
            print(f"{'ok ' if not item['problems'] else 'BAD'} {item['path']}")
            for problem in item["problems"]:
                print(f"    {problem}")
    return PROBLEM if any(item["problems"] for item in report) else OK


def cmd_verify(args: argparse.Namespace) -> int:
    root = resolve_root(args.cache_dir)
    unreadable: list[tuple[Any, str]] = []
    addresses = locate(args.target, root, unreadable, any_state=True)  # a cache, whatever state it is in
    if addresses is None:  # every cache of a builder, and those under its folder that cannot say whose they are
        found = caches_of_builder(args.target, root.entries(unreadable))
        folder = root.builder_folder(safe_name(builder_name(args.target)))
        addresses = [e.location for e in found] + [a for a, _ in unreadable if str(a).startswith(folder)]
    else:
        addresses += [a for a, _ in unreadable]  # a folder of caches: those it holds that cannot be read too
    if not addresses:
        print(f"stable-datasets: no cache found for {args.target!r} under {root}", file=sys.stderr)
        return PROBLEM
    report = [{"path": str(a), "problems": root_for(a, root).verify(a)} for a in addresses]
    return _print_verify(args, report)


def cmd_prune(args: argparse.Namespace) -> int:
    root = resolve_root(args.cache_dir)
    entries = root.entries()
    annotate(entries)
    plan = plan_prune(entries, keep_last=args.keep_last, older_than=args.older_than, check_in_use=root.sees_readers)
    stale = [("decompressed copy of a changed or removed file", f) for f in stale_copies(downloads_dir(root.local_dir))]
    removed, kept = root.prune(plan.remove, dry_run=args.dry_run, max_age_seconds=args.max_staging_age * 3600,
                               also=stale, entries=entries)
    return _report_prune(args, removed, [(reason, entry.location) for reason, entry in plan.kept] + kept)


def _report_prune(args: argparse.Namespace, report: list[tuple[str, Any]],
                  kept: list[tuple[str, Any]] | None = None) -> int:
    kept = kept or []
    if args.json:
        print(json.dumps([{"kind": k, "path": str(p), "removed": not args.dry_run} for k, p in report] +
                         [{"kind": "kept", "path": str(p), "removed": False, "reason": r} for r, p in kept], indent=2))
    else:
        verb = "would remove" if args.dry_run else "removed"
        for kind, path in report:
            print(f"{verb} {kind}: {path}")
        if not report:
            print("nothing to prune")
        for reason, path in kept:
            print(f"kept ({reason}): {path}")
    return OK


def cmd_rm(args: argparse.Namespace) -> int:
    root = resolve_root(args.cache_dir)
    entries = [e for e in entries_named(args.name, root)
               if args.config is None or e.metadata.config_name == args.config]
    if not entries:
        where = args.name if locate(args.name, root) is not None else root
        print(f"stable-datasets: no caches of {args.name!r} under {where}", file=sys.stderr)
        return PROBLEM
    removed = root_for(entries[0].location, root).remove(entries, dry_run=args.dry_run)
    if args.json:
        print(json.dumps([{"path": str(p), "removed": not args.dry_run} for p in removed], indent=2))
    else:
        for path in removed:
            print(f"{'would remove' if args.dry_run else 'removed'} {path}")
    return OK


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    verify = sub.add_parser("verify", parents=common, help="recompute every checksum and row count")
    verify.add_argument("target", help="a cache folder (or a folder of caches), or a builder name, script path or "
                                       "folder (all its caches)")
    verify.set_defaults(func=cmd_verify)

    prune = sub.add_parser("prune", parents=common, help="remove superseded and stale caches (never one a live "
                                                         "process has open) and orphaned staging directories")
    prune.add_argument("--dry-run", action="store_true")
    prune.add_argument("--keep-last", type=positive_int, default=1, metavar="N",
                       help="keep the N newest caches of each dataset, config and data-file spec (default 1)")
    prune.add_argument("--older-than", type=duration_arg, default=None, metavar="AGE",
                       help="only caches unused for this long (7d, 12h, 30m, 2w)")
    prune.add_argument("--max-staging-age", type=hours_arg, default=24.0, metavar="HOURS",
                       help="staging of builds on other hosts older than this is orphaned (on this host, "
                            "staging is orphaned only when its owner process is gone)")
    prune.set_defaults(func=cmd_prune)

    rm = sub.add_parser("rm", parents=common, help="remove every cache of a builder (and their map caches)")
    rm.add_argument("name", help="a builder name, script path or folder (its caches only), or a cache folder")
    rm.add_argument("--config")
    rm.add_argument("--dry-run", action="store_true")
    rm.set_defaults(func=cmd_rm)
