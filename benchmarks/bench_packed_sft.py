"""Packed SFT: our readers vs the Megatron-Bridge reader design and NeMo .npy files.

    python benchmarks/bench_packed_sft.py --packs 100000

Data: `--packs` packs of up to 4096 tokens, filled with sequences whose lengths follow a
log-normal distribution (median ~400 tokens), random token ids, answer-only loss masks.
The same packs are built into our Parquet layout (default row groups), our Arrow layout, a
Parquet file with Megatron-style 1000-row groups, and a NeMo-style pickled .npy file.

The "Megatron-Bridge reader design" below follows its GPTSFTPackedParquetDataset: one cached
row group (the three packed columns), decoded again on a miss, and the requested row converted
with `.as_py()`.

    python benchmarks/bench_packed_sft.py --throughput --packs 100000

measures only the token throughput of one process, pack by pack into a buffer, with the default
`validate=True` and with `validate=False`, from our Arrow and Parquet layouts (sequential order;
rounds in turns, median and range, in CPU seconds of the process), against memcpy of the same bytes.

    python benchmarks/bench_packed_sft.py --sweep --packs 20000

sweeps the row-group size of one Parquet file (ROW_GROUP_SETTINGS): file and footer size,
open time in a fresh process, decode time per random pack, ours vs the Megatron design.

    python benchmarks/bench_packed_sft.py --pages --packs 100000 --page-settings 0,1,2,3,4

page-level reads (issue 13, part 14): per file layout (PAGE_SETTINGS), random single packs,
consecutive samples of a shuffled samples_mapping read one at a time (read ahead), and batches of
256 random packs (`PackedSFTDataset.__getitems__`, what a DataLoader asks for; read through
DataFusion's page-index reader when the file has `pack_id` and large row groups), ours vs the
Megatron design on the same file, sides in turns; file and footer size, open time (constructor
and the last pack) in a fresh process, median of 3.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import gc
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import print_table, quiet, work_dir

PACK = 4096
CHUNK = 2000


def pack_chunk(chunk: int, count: int) -> list[dict[str, np.ndarray]]:
    """Deterministic packs for one chunk (so every copy of the data is identical)."""
    rng = np.random.default_rng([7, chunk])
    packs = []
    for _ in range(count):
        lengths = []
        while True:
            n = int(np.clip(rng.lognormal(6.0, 0.9), 16, PACK))
            if sum(lengths) + n > PACK:
                break
            lengths.append(n)
        lengths = lengths or [PACK]
        ids = rng.integers(0, 32000, sum(lengths), dtype=np.int32)
        mask = np.zeros(sum(lengths), np.int8)
        starts = np.cumsum([0, *lengths[:-1]]).astype(np.int32)
        for start, n in zip(starts, lengths):
            mask[start + n // 3:start + n - 1] = 1  # answer tokens (shifted mask)
        packs.append({"input_ids": ids, "loss_mask": mask, "seq_start_id": starts})
    return packs


def all_chunks(total: int):
    for chunk, lo in enumerate(range(0, total, CHUNK)):
        yield pack_chunk(chunk, min(CHUNK, total - lo))


BUILDER = '''
import sys
sys.path.insert(0, {here!r})
import stable_datasets as sds
from stable_datasets.sft import PACKED_FEATURES
from bench_packed_sft import all_chunks

class Packs(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=PACKED_FEATURES)
    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {{"total": {total}}})]
    def _generate_examples(self, total):
        n = 0
        for chunk in all_chunks(total):
            for pack in chunk:
                yield n, pack
                n += 1
'''


class MegatronStyleReader:
    """Megatron-Bridge's packed Parquet reader design (GPTSFTPackedParquetDataset.__getitem__).

    Written from its behaviour: row -> (file, row group) by bisect; one cached row group, read with
    `read_row_group` on a miss (the three packed columns); the requested row converted with
    `.as_py()`; `seq_start_id + [len(input_ids)]` as the boundaries.
    """

    COLUMNS = ["input_ids", "seq_start_id", "loss_mask"]

    def __init__(self, paths: list[str]):
        self.files = [pq.ParquetFile(p) for p in paths]
        self.groups = [(f, g) for f, file in enumerate(self.files) for g in range(file.metadata.num_row_groups)]
        sizes = [self.files[f].metadata.row_group(g).num_rows for f, g in self.groups]
        self.starts = np.cumsum([0, *sizes]).tolist()
        self.cached_group = -1
        self.table = None

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, idx: int) -> dict:
        group = bisect.bisect_right(self.starts, idx) - 1
        if group != self.cached_group:
            f, g = self.groups[group]
            self.table = self.files[f].read_row_group(g, columns=self.COLUMNS)
            self.cached_group = group
        k = idx - self.starts[group]
        input_ids = self.table.column("input_ids")[k].as_py()
        seq_start_id = self.table.column("seq_start_id")[k].as_py()
        loss_mask = self.table.column("loss_mask")[k].as_py()
        return {"input_ids": input_ids, "seq_boundaries": [*seq_start_id, len(input_ids)], "loss_mask": loss_mask}


def timed(fn, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


# ru_maxrss survives fork+exec on Linux (a child would report its parent's peak); VmHWM does not.
PEAK_RSS = """
def peak_rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""
OPEN_OURS = PEAK_RSS + """
import time
t = time.perf_counter()
from stable_datasets.sft import PackedSFTDataset
imported = time.perf_counter() - t
t = time.perf_counter()
ds = PackedSFTDataset({path!r}, eos_id=0)
ds[len(ds) - 1]
print(imported, time.perf_counter() - t, len(ds), peak_rss_mib())
"""
OPEN_NPY = PEAK_RSS + """
import time
t = time.perf_counter()
import numpy as np
imported = time.perf_counter() - t
t = time.perf_counter()
data = np.load({path!r}, allow_pickle=True)
data[len(data) - 1]["input_ids"]
print(imported, time.perf_counter() - t, len(data), peak_rss_mib())
"""


