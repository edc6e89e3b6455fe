"""Compressed inputs are decompressed once per version of the file: never rows of another version."""

from __future__ import annotations

import gzip
import os

import stable_datasets as sds


def test_a_compressed_input_rewritten_with_its_size_and_mtime_restored_is_read_again(tmp_path):
    """sha256 mode sees the new content (a new fingerprint); the rows come from it, not from the copy of the old."""
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n1,x\n2,y\n", mtime=0))
    first = sds.load_dataset("csv", data_files=str(path), split="train", input_identity="sha256")
    assert first[:] == {"a": [1, 2], "b": ["x", "y"]}
    before = os.stat(path)
    path.write_bytes(gzip.compress(b"a,b\n7,x\n8,y\n", mtime=0))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    second = sds.load_dataset("csv", data_files=str(path), split="train", input_identity="sha256")
    assert second.cache_metadata[0].fingerprint != first.cache_metadata[0].fingerprint
    assert second[:] == {"a": [7, 8], "b": ["x", "y"]}
