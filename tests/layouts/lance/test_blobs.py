"""Binary columns of Lance caches stored with the blob encoding and read as slices of the mapped
data files (layouts/lance/blobs.py): the same rows as Lance's own reads, old caches on the take
path, damaged descriptions and data files as our CacheError, forked DataLoader workers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError
from stable_datasets.layouts.lance import blobs as lance_blobs

FIXTURE_V1 = Path(__file__).parents[2] / "fixtures" / "lance_rows_v1"  # written by the writer before blob columns

BLOBS_BUILDER = """
import stable_datasets as sds

class Blobs(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "i": sds.Value("int64"), "text": sds.Value("string"), "blob": sds.Value("binary"),
            "img": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"rows": ROWS})]

    def _generate_examples(self, rows):
        for i in range(rows):
            yield i, {"i": i, "text": f"t{i}", "blob": bytes([i % 256]) * (i % 7 * 100),
                      "img": None if i % 5 == 0 else bytes([i % 256]) * (i % 3)}
"""


def expected(i: int) -> dict:
    return {"i": i, "text": f"t{i}", "blob": bytes([i % 256]) * (i % 7 * 100),
            "img": None if i % 5 == 0 else bytes([i % 256]) * (i % 3)}


def _data_files(directory: Path) -> list[Path]:
    return sorted((directory / "data.lance" / "data").glob("*.lance"))


@pytest.fixture
def blobs_builder(write_builder) -> Path:
    return write_builder("blobs", BLOBS_BUILDER.replace("ROWS", "300"))


@pytest.fixture
def blob_cache(blobs_builder):
    ds = sds.load_dataset(str(blobs_builder), split="train", storage_format="lance",
                          layout_options={"max_rows_per_file": 128})
    assert len(_data_files(ds.cache_dirs[0])) == 3
    return ds


def test_binary_columns_are_blobs_served_from_the_mapped_files(blob_cache):
    ds = blob_cache
    metadata = json.loads((ds.cache_dirs[0] / "_metadata.json").read_text())
    assert metadata["extra"]["lance_rows_version"] == 2 and metadata["extra"]["blob_columns"] == ["blob", "img"]
    backend = ds.backends[0]
    backend.ensure_open()
    assert backend._blobs is not None and backend._held.column_names == ["i", "text"]
    assert [ds[i] for i in range(300)] == [expected(i) for i in range(300)]
    order = np.random.default_rng(0).permutation(300)
    assert ds.__getitems__(order[:200]) == [expected(int(i)) for i in order[:200]]
    assert ds.__getitems__([299, 0, 299, 128, 127]) == [expected(i) for i in (299, 0, 299, 128, 127)]
    assert list(ds) == [expected(i) for i in range(300)]
    assert ds["img"] == [expected(i)["img"] for i in range(300)]
    table = ds.with_format("arrow")[10:20]
    assert table.schema.field("blob").type == pa.binary() and table.column("i").to_pylist() == list(range(10, 20))


def test_lance_itself_reads_descriptions_and_take_blobs_gives_the_same_bytes(blob_cache):
    import lance

    dataset = lance.dataset(str(blob_cache.cache_dirs[0] / "data.lance"))
    assert dataset.schema.field("blob").metadata == {b"lance-encoding:blob": b"true"}
    descriptions = dataset.take([3], columns=["blob"]).column("blob")
    assert descriptions.type.names == ["position", "size"] and descriptions[0]["size"].as_py() == 300
    rows = [5, 130, 299]
    assert [f.readall() for f in dataset.take_blobs("blob", indices=rows)] == [expected(i)["blob"] for i in rows]


def test_positions_refer_to_each_fragments_own_file_also_after_an_append(tmp_path):
    import lance

    schema = lance_blobs.stored_schema(pa.schema([pa.field("b", pa.binary()), pa.field("n", pa.int64())]), ["b"])
    rng = np.random.default_rng(1)
    values = [rng.bytes(int(rng.integers(0, 300))) if i % 9 else None for i in range(350)]

    def table(lo: int, hi: int) -> pa.Table:
        return pa.table({"b": pa.array(values[lo:hi], pa.large_binary()), "n": list(range(lo, hi))}, schema=schema)

    uri = tmp_path / "appended.lance"
    lance.write_dataset(table(0, 300), uri, schema=schema, max_rows_per_file=200, max_rows_per_group=64,
                        data_storage_version=lance_blobs.FILE_VERSION)
    lance.write_dataset(table(300, 350), uri, schema=schema, mode="append",
                        data_storage_version=lance_blobs.FILE_VERSION)
    dataset = lance.dataset(str(uri))
    layout, descriptions = lance_blobs.blob_descriptions(dataset, ["b"])
    assert [rows for _, rows in layout] == [200, 100, 50] and len({name for name, _ in layout}) == 3
    digests = lance_blobs.dataset_digests(dataset, ["b"])
    reader = lance_blobs.BlobReader(uri, ["b"], layout, descriptions, {}, digests)
    order = rng.permutation(350)
    assert reader.take("b", order).to_pylist() == [values[i] for i in order]
    cell = reader.cell_getter("b")
    assert [cell(i) for i in range(350)] == values
    second = layout[1][0]
    with pytest.raises(CacheError, match=rf"{second}: the blob descriptions of rows 200\.\.299 do not match the "
                                         "digest _metadata.json records"):
        lance_blobs.BlobReader(uri, ["b"], layout, descriptions, {}, {**digests, second: "0" * 32})


def test_a_cache_written_before_blob_columns_keeps_the_take_path(tmp_path):
    directory = tmp_path / "v1"
    shutil.copytree(FIXTURE_V1, directory)
    ds = sds.open_cache(directory)
    assert "lance_rows_version" not in json.loads((directory / "_metadata.json").read_text())["extra"]
    backend = ds.backends[0]
    assert [ds[i] for i in range(40)] == [expected(i) for i in range(40)]
    assert backend._blobs is None and backend.blob_columns == []
    assert ds.__getitems__([39, 2, 17]) == [expected(i) for i in (39, 2, 17)]
    assert list(ds) == [expected(i) for i in range(40)]


def _descriptions(positions: list, sizes: list, valid: list | None = None) -> pa.Array:
    mask = None if valid is None else pa.array([not v for v in valid])
    return pa.StructArray.from_arrays([pa.array(positions, pa.uint64()), pa.array(sizes, pa.uint64())],
                                      names=["position", "size"], mask=mask)


@pytest.mark.parametrize(("positions", "sizes", "row", "problem"), [
    ([0, 64, 4000], [10, 10, 200], 12, "points outside the file"),  # past the end of a 4,096-byte file
    ([0, 64, 2 ** 63 + 5], [10, 10, 1], 12, "points outside the file"),  # a flipped top bit
    ([0, 64, 32], [10, 10, 40], 12, "overlaps the bytes of an earlier row"),
    ([0, 1, 128], [64, 1, 1], 11, "overlaps the bytes of an earlier row"),
    ([0, 64, 128], [10, 2 ** 40, 1], 11, "points outside the file"),
])
def test_a_damaged_description_is_our_error_naming_file_and_row(positions, sizes, row, problem):
    with pytest.raises(CacheError) as caught:
        lance_blobs._checked_bounds(_descriptions(positions, sizes), 4096, "f.lance (column b)", 10)
    message = str(caught.value)
    assert message.startswith(f"f.lance (column b): the blob description of row {row} ") and problem in message


def test_descriptions_of_nulls_and_empty_values_read_back_as_such():
    bounds, valid = lance_blobs._checked_bounds(_descriptions([0, 0, 64, 0], [10, 0, 5, 0],
                                                              [True, True, True, False]), 100, "f", 0)
    assert valid.tolist() == [True, True, True, False]
    assert bounds.tolist() == [0, 10, 10, 10, 64, 69, 69, 69, 69]
    blobs = lance_blobs._FragmentBlobs(pa.py_buffer(bytes(range(100))), bounds, valid)
    assert blobs.take(np.array([3, 2, 1, 0])).to_pylist() == [None, bytes(range(64, 69)), b"", bytes(range(10))]
    assert [blobs.cell(k) for k in range(4)] == [bytes(range(10)), b"", bytes(range(64, 69)), None]


def test_a_truncated_or_replaced_data_file_is_our_error_naming_it(blob_cache):
    directory = blob_cache.cache_dirs[0]
    victim = _data_files(directory)[1]
    size = victim.stat().st_size
    with open(victim, "r+b") as fh:
        fh.truncate(size - 100)
    with pytest.raises(CacheError, match=rf"{victim.name}: (shard is )?{size - 100} bytes,? but _metadata.json records "
                                         rf"{size}"):
        sds.open_cache(directory)[0]
    with pytest.raises(CacheError, match=r"data\.lance.*(cannot be read|bytes, but _metadata\.json records)"):
        blob_cache[0]  # opened before the damage, mapped at its first read


READ_DAMAGED = """
import sys
from pathlib import Path
import stable_datasets as sds
from stable_datasets.errors import CacheError

