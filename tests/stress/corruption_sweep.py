"""Corrupt every file of a cache, one at a time, and check that `verify` reports each one.

    python tests/stress/corruption_sweep.py

Two corruptions per file: one byte flipped in the middle, and the file truncated to half.
The file is restored after each, so every corruption is judged alone. Runs on a cache of
each layout (Arrow, Lance rows, Lance video frames); the suite runs it too
(tests/behaviour/test_crash_safety.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))


def sweep(directory: Path) -> tuple[int, int, list[str]]:
    """(detected, injected, misses) for every shard and media file of one cache."""
    from stable_datasets.cache.metadata import CacheMetadata
    from stable_datasets.layouts.open import verify_cache

    metadata = CacheMetadata.read(directory)
    files = [directory / s.path for s in [*metadata.shards, *metadata.extra_files]]
    detected = injected = 0
    misses = []
    assert verify_cache(directory) == [], "the cache must be clean before the sweep"
    for path in files:
        original = path.read_bytes()
        flipped = bytearray(original)
        flipped[len(flipped) // 2] ^= 0x5A
        for label, corrupt in (("flip", bytes(flipped)), ("truncate", original[: len(original) // 2])):
            if corrupt == original:
                continue
            path.write_bytes(corrupt)
            injected += 1
            problems = verify_cache(directory)
            if any(str(path.resolve()) in str(Path(p.split(":")[0]).resolve()) for p in problems):
                detected += 1
            else:
                misses.append(f"{label} {path}: {problems}")
            path.write_bytes(original)
    assert verify_cache(directory) == []
    return detected, injected, misses


def build_caches(root: Path) -> dict[str, Path]:
    import stable_datasets as sds

    small = {"train_videos": 3, "test_videos": 1}
    return {
        "arrow_shards": sds.load_dataset("digits", split="test", cache_dir=root,
                                         layout_options={"max_shard_size": 16 << 10}).cache_dirs[0],
        "lance_rows": sds.load_dataset("digits", split="test", storage_format="lance", cache_dir=root,
                                       layout_options={"max_rows_per_file": 100}).cache_dirs[0],
        "parquet_shards": sds.load_dataset("digits", split="test", storage_format="parquet", cache_dir=root,
                                           layout_options={"max_shard_size": 16 << 10}).cache_dirs[0],
        "lance_video_frames": sds.load_dataset("moving_digits", name="frames", split="train", cache_dir=root,
                                               **small).cache_dirs[0],
        "arrow_shards + path videos": sds.load_dataset("moving_digits", name="path", split="train", cache_dir=root,
                                                       **small).cache_dirs[0],
    }


def main() -> None:
    os.environ.setdefault("STABLE_DATASETS_DISABLE_PROGRESS", "1")
    from loguru import logger

    logger.disable("stable_datasets")
    root = Path(tempfile.mkdtemp(prefix="corrupt-"))
    results = {name: sweep(path) for name, path in build_caches(root).items()}
    print("| layout | corruptions detected / injected |")
    print("| --- | ---: |")
    for name, (detected, injected, _) in results.items():
        print(f"| {name} | {detected} / {injected} |")
    misses = {k: v[2] for k, v in results.items() if v[2]}
    if misses:
        print(json.dumps(misses, indent=2))
        sys.exit(1)


if __name__ == "__main__":
    main()
