"""Lance's Rust read errors (a damaged or vanished data file) come out as our CacheError naming the
cache and the rows, never a bare Rust message."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError


def _data_files(directory: Path) -> list[Path]:
    return sorted((directory / "data.lance" / "data").glob("*.lance"))


@pytest.fixture
def lance_cache(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=40, storage_format="lance",
                          layout_options={"max_rows_per_file": 10})
    assert len(_data_files(ds.cache_dirs[0])) == 4
    return ds


def test_a_data_file_removed_under_an_open_dataset_names_the_cache_and_rows(lance_cache):
    ds = lance_cache
    assert ds[25]["id"] == 25
    for path in _data_files(ds.cache_dirs[0]):
        path.unlink()
    with pytest.raises(CacheError) as caught:
        ds[31]
    message = str(caught.value)
    assert message.startswith(f"{ds.cache_dirs[0].resolve() / 'data.lance'}: the Lance dataset cannot be read, "
                              "reading (row 31): ") or message.startswith(
        f"{ds.cache_dirs[0] / 'data.lance'}: the Lance dataset cannot be read, reading (row 31): "), message
    assert "force_rebuild" in message
    with pytest.raises(CacheError, match=r"the Lance dataset cannot be read, reading \(rows 0\.\.39\)"):
        list(ds)


CORRUPT_AND_READ = """
import sys
from pathlib import Path
import stable_datasets as sds
from stable_datasets.errors import CacheError

directory = Path(sys.argv[1])
for path in sorted((directory / "data.lance" / "data").glob("*.lance")):
    data = bytearray(path.read_bytes())
    data[: len(data) // 2] = bytes(len(data) // 2)  # zero the first half: pages and their headers
    path.write_bytes(bytes(data))
try:
    ds = sds.open_cache(directory)
    rows = [ds[i] for i in range(len(ds))]
except CacheError as exc:
    print("CacheError", exc)
    sys.exit(0)
print("read", len(rows))
sys.exit(3)
"""


def test_zeroed_data_files_are_our_error_not_a_rust_message(lance_cache, tmp_path):
    script = tmp_path / "corrupt_and_read.py"
    script.write_text(textwrap.dedent(CORRUPT_AND_READ))
    directory = lance_cache.cache_dirs[0].resolve()
    done = subprocess.run([sys.executable, str(script), str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])  # not a crash, not a raw error
    assert done.stdout.startswith(f"CacheError {directory / 'data.lance'}: the Lance dataset cannot be read")
