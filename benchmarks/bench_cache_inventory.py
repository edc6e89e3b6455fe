"""`ls` and `prune` over a root of many caches: the inventory asks each builder once per lineage.

    python benchmarks/bench_cache_inventory.py --lineages 1000 --versions 10

Builds one real cache of a small builder script, then lays out `lineages x versions` caches
beside it (one config per lineage, `versions` builds of each, as edits of the script would
leave them; shards are hard links to the real one, metadata is real `_metadata.json`). Times:
listing (find every cache and read its metadata), `ls` (listing plus each cache's status),
`prune --dry-run` (`ls` plus what to remove, with the in-use probe of each superseded cache),
and, side by side, the status the way it was decided before `made_by`: asking the builder once
per cache (`cache_status` on every cache, what `ls` did). Then the check a publish under a cache
limit makes (cache.limit.evict_over_limit, here with nothing to evict): before the root's index,
a walk that read every `_metadata.json`; now one read of `<root>/.cache-index.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import best_of, print_table, quiet, work_dir

BUILDER = """
from dataclasses import dataclass
import stable_datasets as sds

@dataclass
class SmallConfig(sds.BuilderConfig):
    rows: int = 3

class Small(sds.GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = SmallConfig

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"n": sds.Value("int64")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        for i in range(self.config.rows):
            yield i, {"n": i}
"""


def lay_out(root: Path, script: Path, lineages: int, versions: int) -> int:
    import stable_datasets as sds

    template = sds.load_dataset(str(script), split="train", cache_dir=str(root))
    build = template.cache_dirs[0]
    meta = json.loads((build / "_metadata.json").read_text())
    shard = build / meta["shards"][0]["path"]
    made = 0
    for lineage in range(lineages):
        for version in range(versions):
            fp = f"{lineage:08x}{version:08x}"
            folder = root / "small" / "default" / "0.0.0" / fp
            target = folder / f"train@{lineage:08x}{version:05x}abc"
            target.mkdir(parents=True)
            os.link(shard, target / meta["shards"][0]["path"])
            data = json.loads(json.dumps(meta))
            data["fingerprint"] = fp
            data["created_at"] = f"2026-01-{1 + version:02d}T00:00:00+00:00"
            data["made_by"]["spec"]["config"]["rows"] = 1000 + lineage
            data["fingerprint_inputs"]["config"]["rows"] = 1000 + lineage
            (target / "_metadata.json").write_text(json.dumps(data))
            os.symlink(target.name, folder / "train")
            made += 1
    return made + 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lineages", type=int, default=1000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-per-cache", action="store_true", help="leave out the slow 'asked once per cache'")
    args = parser.parse_args()
    quiet()
    from stable_datasets.cache import index as cache_index
    from stable_datasets.cache.inventory import find_caches
    from stable_datasets.cache.limit import evict_over_limit, parse_limit
    from stable_datasets.manage.inventory import annotate, plan_prune
    from stable_datasets.manage.ownership import cache_status

    work = work_dir("bench-inventory-")
    script = work / "small.py"
    script.write_text(textwrap.dedent(BUILDER))
    root = work / "cache"
    total = lay_out(root, script, args.lineages, args.versions)

    def listing():
        return find_caches(root)

    def ls():
        entries = find_caches(root)
        annotate(entries)
        return entries

    def prune():
        entries = ls()
        return plan_prune(entries)

    def per_cache():
        entries = find_caches(root)
        for entry in entries:
            entry.status = cache_status(entry)  # no memo: the builder is asked for every cache
        return entries

    limit = parse_limit("1PB")  # above the root: the publish's check finds nothing to evict
    keep = next(root.rglob("_metadata.json")).parent.parent  # the fingerprint folder of one cache

    def publish_before():  # what the eviction after a publish did before the index: walk and read every cache
        entries = find_caches(root)
        return sum(s.num_bytes for e in entries for s in e.metadata.shards)

    def publish_now():  # the same check through the root's index
        return evict_over_limit(root, limit, keep)

    def ls_now():  # `ls` walks anyway, and rewrites the index from what it found
        entries = ls()
        cache_index.rebuild(root, entries)
        return entries

    entries = ls()
    statuses = {s: sum(e.status == s for e in entries) for s in {e.status for e in entries}}
    plan = prune()
    timings = [("listing (find and read every _metadata.json)", best_of(listing, args.repeats)),
               ("`ls`: listing + status of every cache", best_of(ls, args.repeats)),
               ("`prune --dry-run`: `ls` + plan + in-use probes", best_of(prune, args.repeats)),
               ("`ls` + rewriting the root's index", best_of(ls_now, args.repeats)),
               ("index rebuilt from the caches (first use, or a day old)", best_of(lambda: cache_index.rebuild(root),
                                                                                   args.repeats)),
               ("publish under a limit, before: walk + read every _metadata.json", best_of(publish_before,
                                                                                           args.repeats)),
               ("publish under a limit, now: one read of the root's index", best_of(publish_now, args.repeats))]
    if not args.skip_per_cache:
        timings.append(("before: listing + the builder asked once per cache", best_of(per_cache, 1)))
    print(f"{total:,} caches ({args.lineages:,} lineages x {args.versions} versions + 1); statuses {statuses}; "
          f"prune would remove {len(plan.remove):,}")
    print_table(["measure", "seconds"], [(name, f"{t:.2f}") for name, t in timings], right=(1,))
    if not args.skip_per_cache:
        print(f"ls speedup over asking per cache: {timings[-1][1] / timings[1][1]:.1f}x")
    print(f"publish under a limit: {timings[5][1] / timings[6][1]:.1f}x faster with the index")


if __name__ == "__main__":
    main()
