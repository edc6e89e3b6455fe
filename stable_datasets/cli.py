"""`stable-datasets`: build, list, inspect, verify and clean caches from the shell.

Exit codes: 0 ok, 1 a problem with the data (a corrupt or missing cache, a failed build or
download), reported in one line; 2 a usage error (an unknown option, a bad value, a config or
builder that does not exist). `--json`, `--cache-dir` and `--debug` (show tracebacks) go
before or after the command. Output cut short by a closed pipe (`| head`) ends quietly.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stable_datasets.cache.inventory import CacheEntry
from stable_datasets.cache.paths import cache_root, downloads_dir, safe_name
from stable_datasets.catalog.card import catalog_entries, catalog_markdown, catalog_text
from stable_datasets.dataset.splits import parse_split
from stable_datasets.errors import BuilderNotFoundError, ConfigurationError, StableDatasetsError, UnknownSplitError
from stable_datasets.layouts import STORAGE_FORMATS
from stable_datasets.load import load_builder, load_dataset
from stable_datasets.loaders.compressed import stale_copies
from stable_datasets.manage.inventory import (
    annotate,
    dataset_name,
    describe_inputs,
    kind_of,
    last_used,
    parse_duration,
    plan_prune,
    totals,
)
from stable_datasets.manage.ownership import same_builder
from stable_datasets.megatron.preprocess import add_preprocess_arguments, run_preprocess
from stable_datasets.migrate import migrate_cache, plan_migrations
from stable_datasets.registry import resolve_builder_class
from stable_datasets.roots import CacheRoot, locate, resolve_root, root_for
from stable_datasets.storage.shard_cache import split_url_of
from stable_datasets.version import __version__

OK, PROBLEM, USAGE = 0, 1, 2


def _size(num: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while num >= 1024 and power < len(units) - 1:
        num /= 1024
        power += 1
    return f"{num:.0f} B" if power == 0 else f"{num:.1f} {units[power]}"


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{seconds:.0f}s"


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


class UsageError(StableDatasetsError):
    """A bad command line value found after parsing (exit code 2)."""


def _key_value(item: str) -> tuple[str, Any]:
    """`--set rows=100`: the value parsed as JSON when it parses, else kept as text."""
    key, equals, value = item.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {item!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of hours >= 0, got {text!r}")
    return value


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    text = lines[0]
    for line in lines[1:]:
        text += (" " if text.endswith(":") else "; ") + line

    return text if isinstance(exc, StableDatasetsError | UsageError) else f"{type(exc).__name__}: {text}"


def _builder_for(target: str, config: str | None, sets: Sequence[tuple[str, Any]], cache_dir: str | None) -> Any:
    """The builder a command names, with its config and overrides; a name, config or field that
    does not exist is a usage error (nothing is built)."""
    try:
        return load_builder(target, config, cache_dir=cache_dir, **dict(sets))
    except BuilderNotFoundError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError) as exc:  # an unknown config name or field, a field value it refuses
        raise UsageError(str(exc)) from None


# -- commands ---------------------------------------------------------------------------------
def cmd_build(args: argparse.Namespace) -> int:
    sets = dict(args.set)
    _builder_for(args.name, args.config, args.set, args.cache_dir)  # usage errors before any work
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
        print(_table([[r["split"], r["rows"], r["path"]] for r in rows], ["split", "rows", "path"]))
    return OK


def _entries_named(target: str, root: CacheRoot) -> list[Any]:
    """The caches a command names: a cache's folder or URL, a folder of caches, or every cache of a builder under
    the root (by its recorded source: a name, a script path or a folder holding one)."""
    found = locate(target, root)
    if found is not None:
        return [root_for(address, root).entry(address) for address in found]
    return _caches_of_builder(target, root.entries())


def _iso(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="seconds") if seconds else ""


def cmd_ls(args: argparse.Namespace) -> int:
    root = resolve_root(args.cache_dir)
    entries: list[Any] = root.entries()
    root.note_listed(entries)
    annotate(entries)
    if args.name:
        entries = _caches_named(args.name, entries)
    whole, per = totals(entries)
    if args.json:
        if args.summary:
            print(json.dumps({"total": vars(whole), "datasets": {name: vars(t) for name, t in per.items()}}, indent=2))
            return OK
        listed = []
        for e in entries:
            item = e.to_dict() | {"age_seconds": round(e.age_seconds), "kind": kind_of(e.metadata) or "unrecorded",
                                  "last_used": _iso(last_used(e))}
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
                 e.metadata.layout, f"{e.metadata.num_rows:,}", _size(e.size), _age(e.age_seconds),
                 _age(max(0.0, now - last_used(e))), e.status] for e in entries]
        table = _table(rows, ["name", "config", "version", "split", "layout", "rows", "size", "age", "used",
                              "status"]).splitlines()
        print(table[0])
        for line, entry in zip(table[1:], entries):
            print(line)
            if args.long:
                print(f"    path: {entry.location}")
                for detail in describe_inputs(entry.metadata):
                    print(f"    {detail}")
        print()
    totals_rows = [[name, f"{t.caches:,}", f"{t.rows:,}", _size(t.bytes)] for name, t in per.items()]
    totals_rows.append(["total", f"{whole.caches:,}", f"{whole.rows:,}", _size(whole.bytes)])
    print(_table(totals_rows, ["dataset", "caches", "rows", "size"]))
    return OK


def _caches_named(name: str, entries: list[Any]) -> list[Any]:
    """`ls NAME`: the caches of a builder or loader (as `build` names it), or of a dataset name as `ls` shows it."""
    named = [e for e in entries if name in (e.metadata.builder_name, dataset_name(e.metadata))]
    if named and not _is_script_target(name):
        return named
    return _caches_of_builder(name, entries)


def _is_script_target(target: str) -> bool:
    path = Path(target).expanduser()
    return path.suffix == ".py" or path.is_dir()


def _builder_class(target: str) -> type | None:
    """The builder a target names as `build` resolves it; None for a name no builder has any more."""
    try:
        return resolve_builder_class(target)
    except BuilderNotFoundError as exc:
        if _is_script_target(target):
            raise UsageError(str(exc)) from None
        return None


def _builder_name(target: str) -> str:
    cls = _builder_class(target)
    return cls.builder_name() if cls is not None else target


def _caches_of_builder(target: str, entries: list[CacheEntry]) -> list[CacheEntry]:
    """The caches of the builder `target` names: by the builder's recorded source, not by its name alone
    (two scripts may both define `shapes`). A name no builder answers to any more matches the caches of
    that name if they come from one source; from several it is a usage error naming them."""
    cls = _builder_class(target)
    if cls is not None:
        return [e for e in entries if same_builder(e, cls)]
    named = [e for e in entries if e.metadata.builder_name == target]
    sources = sorted({e.metadata.builder_source for e in named})
    if len(sources) > 1:
        raise UsageError(f"caches of several builders are named {target!r} (from {', '.join(map(repr, sources))}); "
                         "name the builder's script path, or a cache folder")
    return named


def cmd_info(args: argparse.Namespace) -> int:
    entries = _entries_named(args.target, resolve_root(args.cache_dir))
    if entries:
        info = [{**e.to_dict(), "features": e.metadata.features, "fingerprint_inputs": e.metadata.fingerprint_inputs,
                 "info": e.metadata.info, "shards": len(e.metadata.shards), "made_by": e.metadata.made_by,
                 "inputs": describe_inputs(e.metadata)} for e in entries]
    else:
        builder = _builder_for(args.target, args.config, (), args.cache_dir)
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
        found = _caches_of_builder(args.target, root.entries(unreadable))
        folder = root.builder_folder(safe_name(_builder_name(args.target)))
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
    entries = [e for e in _entries_named(args.name, root)
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


def cmd_catalog(args: argparse.Namespace) -> int:
    """The catalog's datasets (docs/catalog.md), as a table, Markdown or JSON lines."""
    entries = catalog_entries()
    if args.json:
        for entry in entries:
            print(json.dumps(entry.to_dict()))
    else:
        print(catalog_markdown(entries) if args.markdown else catalog_text(entries), end="")
    return OK


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


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535 (0: any free port), got {text!r}")
    return value