def fresh(code: str, path: str) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code.format(path=path)], capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.split()]


SWEEP_ROUNDS, SWEEP_CHUNK = 8, 250  # per row-group setting: rounds of random packs per reader, packs per round
ROW_GROUP_SETTINGS = [  # (label, write_packed_parquet keyword arguments)
    ("1 MiB, dictionary on every column (before)", None),
    ("1 MiB", {"row_group_bytes": 1 << 20}),
    ("256 KiB", {"row_group_bytes": 256 << 10}),
    ("128 KiB", {"row_group_bytes": 128 << 10}),
    ("64 KiB", {"row_group_bytes": 64 << 10}),
    ("2 packs", {"row_group_rows": 2}),
    ("1 pack", {"row_group_rows": 1}),
]


def read_each(reader, indices: np.ndarray) -> None:
    for i in indices.tolist():
        reader[i]


def row_group_sweep(packs: int, work: Path, chosen: list[int] | None = None) -> list[tuple[str, ...]]:
    """Row-group size against decode time per random pack, footer size, open time and file size."""
    from stable_datasets.sft import PackedSFTDataset, write_packed_parquet

    results = []
    order = np.random.default_rng(1).permutation(packs)
    settings = [ROW_GROUP_SETTINGS[i] for i in chosen] if chosen else ROW_GROUP_SETTINGS
    for label, kwargs in settings:
        path = work / f"sweep_{len(results)}.idx.parquet"
        if kwargs is None:  # the file as the layout wrote it before: 1 MiB groups, pyarrow's default dictionaries
            writer = None
            for chunk in all_chunks(packs):
                table = pa.table({
                    "input_ids": pa.array([p["input_ids"] for p in chunk], pa.list_(pa.int32())),
                    "loss_mask": pa.array([p["loss_mask"] for p in chunk], pa.list_(pa.int8())),
                    "seq_start_id": pa.array([p["seq_start_id"] for p in chunk], pa.list_(pa.int32()))})
                writer = writer or pq.ParquetWriter(path, table.schema, compression="zstd", compression_level=3)
                writer.write_table(table, row_group_size=max(1, int((1 << 20) // (table.nbytes / len(chunk)))))
            writer.close()
        else:
            write_packed_parquet((p for chunk in all_chunks(packs) for p in chunk), path, **kwargs)
        meta = pq.read_metadata(path)
        ours = PackedSFTDataset(str(path))
        theirs = MegatronStyleReader([str(path)])
        # the same packs through both readers, in turns (ours, theirs, theirs, ours, ...): a change in
        # the machine's load hits both sides alike; per pack, the median over rounds
        chunk = min(SWEEP_CHUNK, packs // (2 * SWEEP_ROUNDS) or 1)
        per_pack: dict[str, list[float]] = {"ours": [], "theirs": []}
        for rep in range(SWEEP_ROUNDS):
            picks = order[rep * chunk:(rep + 1) * chunk]
            for name, reader in ((("ours", ours), ("theirs", theirs)) if rep % 2 == 0
                                 else (("theirs", theirs), ("ours", ours))):
                per_pack[name].append(timed(functools.partial(read_each, reader, picks)) / len(picks))
        t_ours, t_theirs = statistics.median(per_pack["ours"]), statistics.median(per_pack["theirs"])
        _, t_open, _, _ = fresh(OPEN_OURS, str(path))
        results.append((label, f"{meta.num_row_groups:,}", f"{packs / meta.num_row_groups:.1f}",
                        f"{meta.serialized_size / 1e6:.2f}", f"{path.stat().st_size / 1e6:,.1f}",
                        f"{t_open * 1e3:.0f}", f"{t_ours * 1e3:.2f}", f"{1 / t_ours:,.0f}",
                        f"{1 / t_theirs:,.0f}", f"{t_theirs / t_ours:.1f}x"))
        path.unlink()
    return results


SWEEP_HEADER = ["row groups", "groups", "packs/group", "footer MB", "file MB", "open ms", "ms per random pack",
                "ours packs/s", "Megatron design packs/s", "ratio"]


PAGE_SETTINGS = [  # (label, write_packed_parquet keyword arguments)
    ("256 KiB groups, no pack_id (session 5's file)", {"row_group_bytes": 256 << 10, "pack_ids": False}),
    ("256 KiB groups, 8 KiB pages + pack_id (session 5's default)", {"row_group_bytes": 256 << 10}),
    ("1 MiB groups, 8 KiB pages + pack_id", {"row_group_bytes": 1 << 20}),
    ("4 MiB groups, 8 KiB pages + pack_id (new default)", {}),
    ("1000-pack groups, 8 KiB pages + pack_id", {"row_group_bytes": 1 << 40, "row_group_rows": 1000}),
]
#: per round: random single packs, batch size, Megatron-design packs of each batch timed, sequential samples
PAGE_SINGLES, PAGE_BATCH, PAGE_BATCH_THEIRS, PAGE_SEQUENTIAL, PAGE_ROUNDS = 40, 256, 64, 512, 6
OPEN_REPEATS = 3


def page_reads(packs: int, work: Path, chosen: list[int] | None = None) -> list[tuple[str, ...]]:
    """Per file layout, ours vs the Megatron design on the same file, sides in turns: random single packs,
    consecutive samples of a shuffled samples_mapping read one by one (what a sequential sampler or
    micro-batches of one ask), and batches of 256 random packs (`__getitems__`, what a DataLoader with a batch
    size asks); file and footer size; open (constructor + last pack) in a fresh process."""
    from stable_datasets.sft import PackedSFTDataset, write_packed_parquet

    results = []
    rng = np.random.default_rng(2)
    settings = [PAGE_SETTINGS[i] for i in chosen] if chosen else PAGE_SETTINGS
    for n, (label, kwargs) in enumerate(settings):
        path = write_packed_parquet((p for chunk in all_chunks(packs) for p in chunk), work / f"pages_{n}", **kwargs)
        meta = pq.read_metadata(path)
        opens = sorted(fresh(OPEN_OURS, str(path))[1] for _ in range(OPEN_REPEATS))
        ours = PackedSFTDataset(str(path))
        sequential = PackedSFTDataset(str(path), max_num_samples=packs, seed=1)  # its own stride and read-ahead
        mapping = sequential.samples_mapping
        theirs = MegatronStyleReader([str(path)])
        started = time.perf_counter()
        ours.__getitems__(rng.choice(packs, 2, replace=False))  # the once-per-process file check
        first = time.perf_counter() - started
        paged = bool(ours._pages and all(ours._pages._usable.values()))
        times: dict[str, list[float]] = {f"{m} {side}": [] for m in ("single", "sequential", "batch")
                                         for side in ("ours", "theirs")}
        position = 0
        for rep in range(PAGE_ROUNDS):
            singles = rng.choice(packs, PAGE_SINGLES, replace=False)
            batch = rng.choice(packs, PAGE_BATCH, replace=False)
            run = np.arange(position, position + PAGE_SEQUENTIAL)
            position += PAGE_SEQUENTIAL
            sides = [("ours", ours), ("theirs", theirs)]
            for name, reader in sides if rep % 2 == 0 else sides[::-1]:  # sides in turns
                times[f"single {name}"].append(timed(functools.partial(read_each, reader, singles)) / len(singles))
                if name == "ours":
                    times["batch ours"].append(timed(functools.partial(ours.__getitems__, batch.tolist())) / len(batch))
                    times["sequential ours"].append(timed(functools.partial(read_each, sequential, run)) / len(run))
                else:
                    few = batch[:PAGE_BATCH_THEIRS]
                    times["batch theirs"].append(timed(functools.partial(read_each, theirs, few)) / len(few))
                    few = mapping[run[:PAGE_BATCH_THEIRS]]
                    times["sequential theirs"].append(timed(functools.partial(read_each, theirs, few)) / len(few))
        med = {k: statistics.median(v) for k, v in times.items()}
        spread = {k: f"{min(v) / statistics.median(v):.1f}-{max(v) / statistics.median(v):.1f}"
                  for k, v in times.items()}

        results.append((label, f"{meta.num_row_groups:,}", f"{packs / meta.num_row_groups:.0f}",
                        f"{meta.serialized_size / 1e6:.2f}", f"{path.stat().st_size / 1e6:,.1f}",
                        f"{opens[len(opens) // 2] * 1e3:.0f} ({opens[0] * 1e3:.0f}-{opens[-1] * 1e3:.0f})",
                        *_pair(med, "single"), *_pair(med, "sequential"), *_pair(med, "batch"),
                        "pages" if paged else "row groups", f"{first * 1e3:.0f}",
                        f"{spread['batch ours']} / {spread['batch theirs']}"))
        path.unlink()
    return results


def _pair(med: dict[str, float], measure: str) -> tuple[str, str]:
    """("ours / theirs" per second, ratio) from median seconds per pack."""
    ours_t, theirs_t = med[f"{measure} ours"], med[f"{measure} theirs"]
    return f"{1 / ours_t:,.0f} / {1 / theirs_t:,.0f}", f"{theirs_t / ours_t:.1f}x"


PAGE_HEADER = ["file", "groups", "packs/group", "footer MB", "file MB", "open ms (range)",
               "random single packs/s ours / Megatron", "single ratio",
               "sequential samples/s ours / Megatron", "sequential ratio",
               "batch-256 packs/s ours / Megatron", "batch ratio", "our batch path",
               "first batch ms (file check)", "batch range/median ours / Megatron"]


def throughput(packs: int, rounds: int) -> None:
    """Token GB/s of `PackedSFTDataset[i]` in stored order, validation on and off, sides in turns."""
    import statistics

    import stable_datasets as sds
    from stable_datasets.sft import PackedSFTDataset

    work = work_dir("bench-sft-tp-")
    try:
        script = work / "packs.py"
        script.write_text(BUILDER.format(here=str(Path(__file__).resolve().parent), total=packs))
        caches = {fmt: sds.load_dataset(str(script), split="train", storage_format=fmt, cache_dir=work / fmt)
                  for fmt in ("arrow", "parquet")}
        arrow_rows = caches["arrow"].with_format("arrow")._all_rows_table()
        column = arrow_rows.column("input_ids")
        flat = np.concatenate([c.flatten().to_numpy() for c in column.chunks])
        offsets = np.concatenate([[0], np.cumsum(pa.compute.list_value_length(column).to_numpy())])
        gbytes = len(flat) * flat.itemsize / 1e9
        buffer = np.empty(PACK, flat.dtype)

        def stream(fmt: str, validate: bool):
            def run():
                ds = PackedSFTDataset(caches[fmt].cache_dirs[0], eos_id=0, validate=validate)  # checks start cold
                for i in range(len(ds)):
                    ids = ds[i]["input_ids"]
                    buffer[:len(ids)] = ids
            return run

        def memcpy():
            for a, b in itertools.pairwise(offsets):
                buffer[:b - a] = flat[a:b]

        sides = {f"{fmt}, validate={v}": stream(fmt, v) for fmt in ("arrow", "parquet") for v in (True, False)}
        sides["memcpy of the same bytes, pack by pack"] = memcpy
        seconds: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(rounds):
            for name, fn in sides.items():
                gc.collect()
                started = time.process_time()  # CPU time of this one-thread reader: steadier on a shared machine
                fn()
                seconds[name].append(time.process_time() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{packs:,} packs, {gbytes:.2f} GB of input_ids; {rounds} rounds in turns, median (range); "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}\n")
    rows = []
    for name, times in seconds.items():
        rates = [gbytes / t for t in times]
        rows.append((name, f"{statistics.median(rates):.2f} ({min(rates):.2f}-{max(rates):.2f})",
                     f"{packs / statistics.median(times):,.0f}"))
    print_table(["reader", "GB/s", "packs/s"], rows, right=(1, 2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--packs", type=int, default=100_000)
    parser.add_argument("--lengths", type=int, default=1_000_000)
    parser.add_argument("--sweep", action="store_true", help="only the row-group size sweep, on --packs packs")
    parser.add_argument("--sweep-settings", default="", help="comma-separated indices into ROW_GROUP_SETTINGS")
    parser.add_argument("--throughput", action="store_true", help="only token throughput, validation on and off")
    parser.add_argument("--pages", action="store_true", help="only page-level reads vs row groups, on --packs packs")
    parser.add_argument("--page-settings", default="", help="comma-separated indices into PAGE_SETTINGS")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    quiet()
    if args.throughput:
        throughput(args.packs, args.rounds)
        return
    if args.pages:
        load_before = os.getloadavg()
        work = work_dir("bench-sft-pages-")
        try:
            rows = page_reads(args.packs, work, [int(i) for i in args.page_settings.split(",") if i.strip()])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"\n{args.packs:,} packs of up to {PACK} tokens, one Parquet file per layout; random packs, single and "
              f"in batches of {PAGE_BATCH}, and runs of {PAGE_SEQUENTIAL} consecutive samples, {PAGE_ROUNDS} rounds in "
              f"turns (medians); {os.cpu_count()} cores; load average (1, 5, 15 min) {load_before} before, "
              f"{os.getloadavg()} after\n")
        print_table(PAGE_HEADER, rows)
        return
    if args.sweep:
        work = work_dir("bench-sft-sweep-")
        try:
            chosen = [int(i) for i in args.sweep_settings.split(",") if i.strip()]
            rows = row_group_sweep(args.packs, work, chosen)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"\n{args.packs:,} packs of up to {PACK} tokens, one Parquet file per row-group size; random reads "
              f"in a shuffled order; {os.cpu_count()} cores\n")
        print_table(SWEEP_HEADER, rows)
        return
    import stable_datasets as sds
    from stable_datasets.sft import ALGORITHMS, PackedSFTDataset, pack_indices, packing_metadata

    work = work_dir("bench-sft-")
    results: list[tuple[str, str, str]] = []
    try:
        script = work / "packs.py"
        script.write_text(BUILDER.format(here=str(Path(__file__).resolve().parent), total=args.packs))
        started = time.perf_counter()
        parquet_ds = sds.load_dataset(str(script), split="train", storage_format="parquet", cache_dir=work / "c")
        build_parquet = time.perf_counter() - started
        arrow_ds = sds.load_dataset(str(script), split="train", cache_dir=work / "c")
        megatron_file = work / "megatron_style.parquet"
        npy_file = work / "nemo_packed.npy"
        writer = None
        objects = []
        for chunk in all_chunks(args.packs):
            table = pa.table({
                "input_ids": pa.array([p["input_ids"] for p in chunk], pa.list_(pa.int32())),
                "loss_mask": pa.array([p["loss_mask"] for p in chunk], pa.list_(pa.int8())),
                "seq_start_id": pa.array([p["seq_start_id"] for p in chunk], pa.list_(pa.int32()))})
            writer = writer or pq.ParquetWriter(megatron_file, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=1000)
            objects.extend(chunk)
        writer.close()
        np.save(npy_file, np.array(objects, dtype=object), allow_pickle=True)
        total_tokens = sum(len(p["input_ids"]) for p in objects)
        del objects
        gc.collect()

        # 1. random access with a shuffled samples_mapping
        ours = PackedSFTDataset(parquet_ds.cache_dirs[0], max_num_samples=args.packs, seed=1, eos_id=0)
        order = ours.samples_mapping
        ours_n, theirs_n = min(5000, args.packs), min(300, args.packs)
        t_ours = timed(lambda: [ours[i] for i in range(ours_n)])
        theirs_same = MegatronStyleReader([str(p) for p in sorted(parquet_ds.cache_dirs[0].glob("*.idx.parquet"))])
        t_theirs = timed(lambda: [theirs_same[int(order[i])] for i in range(theirs_n)])
        results.append(("random packs/s, shuffled samples_mapping, our Parquet layout (default row groups)",
                        f"{ours_n / t_ours:,.0f} vs {theirs_n / t_theirs:,.0f} (Megatron design, same file)",
                        f"{(ours_n / t_ours) / (theirs_n / t_theirs):.0f}x"))
        ours_meg = PackedSFTDataset(str(megatron_file), max_num_samples=args.packs, seed=1, eos_id=0)
        theirs_meg = MegatronStyleReader([str(megatron_file)])
        few = min(60, args.packs)
        t_ours_m = timed(lambda: [ours_meg[i] for i in range(theirs_n)])
        t_theirs_m = timed(lambda: [theirs_meg[int(order[i])] for i in range(few)])
        results.append(("the same on a file with Megatron-style 1000-row groups",
                        f"{theirs_n / t_ours_m:,.0f} vs {few / t_theirs_m:,.1f}",
                        f"{(theirs_n / t_ours_m) / (few / t_theirs_m):.0f}x"))
        from stable_datasets.sft import PackedSampler, row_group_starts

        local_order = list(PackedSampler(len(ours.samples_mapping), seed=1,
                                         locality_starts=row_group_starts(ours), window_row_groups=8))
        plain = PackedSFTDataset(parquet_ds.cache_dirs[0], eos_id=0)
        t_local = timed(lambda: [plain[i] for i in local_order[:ours_n]])
        results.append(("our Parquet layout read in PackedSampler's locality-aware order (windows of 8 row groups)",
                        f"{ours_n / t_local:,.0f} vs {theirs_n / t_theirs:,.0f} (Megatron design, same file)",
                        f"{(ours_n / t_local) / (theirs_n / t_theirs):.0f}x"))
        arrow_random = PackedSFTDataset(arrow_ds.cache_dirs[0], max_num_samples=args.packs, seed=1, eos_id=0)
        t_arrow = timed(lambda: [arrow_random[i] for i in range(ours_n)])
        results.append(("random packs/s from our Arrow layout, shuffled samples_mapping",
                        f"{ours_n / t_arrow:,.0f} vs {theirs_n / t_theirs:,.0f} (Megatron design on Parquet)",
                        f"{(ours_n / t_arrow) / (theirs_n / t_theirs):.0f}x"))
        results.append(("our Parquet reader vs the Megatron design on its own 1000-row-group file",
                        f"{ours_n / t_ours:,.0f} vs {few / t_theirs_m:,.1f}",
                        f"{(ours_n / t_ours) / (few / t_theirs_m):.0f}x"))

        # 2. token throughput from the Arrow layout, against memcpy of the same bytes
        arrow_packs = PackedSFTDataset(arrow_ds.cache_dirs[0], eos_id=0)
        buffer = np.empty(PACK, np.int32)

        def stream():
            for i in range(len(arrow_packs)):
                ids = arrow_packs[i]["input_ids"]
                buffer[:len(ids)] = ids

        column = arrow_ds.with_format("arrow")._all_rows_table().column("input_ids")
        flat = np.concatenate([c.flatten().to_numpy() for c in column.chunks])
        offsets = np.concatenate([[0], np.cumsum(pa.compute.list_value_length(column).to_numpy())])

        def memcpy():
            for a, b in itertools.pairwise(offsets):
                buffer[:b - a] = flat[a:b]

        t_stream, t_copy = timed(stream, 2), timed(memcpy, 2)
        gbytes = total_tokens * 4 / 1e9
        results.append(("token throughput, Arrow layout, one process (pack by pack into a buffer)",
                        f"{gbytes / t_stream:.2f} GB/s ({len(arrow_packs) / t_stream:,.0f} packs/s) vs memcpy "
                        f"{gbytes / t_copy:.2f} GB/s", f"{t_copy / t_stream:.2f} of memcpy"))

        # 3. opening in a fresh process
        _, t_open_arrow, n_arrow, rss_arrow = fresh(OPEN_OURS, str(arrow_ds.cache_dirs[0]))
        _, t_open_parquet, _, rss_parquet = fresh(OPEN_OURS, str(parquet_ds.cache_dirs[0]))
        _, t_open_npy, n_npy, rss_npy = fresh(OPEN_NPY, str(npy_file))
        assert n_arrow == n_npy == args.packs
        results.append(("open 100k packs in a fresh process: Arrow cache / Parquet cache / NeMo .npy",
                        f"{t_open_arrow * 1e3:.0f} ms ({rss_arrow:.0f} MiB) / {t_open_parquet * 1e3:.0f} ms "
                        f"({rss_parquet:.0f} MiB) / {t_open_npy * 1e3:.0f} ms ({rss_npy:.0f} MiB)",
                        f"{t_open_npy / t_open_arrow:.0f}x faster than .npy"))

        # 4. packing 1M sequence lengths
        lengths = np.clip(np.random.default_rng(0).lognormal(6.0, 0.9, args.lengths).astype(np.int64), 16, PACK)
        for algorithm in ALGORITHMS:
            started = time.perf_counter()
            bins = pack_indices(lengths, PACK, algorithm, seed=0)
            elapsed = time.perf_counter() - started
            meta = packing_metadata(lengths, [[int(lengths[i]) for i in b] for b in bins], PACK)
            results.append((f"pack {args.lengths:,} lengths: {algorithm}",
                            f"{elapsed:.2f} s, {len(bins):,} packs", f"{meta['packing_efficiency']}% efficient"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.packs:,} packs of up to {PACK} tokens ({total_tokens / args.packs:,.0f} on average); "
          f"Parquet build {build_parquet:.1f} s; {os.cpu_count()} cores\n")
    print_table(["measure", "result", "ratio"], results)


if __name__ == "__main__":
    main()
