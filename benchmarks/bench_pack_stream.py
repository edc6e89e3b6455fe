"""Online packing (`sft.pack_stream`) vs reading an offline packed cache of the same tokenized rows.

    python benchmarks/bench_pack_stream.py                      # 40,000 rows (~20M tokens), 3 rounds
    python benchmarks/bench_pack_stream.py --rows 5000 --rounds 1   # smoke run

Data: `--rows` tokenized rows (`input_ids` int32, `loss_mask` int8) with log-normal lengths (median
~400 tokens, at most 4,096), random ids, an Arrow cache. Packs of 4,096 tokens, first_fit_shuffle.

- planning: `pack_stream(...)` (the pack index from the lengths column, per look-ahead window of
  4,096 rows) vs the offline packer over the whole split (`plan_packs` on the same lengths: what a
  rebuild of the packed cache has to plan before it writes);
- reading, one process, sides in turns, CPU seconds: the online packed stream iterated to the end
  (rows read, packs laid out on the fly; its planning is the row above, made before the clock
  starts), vs the offline packed cache (built once, untimed, with
  `pack_sequences` over the same rows) read by `PackedSFTDataset[i]` in order and by its stream
  (`to_iterable()`, numpy format). Tokens/s counts every `input_ids` token served.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import print_table, quiet

PACK = 4096


def tokenized_table(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(400), 0.8, rows).astype(np.int64), 2, PACK)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ids = rng.integers(3, 32000, int(offsets[-1]), dtype=np.int32)
    mask = (rng.random(int(offsets[-1])) < 0.7).astype(np.int8)
    return pa.table({"input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids)),
                     "loss_mask": pa.ListArray.from_arrays(pa.array(offsets), pa.array(mask))})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    quiet()
    import stable_datasets as sds
    from stable_datasets.sft import PACKED_FEATURES, PackedSFTDataset, pack_sequences, pack_stream
    from stable_datasets.sft.pack import plan_packs

    work = Path(tempfile.mkdtemp(prefix="bench-pack-stream-"))
    try:
        table = tokenized_table(args.rows)
        features = sds.Features({"input_ids": sds.Sequence(sds.Value("int32")),
                                 "loss_mask": sds.Sequence(sds.Value("int8"))})
        rows = sds.StableDataset.from_arrow(table, features=features)
        lengths = pa.compute.list_value_length(table.column("input_ids")).to_numpy()
        tokens_in = int(lengths.sum())
        ids, mask = table.column("input_ids").combine_chunks(), table.column("loss_mask").combine_chunks()
        flat_ids, flat_mask = ids.values.to_numpy(), mask.values.to_numpy()
        offsets = ids.offsets.to_numpy()
        sequences = [(flat_ids[a:b], flat_mask[a:b]) for a, b in itertools.pairwise(offsets)]
        packed = pack_sequences(sequences, PACK, "first_fit_shuffle", seed=0)
        offline = sds.StableDataset.from_dict({k: [r[k] for r in packed.rows] for k in PACKED_FEATURES},
                                              features=PACKED_FEATURES)
        del sequences, packed
        plan: dict[str, list[float]] = {"pack_stream (pack index, look-ahead 4,096 rows)": [],
                                        "offline packer over the whole split (plan_packs)": []}
        served: dict[str, list[tuple[float, int]]] = {"online: pack_stream, iterated": [],
                                                      "offline cache: PackedSFTDataset[i] in order": [],
                                                      "offline cache: to_iterable(), numpy": []}

        def online() -> Any:
            return pack_stream(rows.to_iterable(), pack_size=PACK, algorithm="first_fit_shuffle", seed=0)

        def offline_getitem() -> Any:
            ds = PackedSFTDataset(offline, eos_id=0)
            return (ds[i] for i in range(len(ds)))

        def offline_stream() -> Any:
            return offline.with_format("numpy").to_iterable()

        readers = dict(zip(served, (online, offline_getitem, offline_stream)))  # made untimed (planned apart)
        for _ in range(args.rounds):
            gc.collect()
            start = time.process_time()
            pack_stream(rows.to_iterable(), pack_size=PACK, algorithm="first_fit_shuffle", seed=0)
            plan["pack_stream (pack index, look-ahead 4,096 rows)"].append(time.process_time() - start)
            start = time.process_time()
            plan_packs(lengths, PACK, "first_fit_shuffle", 0)
            plan["offline packer over the whole split (plan_packs)"].append(time.process_time() - start)
            for name, make in readers.items():
                packs = make()
                gc.collect()
                start = time.process_time()
                tokens = sum(len(p["input_ids"]) for p in packs)
                served[name].append((time.process_time() - start, tokens))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.rows:,} tokenized rows, {tokens_in:,} tokens, packs of {PACK}, first_fit_shuffle; "
          f"{args.rounds} rounds in turns, CPU seconds of one process, median (range)\n")
    print_table(["planning", "seconds"], [(name, f"{statistics.median(t):.3f} ({min(t):.3f}-{max(t):.3f})")
                                          for name, t in plan.items()], right=(1,))
    print()
    best_offline = max(statistics.median(t / s for s, t in v) for k, v in served.items() if k.startswith("offline"))
    out = []
    for name, values in served.items():
        rates = [tokens / seconds for seconds, tokens in values]
        ratio = f"{statistics.median(rates) / best_offline:.2f}x" if name.startswith("online") else ""
        out.append((name, f"{statistics.median(rates) / 1e6:.1f} ({min(rates) / 1e6:.1f}-{max(rates) / 1e6:.1f})",
                    f"{values[0][1]:,}", ratio))
    print_table(["reader", "M tokens/s", "tokens served", "online / faster offline"], out, right=(1, 2, 3))


if __name__ == "__main__":
    main()
