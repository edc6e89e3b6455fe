"""A build that fills a real filesystem (a small tmpfs) fails the same clear way in every layout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError

BLOBS = """
import numpy as np
import stable_datasets as sds

class Blobs(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"id": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        rng = np.random.default_rng(0)
        for i in range(96):
            yield i, {"id": i, "blob": rng.bytes(64 << 10)}  # 6 MiB of incompressible bytes
"""


def _mount(folder: Path, size: str, *options: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(folder)],
                   check=True, capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs (root only), unmounted afterwards."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    try:
        _mount(folder, "2m")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("mounting a tmpfs needs root")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_a_full_disk_is_a_clear_error_naming_the_staging_folder(tmp_path, small_disk, storage_format):
    script = tmp_path / "blobs.py"
    script.write_text(textwrap.dedent(BLOBS))
    options = {"lance": {"max_rows_per_file": 8}, "arrow": {"max_shard_size": 512 << 10},
               "parquet": {"max_shard_size": 512 << 10}}[storage_format]
    with pytest.raises(CacheError) as caught:
        sds.load_dataset(str(script), split="train", storage_format=storage_format, cache_dir=small_disk,
                         layout_options=options)
    message = str(caught.value)
    staging = next(small_disk.rglob(".staging-train"))
    assert message.startswith(f"no space left on device while building blobs 'train' in {staging}; nothing was "
                              "published"), message
    assert not list(small_disk.rglob("_metadata.json"))
    _mount(small_disk, "64m", "remount")  # space freed: the next run finishes the build
    ds = sds.load_dataset(str(script), split="train", storage_format=storage_format, cache_dir=small_disk,
                          layout_options=options)
    assert ds["id"] == list(range(96)) and len(ds[95]["blob"]) == 64 << 10


LOAD_WITH_FILE_LIMIT = """
import resource, sys
import stable_datasets as sds
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # ulimit -f: no file may pass 1 MiB
try:
    sds.load_dataset(sys.argv[1], split="train", storage_format=sys.argv[2], cache_dir=sys.argv[3])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize("storage_format", ["arrow", "lance"])
def test_a_file_size_limit_is_a_clear_error_and_the_next_run_finishes(tmp_path, storage_format):
    """A file larger than `ulimit -f` (or a filesystem's largest file) allows: EFBIG. Before, Arrow
    gave a bare 'OSError: [Errno 27] Error writing bytes to file'; now the build's own message."""
    script = tmp_path / "blobs.py"
    script.write_text(textwrap.dedent(BLOBS))
    cache = tmp_path / "cache"
    result = subprocess.run([sys.executable, "-c", LOAD_WITH_FILE_LIMIT, str(script), storage_format, str(cache)],
                            capture_output=True, text=True, timeout=120)
    staging = next(cache.rglob(".staging-train"))
    assert result.stdout.startswith(f"CacheError a file grew past the largest size allowed (the process's file "
                                    f"size limit, ulimit -f, or the filesystem's) while building blobs 'train' in "
                                    f"{staging}; nothing was published"), (result.stdout, result.stderr[-2000:])
    assert not list(cache.rglob("_metadata.json"))
    ds = sds.load_dataset(str(script), split="train", storage_format=storage_format, cache_dir=cache)
    assert ds["id"] == list(range(96)) and len(ds[95]["blob"]) == 64 << 10
