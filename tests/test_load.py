"""The front door: every keyword of `load_dataset` reaches the build, with `streaming=False` and `True` alike."""

from __future__ import annotations

import gc

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from tests.conftest import TOY_BUILDER


def test_cache_limit_is_honoured_with_streaming(write_builder):
    """It was dropped on the way to the build with streaming=True: nothing was evicted."""
    script = write_builder("toy", TOY_BUILDER)
    first = sds.load_dataset(str(script), split="train", rows=20)
    folder = published_path(first.cache_dirs[0])
    size = sum(s.num_bytes for s in first.cache_metadata[0].shards)
    del first
    gc.collect()
    stream = sds.load_dataset(str(script), split="train", rows=21, cache_limit=size + 10, streaming=True)
    assert not folder.exists()  # no room for both: the least recently used went
    assert [row["id"] for row in stream][:3] == [0, 1, 2] and len(stream) == 21