directory, path = sys.argv[1], Path(sys.argv[2])
original = path.read_bytes()
for offset in range(max(0, len(original) - 4096), len(original), 61):
    print("flip", offset, flush=True)  # the last line names the offset if this process dies
    damaged = bytearray(original)
    damaged[offset] ^= 0xFF
    path.write_bytes(bytes(damaged))
    try:
        ds = sds.open_cache(directory)
        rows = [ds[i] for i in range(len(ds))] + ds.__getitems__(list(range(len(ds)))[::-1])
        lengths = sorted(len(r["blob"]) for r in rows[:len(ds)])
        print("read", len(rows), lengths == sorted(i % 7 * 100 for i in range(len(ds))))
    except CacheError as exc:
        print("CacheError", exc)
    finally:
        path.write_bytes(original)
"""


def test_flipped_bytes_in_a_data_file_never_crash_and_keep_lengths(blob_cache, tmp_path):
    """Bytes in the last 4 KiB of a data file (descriptions, page tables, footer), flipped one at a time
    in a subprocess: our CacheError or rows of the right lengths, never a crash."""
    script = tmp_path / "read_damaged.py"
    script.write_text(textwrap.dedent(READ_DAMAGED))
    directory = blob_cache.cache_dirs[0].resolve()
    victim = _data_files(directory)[0]
    done = subprocess.run([sys.executable, str(script), str(directory), str(victim)], capture_output=True,
                          text=True, timeout=600)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, (lines[-1:], done.returncode, done.stderr[-2000:])
    outcomes = [line.split()[0] if line.startswith("CacheError") else line for line in lines
                if not line.startswith("flip")]
    assert len(outcomes) == len(range(max(0, victim.stat().st_size - 4096), victim.stat().st_size, 61))
    assert set(outcomes) <= {"CacheError", "read 600 True"}, [o for o in outcomes if o != "CacheError"]
    assert "CacheError" in outcomes


def test_forked_dataloader_workers_read_blobs_without_lance(blob_cache):
    torch = pytest.importorskip("torch")
    ds = blob_cache
    assert ds[1] == expected(1)  # the parent used Lance: forked workers could not use its runtime

    class Probe(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(ds)

        def __getitems__(self, keys):
            rows = ds.__getitems__(keys)
            return rows, ds.backends[0]._dataset is None  # no Lance handle was (re)opened in the worker

    loader = torch.utils.data.DataLoader(Probe(), batch_size=32, num_workers=2, shuffle=True,
                                         collate_fn=lambda batch: batch,
                                         generator=torch.Generator().manual_seed(0),
                                         multiprocessing_context="fork")
    seen = []
    for rows, lance_free in loader:
        assert lance_free
        seen.extend(rows)
    assert sorted(seen, key=lambda r: r["i"]) == [expected(i) for i in range(300)]


def test_a_remote_cache_reads_blob_bytes_through_lance(s3_env, blobs_builder):
    """On an object store nothing can be mapped: Lance reads the blob bytes (take_blobs, scans)."""
    ds = sds.load_dataset(str(blobs_builder), split="train", storage_format="lance",
                          layout_options={"max_rows_per_file": 128})
    backend = ds.backends[0]
    assert backend.lance_base is not None and not (backend.directory / "data.lance").exists()
    assert ds[131] == expected(131) and backend._blobs is None
    assert ds.__getitems__([299, 5, 130, 0]) == [expected(i) for i in (299, 5, 130, 0)]
    assert list(ds) == [expected(i) for i in range(300)]


MANY_FRAGMENTS = """
import stable_datasets as sds

