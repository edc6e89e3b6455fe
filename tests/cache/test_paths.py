"""A cache root that cannot take a cache is one CacheError naming it and what to do (before: a raw
NotADirectoryError, OSError(EROFS) or PermissionError from deep inside the build)."""

from __future__ import annotations

import os
import subprocess

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    return str(path)


@pytest.mark.parametrize("below", [False, True])
def test_a_cache_root_that_is_a_file(tmp_path, table, below):
    blocking = tmp_path / "root"
    blocking.write_text("not a folder")
    root = blocking / "sub" if below else blocking
    with pytest.raises(CacheError, match=rf"^the cache root {root} cannot hold caches: {blocking} is a file, not a "
                                         r"folder; point STABLE_DATASETS_CACHE_DIR \(or cache_dir=\) at a folder$"):
        sds.load_dataset("csv", data_files=table, split="train", cache_dir=str(root))


def test_a_read_only_cache_root(tmp_path, table):
    root = tmp_path / "ro"
    root.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(root)], capture_output=True).returncode:
        pytest.skip("cannot mount a read-only filesystem here (needs root)")
    try:
        with pytest.raises(CacheError, match=rf"^the cache root {root} is on a read-only filesystem \(writing {root}/"
                                             r"\S+\); point STABLE_DATASETS_CACHE_DIR \(or cache_dir=\) at a writable "
                                             r"folder$"):
            sds.load_dataset("csv", data_files=table, split="train", cache_dir=str(root))
    finally:
        subprocess.run(["umount", str(root)], check=True)


@pytest.fixture
def unwritable(tmp_path):
    """A folder this process may not write into: read-only mode, or (for root, whom modes do not stop) immutable."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot make a folder unwritable for root here (chattr)")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_cache_root_this_user_may_not_write(unwritable, table):
    import pwd

    owner = pwd.getpwuid(unwritable.stat().st_uid).pw_name
    with pytest.raises(CacheError, match=rf"^no permission to write {unwritable}/\S+ under the cache root {unwritable} "
                                         rf"\(owned by {owner}\); ask for group write access to the root "
                                         r"\(docs/shared-cache-on-a-cluster.md\) or point STABLE_DATASETS_CACHE_DIR "
                                         r"\(or cache_dir=\) at a folder of yours$"):
        sds.load_dataset("csv", data_files=table, split="train", cache_dir=str(unwritable))
