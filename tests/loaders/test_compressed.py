"""Compressed inputs are decompressed once per version of the file: never rows of another version."""

from __future__ import annotations

import gzip
import os

import pytest

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


BOMB = """
import resource, signal, sys
import pytest

import stable_datasets as sds
if sys.argv[2] != "-":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
try:
    sds.load_dataset("json", data_files=sys.argv[1], split="train")
finally:  # this process's own peak: ru_maxrss would start at the RSS of the process that forked us (Linux)
    print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024)
"""


def _zstd(data_chunks) -> bytes:
    import pyarrow as pa

    out = pa.BufferOutputStream()
    with pa.CompressedOutputStream(out, "zstd") as stream:
        for chunk in data_chunks:
            stream.write(chunk)
    return out.getvalue().to_pybytes()


def _run_bomb(path, tmp_path, file_size_limit="-"):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", BOMB, str(path), str(file_size_limit)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "c")})
    return run.returncode, run.stderr.strip().splitlines()[-1], int(run.stdout.split()[-1])


def test_a_decompression_bomb_is_refused_within_bounded_memory_and_leaves_nothing(tmp_path):
    """Before: a 33 KB .zst of 1 GiB was expanded whole, kept, read to 6.3 GB of memory, and failed with an empty
    MemoryError. Here 512 MiB of zeros in a few KB."""
    path = tmp_path / "bomb.jsonl.zst"
    path.write_bytes(_zstd(bytes(1 << 20) for _ in range(512)))
    assert path.stat().st_size < 64 << 10
    code, last, peak = _run_bomb(path, tmp_path)
    assert code == 1 and last == (
        f"stable_datasets.loaders.columns.LoaderError: {path}: {path.stat().st_size} bytes of zstd data expand more "
        "than 1000 times (a decompression bomb?; the limit STABLE_DATASETS_MAX_DECOMPRESSION_RATIO); raise it if the "
        "file is meant to expand that much")
    assert peak < 1 << 30
    assert not list((tmp_path / "c").rglob("decompressed/*"))


def test_a_file_size_limit_is_named_as_such_not_as_damaged_input(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress("".join(f'{{"i": {i}, "t": "{os.urandom(20).hex()}"}}\n'
                                           for i in range(40_000)).encode()))
    code, last, _ = _run_bomb(path, tmp_path, file_size_limit=1 << 20)
    assert code == 1 and last.startswith(f"stable_datasets.loaders.compressed.LocalCopyError: {path}: cannot write its "
                                         f"decompressed copy in {tmp_path / 'c'}/downloads/decompressed/"), last
    assert last.endswith("(File too large); free space there or raise the file size limit (ulimit -f), or point "
                         "STABLE_DATASETS_CACHE_DIR at a disk with room"), last
    assert not list((tmp_path / "c").rglob("decompressed/*"))


def test_the_decompressed_size_bound_is_configurable(tmp_path, monkeypatch):
    from stable_datasets.loaders.columns import LoaderError

    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(b"a\n" + b"1\n" * 2000))
    monkeypatch.setenv("STABLE_DATASETS_MAX_DECOMPRESSED_BYTES", "1000")
    with pytest.raises(LoaderError, match=rf"^{path}: decompresses to more than 1000 bytes \(the limit "
                                          r"STABLE_DATASETS_MAX_DECOMPRESSED_BYTES\); raise it if the file is meant to "
                                          r"be that big$"):
        sds.load_dataset("csv", data_files=str(path), split="train")
    monkeypatch.delenv("STABLE_DATASETS_MAX_DECOMPRESSED_BYTES")
    assert len(sds.load_dataset("csv", data_files=str(path), split="train")) == 2000