class Many(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"i": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"rows": 1200})]

    def _generate_examples(self, rows):
        for i in range(rows):
            yield i, {"i": i, "blob": bytes([i % 256]) * (i % 7 * 10)}
"""


def _mapped_data_files(folder: Path) -> int:
    """Files under `folder` this process maps now (from /proc/self/maps)."""
    with open("/proc/self/maps") as fh:
        return len({line.split()[-1] for line in fh if str(folder) in line})


def test_a_cache_of_many_fragments_maps_its_data_files_lazily_and_at_most_the_setting(write_builder, monkeypatch):
    """Blob data files were all mapped at open: 65,000 fragments ran out of vm.max_map_count (the clear
    ResourceLimitError, not a lazy open). Now a file is mapped when a read needs it, at most
    STABLE_DATASETS_MAX_OPEN_SHARDS at once (the pool Arrow shards use), least recently used closed."""
    builder = write_builder("many", MANY_FRAGMENTS)
    built = sds.load_dataset(str(builder), split="train", storage_format="lance",
                             layout_options={"max_rows_per_file": 1})  # 1,200 fragments, one data file each
    directory = built.cache_dirs[0]
    data = directory / "data.lance" / "data"
    assert len(list(data.glob("*.lance"))) == 1200
    del built
    monkeypatch.setenv("STABLE_DATASETS_MAX_OPEN_SHARDS", "16")
    ds = sds.open_cache(directory)
    assert ds[0] == {"i": 0, "blob": b""}
    blobs = ds.backends[0]._blobs
    assert blobs.open_files() == (16, 16)  # the first ones, mapped (and checked) at open
    assert _mapped_data_files(data) <= 16
    rows = np.random.default_rng(5).permutation(1200)[:400]
    assert ds.__getitems__(rows.tolist()) == [{"i": i, "blob": bytes([i % 256]) * (i % 7 * 10)} for i in rows]
    assert blobs.open_files()[0] == 16 and blobs.open_files()[1] > 300  # one map per fragment touched
    assert [ds[int(i)]["blob"] for i in rows[:50]] == [bytes([i % 256]) * (i % 7 * 10) for i in rows[:50]]
    assert ds.with_format("arrow")[rows.tolist()].column("blob").to_pylist() == \
        [bytes([i % 256]) * (i % 7 * 10) for i in rows]
    assert [r["i"] for r in ds] == list(range(1200))  # every fragment in turn
    assert blobs.open_files()[0] == 16 and _mapped_data_files(data) <= 16
    victim = Path(blobs._paths[1100])  # closed by now: mapped again at its next read, and checked then
    size = victim.stat().st_size
    with open(victim, "r+b") as fh:
        fh.truncate(size - 10)
    for _ in range(2):
        with pytest.raises(CacheError, match=rf"{victim}: {size - 10} bytes, but _metadata.json records {size}"):
            ds[1100]
    assert ds[1099] == {"i": 1099, "blob": bytes([1099 % 256]) * (1099 % 7 * 10)}