def _common_options(defaults: bool) -> argparse.ArgumentParser:
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


def add_build_arguments(build: argparse.ArgumentParser) -> None:
    """What `build` takes (a place for more: an execution engine and its address)."""
    build.add_argument("name", help="builder name, script path or folder")
    build.add_argument("--split", help="one split (default: all)")
    build.add_argument("--storage-format", default="arrow", choices=sorted(STORAGE_FORMATS))
    build.add_argument("--config", help="builder config name")
    build.add_argument("--num-proc", type=_positive_int, metavar="N",
                       help="build each split in this many parts, in parallel")
    build.add_argument("--engine", default="process", choices=["process", "ray"],
                       help="run the parts in forked processes or as Ray tasks")
    build.add_argument("--address", help="the Ray cluster to use (default: $RAY_ADDRESS, else a local one)")
    build.add_argument("--download-mode", default="reuse_dataset_if_exists",
                       choices=["reuse_dataset_if_exists", "force_rebuild", "force_redownload"])
    build.add_argument("--set", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                       help="override a config field (the value is read as JSON when it parses)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stable-datasets", description=__doc__.split("\n")[0],
                                     parents=[_common_options(defaults=True)])

    parser.add_argument("--version", action="version", version=f"stable-datasets {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = [_common_options(defaults=False)]

    build = sub.add_parser("build", parents=common, help="build (or reuse) a dataset's caches")
    add_build_arguments(build)
    build.set_defaults(func=cmd_build)

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

    verify = sub.add_parser("verify", parents=common, help="recompute every checksum and row count")
    verify.add_argument("target", help="a cache folder (or a folder of caches), or a builder name, script path or "
                                       "folder (all its caches)")
    verify.set_defaults(func=cmd_verify)

    prune = sub.add_parser("prune", parents=common, help="remove superseded and stale caches (never one a live "
                                                         "process has open) and orphaned staging directories")
    prune.add_argument("--dry-run", action="store_true")
    prune.add_argument("--keep-last", type=_positive_int, default=1, metavar="N",
                       help="keep the N newest caches of each dataset, config and data-file spec (default 1)")
    prune.add_argument("--older-than", type=_duration, default=None, metavar="AGE",
                       help="only caches unused for this long (7d, 12h, 30m, 2w)")
    prune.add_argument("--max-staging-age", type=_hours, default=24.0, metavar="HOURS",
                       help="staging of builds on other hosts older than this is orphaned (on this host, "
                            "staging is orphaned only when its owner process is gone)")
    prune.set_defaults(func=cmd_prune)

    rm = sub.add_parser("rm", parents=common, help="remove every cache of a builder (and their map caches)")
    rm.add_argument("name", help="a builder name, script path or folder (its caches only), or a cache folder")
    rm.add_argument("--config")
    rm.add_argument("--dry-run", action="store_true")
    rm.set_defaults(func=cmd_rm)

    migrate = sub.add_parser("migrate", parents=common,
                             help="convert caches of the upstream stable-datasets into ours (the source is only read)")
    migrate.add_argument("path", help="an upstream cache folder, or a folder holding several")
    migrate.add_argument("--dest", help="where the converted cache goes (for a folder of caches: one folder each "
                                        "inside it); default <cache root>/migrated/<name of PATH>")
    migrate.add_argument("--storage-format", default="arrow", choices=sorted(STORAGE_FORMATS))
    migrate.add_argument("--num-proc", type=_positive_int, metavar="N", help="convert in this many parts, in parallel")
    migrate.set_defaults(func=cmd_migrate)

    catalog = sub.add_parser("catalog", parents=common, help="the datasets of the catalog: task, splits and rows, "
                                                             "download size, extra, automatic or manual download")
    catalog.add_argument("--markdown", action="store_true", help="as the table of docs/catalog.md")
    catalog.set_defaults(func=cmd_catalog)

    view = sub.add_parser("view", parents=common, help="a read-only viewer of the caches in a browser (127.0.0.1)")
    view.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    view.add_argument("--port", type=_port, default=8765, help="port (0: any free port); the URL is printed first")
    view.set_defaults(func=cmd_view)

    megatron = sub.add_parser("megatron-preprocess", parents=common, help="Megatron-LM's preprocess_data.py: text "
                                                                          "-> {prefix}_{key}_document.bin/.idx")
    add_preprocess_arguments(megatron)
    megatron.set_defaults(func=cmd_megatron_preprocess)
    return parser


def cmd_megatron_preprocess(args: argparse.Namespace) -> int:
    """Logic in megatron/preprocess.py; the input is resolved with load_dataset (this floor's)."""
    for prefix in run_preprocess(args, functools.partial(load_dataset, cache_dir=args.cache_dir)):
        print(f"{prefix}.bin {prefix}.idx")
    return OK


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
        print(f"{parser.prog} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        print(f"{parser.prog}: {_one_line(exc)}", file=sys.stderr)
        return PROBLEM


if __name__ == "__main__":
    sys.exit(main())
