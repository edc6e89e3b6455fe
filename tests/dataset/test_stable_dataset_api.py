from __future__ import annotations

import multiprocessing
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets import StableDataset
from stable_datasets.errors import StableDatasetsError

LAYOUTS = {
    # small shards/fragments and batches so reads cross record-batch and file boundaries
    "arrow": {"batch_rows": 16, "max_shard_size": 4096},
    "lance": {"batch_rows": 16, "max_rows_per_file": 64, "max_rows_per_group": 16},
    "parquet": {"batch_rows": 16, "max_shard_size": 4096, "row_group_bytes": 1024},
}


@pytest.fixture(params=sorted(LAYOUTS))
def storage_format(request) -> str:
    return request.param


@pytest.fixture
def toy(toy_builder, storage_format):
    return sds.load_dataset(str(toy_builder), split="train", rows=200, storage_format=storage_format,
                            layout_options=LAYOUTS[storage_format])


def test_cross_boundaries_fixture_has_many_shards(toy):
    assert len(toy.cache_files) > 2


def test_row_access(toy):
    row = toy[7]
    assert row["id"] == 7 and row["text"] == "row 7" and row["label"] == 1
    assert row["vec"] == [7.0, 7.0, 7.0]
    np.testing.assert_array_equal(row["grid"], np.arange(6).reshape(2, 3) + 7)
    assert row["meta"] == {"score": 3.5, "tags": ["a"]}
    assert toy[-1]["id"] == 199 and toy[np.int64(-200)]["id"] == 0
    with pytest.raises(IndexError, match="index 200 is out of range for a dataset of 200 rows"):
        toy[200]
    with pytest.raises(IndexError):
        toy[-201]


def test_slices_lists_masks_and_columns(toy):
    assert toy[10:20]["id"] == list(range(10, 20))
    assert toy[190:]["id"] == list(range(190, 200))
    assert toy[::50]["id"] == [0, 50, 100, 150]
    assert toy[[5, 2, 9]]["id"] == [5, 2, 9]
    assert toy[np.array([199, 0, 100])]["text"] == ["row 199", "row 0", "row 100"]
    mask = np.zeros(200, dtype=bool)
    mask[[3, 4]] = True
    assert toy[mask]["id"] == [3, 4]
    assert toy["id"] == list(range(200))
    assert toy[[]]["id"] == []
    with pytest.raises(KeyError, match="no column 'nope'"):
        toy["nope"]


def test_getitems_matches_getitem(toy):
    keys = [150, 3, 3, 77, -1]
    rows = toy.__getitems__(keys)
    assert [r["id"] for r in rows] == [150, 3, 3, 77, 199]
    for key, row in zip(keys, rows):
        assert row["text"] == toy[key]["text"]


PLAIN_BUILDER = """
import stable_datasets as sds

class Plain(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "id": sds.Value("int64"), "blob": sds.Value("binary"), "text": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        for i in range(200):
            yield i, {"id": i, "blob": bytes([i % 256]) * (i % 7), "text": "é" * (i % 3)}
"""


def test_getitems_of_plain_python_rows_keeps_order_and_gives_each_row_its_own_dict(write_builder, storage_format):
    """Rows of plain values are converted in one step; repeated keys still give separate dicts."""
    raw = sds.load_dataset(str(write_builder("plain", PLAIN_BUILDER)), split="train", storage_format=storage_format,
                           layout_options=LAYOUTS[storage_format])
    keys = [150, 3, 3, 77, -1, 64, 63]
    rows = raw.__getitems__(keys)
    assert raw._raw_final
    ids = [150, 3, 3, 77, 199, 64, 63]
    assert rows == [{"id": i, "blob": bytes([i]) * (i % 7), "text": "é" * (i % 3)} for i in ids]
    assert rows == [raw[k] for k in keys]
    rows[1]["id"] = -1
    assert rows[2] == raw[3]
    assert raw.__getitems__([]) == [] and raw.__getitems__([5]) == [raw[5]]
    assert raw.__getitems__(list(range(200))) == list(raw)
    many = raw.__getitems__(keys * 4)  # a batch read a column at a time
    assert many == raw.__getitems__(keys) * 4 and many[0] is not many[7]


def test_large_getitems_batches_equal_single_rows(toy):
    """Batches of 16 or more rows are read a column at a time; they must equal row-by-row reads."""
    rng = np.random.default_rng(5)
    keys = [*rng.integers(-200, 200, 60).tolist(), 0, 199, 0, 63, 64]
    for ds in (toy, toy.with_format("python", decode=False), toy.with_format("numpy")):
        rows = ds.__getitems__(keys)
        singles = [ds[k] for k in keys]
        assert [r["id"] for r in rows] == [k % 200 for k in keys]
        for row, single in zip(rows, singles):
            assert row.keys() == single.keys()
            for name in row:
                np.testing.assert_equal(row[name], single[name])
    shuffled = toy.shuffle(seed=1)
    assert [r["text"] for r in shuffled.__getitems__(list(range(40)))] == shuffled["text"][:40]


def test_arrow_batch_reads_past_the_gather_memory_fall_back_to_cells(toy_builder, monkeypatch):
    from stable_datasets.layouts import arrow_shards

    def read(budget):
        monkeypatch.setattr(arrow_shards, "GATHER_MEMORY", budget)
        # one shard of 16-row batches: a shard's rows are gathered a column at a time once it has 16 or more
        ds = sds.load_dataset(str(toy_builder), split="train", rows=200, layout_options={"batch_rows": 16})
        rows = ds.with_format("python", decode=False).__getitems__(list(range(199, -1, -7)))
        return rows, ds.backends[0].open_shards()[2]  # bytes the gather copies hold

    gathered, held = read(1 << 20)
    assert held > 0  # the text offsets (~850 bytes); id and label come from the map, uncopied
    by_cells, held = read(4)  # no room for any shard's text offsets: read a record batch at a time
    assert held == 0
    for a, b in zip(gathered, by_cells, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_iterating_scattered_rows_in_several_batches_equals_indexing(toy_builder, storage_format):
    ds = sds.load_dataset(str(toy_builder), split="train", rows=2300, storage_format=storage_format,
                          layout_options=LAYOUTS[storage_format])
    for view in (ds.shuffle(seed=4), ds.select(range(2299, -1, -2)).with_format("numpy")):
        rows = list(view)
        assert len(rows) == len(view) and [r["id"] for r in rows[:3]] == [view[i]["id"] for i in range(3)]
        for i in (0, 999, 1000, len(view) - 1):
            for name in rows[i]:
                np.testing.assert_equal(rows[i][name], view[i][name])
    assert [r["id"] for r in ds.shuffle(seed=4)] == ds.shuffle(seed=4)["id"]


def test_iteration_in_order_and_after_shuffle(toy):
    assert [r["id"] for r in toy] == list(range(200))
    shuffled = toy.shuffle(seed=3)
    ids = [r["id"] for r in shuffled]
    assert sorted(ids) == list(range(200)) and ids != list(range(200))
    assert ids == shuffled["id"] == [shuffled[i]["id"] for i in range(200)]
    assert ids == [r["id"] for r in toy.shuffle(seed=3)]
    batches = list(shuffled.iter(batch_size=64))
    assert [len(b["id"]) for b in batches] == [64, 64, 64, 8]
    assert sum((b["id"] for b in batches), []) == ids


def test_numpy_format(toy):
    ds = toy.with_format("numpy")
    row = ds[5]
    assert isinstance(row["id"], np.int64) and row["id"] == 5
    assert isinstance(row["vec"], np.ndarray) and row["vec"].dtype == np.float32
    batch = ds[0:4]
    assert isinstance(batch["id"], np.ndarray) and batch["id"].tolist() == [0, 1, 2, 3]
    assert batch["grid"].shape == (4, 2, 3)
    assert batch["text"].dtype == np.dtype("<U5") and batch["text"].tolist() == ["row 0", "row 1", "row 2", "row 3"]
    assert type(row["text"]) is np.str_ and row["text"] == "row 5"  # Hugging Face's numpy strings
    assert isinstance(ds["label"], np.ndarray)


def test_torch_format(toy):
    torch = pytest.importorskip("torch")
    ds = toy.with_format("torch", columns=["id", "grid", "vec"])
    row = ds[3]
    assert set(row) == {"id", "grid", "vec"}
    assert isinstance(row["id"], torch.Tensor) and row["id"].item() == 3
    assert row["grid"].shape == (2, 3) and row["grid"].dtype == torch.int16
    batch = ds[0:8]
    assert batch["grid"].shape == (8, 2, 3)


def test_arrow_format(toy):
    ds = toy.with_format("arrow")
    table = ds[3:6]
    assert isinstance(table, pa.Table) and table.column("id").to_pylist() == [3, 4, 5]
    assert ds[7].column("id").to_pylist() == [7]
    assert toy.to_arrow().num_rows == 200


def test_select_shard_filter_split(toy):
    sel = toy.select([9, 8, 7])
    assert sel["id"] == [9, 8, 7]
    assert sel.select([2])["id"] == [7]
    with pytest.raises(IndexError, match=r"select: indices must be in \[0, 3\)"):
        sel.select([3])
    shards = [toy.shard(3, i)["id"] for i in range(3)]
    assert [len(s) for s in shards] == [67, 67, 66] and sum(shards, []) == list(range(200))
    assert toy.shard(4, 1, contiguous=False)["id"][:3] == [1, 5, 9]
    even = toy.filter(lambda row: row["id"] % 2 == 0)
    assert len(even) == 100 and even["id"][:3] == [0, 2, 4]
    big = toy.filter(lambda ids: np.asarray(ids) >= 190, batched=True, input_columns=["id"])
    assert big["id"] == list(range(190, 200))
    with_idx = toy.filter(lambda row, i: i < 3, with_indices=True)
    assert with_idx["id"] == [0, 1, 2]
    parts = toy.train_test_split(test_size=0.25, seed=0)
    assert len(parts["train"]) == 150 and len(parts["test"]) == 50
    assert sorted(parts["train"]["id"] + parts["test"]["id"]) == list(range(200))
    fixed = toy.train_test_split(test_size=10, shuffle=False)  # as Hugging Face: train first, then test
    assert fixed["train"]["id"] == list(range(190)) and fixed["test"]["id"] == list(range(190, 200))


def test_map_writes_a_cache_and_reuses_it(toy, tmp_path):
    calls = tmp_path / "map_calls"

    def add_double(row):
        with open(calls, "a") as fh:
            fh.write("x")
        return {"double": row["id"] * 2}

    mapped = toy.map(add_double)
    assert mapped["double"][:4] == [0, 2, 4, 6] and mapped.features["double"] == sds.Value("int64")
    assert mapped["text"][1] == "row 1"
    assert len(calls.read_text()) == 200
    again = toy.map(add_double)
    assert len(calls.read_text()) == 200  # reused, function not called
    assert again.cache_dirs == mapped.cache_dirs
    assert mapped.cache_dirs[0].parent == toy.cache_dirs[0].parent
    assert mapped.cache_dirs[0].name.startswith("train.map-")
    assert sds.open_cache(mapped.cache_dirs[0]).cache_metadata[0].layout == "arrow_shards"

    batched = toy.map(lambda b: {"n": [len(t) for t in b["text"]]}, batched=True, batch_size=32,
                      remove_columns=["vec", "grid"])
    assert "vec" not in batched.features and batched["n"][:2] == [5, 5]

    other = toy.select([3, 1]).map(add_double)
    assert other["double"] == [6, 2]
    assert other.cache_dirs != mapped.cache_dirs


def test_a_damaged_map_cache_is_rebuilt(toy):
    mapped = toy.map(lambda row: {"double": row["id"] * 2})
    (mapped.cache_dirs[0] / "_metadata.json").write_text("{")
    again = toy.map(lambda row: {"double": row["id"] * 2})
    assert again["double"][:3] == [0, 2, 4] and len(again) == 200
    assert sds.open_cache(again.cache_dirs[0])["double"][199] == 398


def test_map_fingerprint_follows_closures(toy):
    def make(k):
        return lambda row: {"y": row["id"] * k}

    a, b = toy.map(make(2)), toy.map(make(3))
    assert a["y"][5] == 10 and b["y"][5] == 15
    assert a.cache_dirs != b.cache_dirs


def test_map_errors_name_the_problem(toy):
    with pytest.raises(StableDatasetsError, match="map function returned 2 rows for a batch of 16"):
        toy.map(lambda b: {"x": [1, 2]}, batched=True, batch_size=16)


@pytest.mark.parametrize("num_proc", [None, 2])
def test_an_exception_from_the_users_function_names_the_row(num_proc):
    """The user's exception keeps its type (their `except ValueError` still works) and its
    traceback says which row, or which batch, the function was given; nothing is published."""
    ds = StableDataset.from_dict({"x": list(range(3000))})

    def explode(row):
        if row["x"] == 1234:
            raise ValueError("no 1234 here")
        return {"y": row["x"]}

    with pytest.raises(ValueError, match="no 1234 here") as info:
        ds.map(explode, num_proc=num_proc)
    assert info.value.__notes__ == [f"raised by {explode.__qualname__} in map, on row 1234"]
    with pytest.raises(ValueError) as info:
        ds.map(lambda b: explode({"x": 1234}) if 1234 in b["x"] else b, batched=True, batch_size=1000,
               num_proc=num_proc)
    assert info.value.__notes__[-1].endswith("in map, on the batch of rows 1000..1999")
    with pytest.raises(ValueError) as info:
        ds.filter(explode, num_proc=num_proc)
    assert info.value.__notes__ == [f"raised by {explode.__qualname__} in filter, on row 1234"]
    left = [p.name for p in ds.cache_dirs[0].parent.iterdir() if p.is_dir() and p.name.split("@")[0] != "train"]
    assert left == []


def test_pickle_carries_paths_not_data(toy):
    ds = toy.shuffle(seed=1).with_format("numpy")
    blob = pickle.dumps(ds)
    assert len(blob) < 20_000
    assert b"row 17" not in blob
    again = pickle.loads(blob)
    assert again["id"].tolist() == ds["id"].tolist()
    assert again.format == ds.format


def _sum_ids(ds):
    return sum(int(r["id"]) for r in ds)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers(toy, method):
    torch = pytest.importorskip("torch")
    ds = toy.with_format("torch", columns=["id", "grid"])
    ds[0]  # touch handles in the parent first
    loader = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2,
                                         multiprocessing_context=multiprocessing.get_context(method))
    batches = list(loader)  # one pass: each pass starts the workers again (spawn re-imports torch in each)
    ids = torch.cat([b["id"] for b in batches])
    assert ids.tolist() == list(range(200))
    grids = batches[0]["grid"]
    assert grids.shape == (32, 2, 3)


def test_concatenate_and_split_strings(toy_builder, storage_format):
    fmt = {"storage_format": storage_format}
    combo = sds.load_dataset(str(toy_builder), split="train[:10%]+test[-2:]", **fmt)
    assert combo["id"] == [0, 1, 2, 3, 4, 1048, 1049]
    assert combo.split == "train[:10%]+test[-2:]"
    assert sds.load_dataset(str(toy_builder), split="train[10:12]", **fmt)["id"] == [10, 11]
    assert sds.load_dataset(str(toy_builder), split="train[-10%:]", **fmt)["id"] == [45, 46, 47, 48, 49]
    both = sds.load_dataset(str(toy_builder), split="train+test", **fmt)
    assert len(both) == 100 and both[50]["id"] == 1000 and both[[49, 50]]["id"] == [49, 1000]
    both_rows = both.__getitems__([99, 0])
    assert [r["id"] for r in both_rows] == [1049, 0]


def test_lance_cache_is_a_lance_dataset(toy_builder):
    import lance

    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance", rows=30)
    native = lance.dataset(str(ds.cache_dirs[0] / "data.lance"))
    assert native.count_rows() == 30
    assert native.take([7]).column("text").to_pylist() == ["row 7"]
    meta = ds.cache_metadata[0]
    assert meta.layout == "lance_rows"
    assert sum(s.num_rows for s in meta.shards) == 30
    assert any(s.path.startswith("data.lance/data/") for s in meta.shards)
    arrow = sds.load_dataset(str(toy_builder), split="train", rows=30)
    assert arrow.cache_dirs[0].parent != ds.cache_dirs[0].parent  # storage format is in the fingerprint


def test_lance_reads_by_fragment_equal_lance_take(toy_builder):
    import lance

    from stable_datasets.layouts.lance.access import RowTaker

    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance", rows=200,
                          layout_options=LAYOUTS["lance"])
    native = lance.dataset(str(ds.cache_dirs[0] / "data.lance"))
    taker = RowTaker(native)
    assert len(taker.fragments) == 4  # 200 rows in files of 64
    rng = np.random.default_rng(0)
    cases = [np.arange(200), np.arange(199, -1, -1), np.array([63, 64]), np.array([5, 5, 5]), np.array([199]),
             *(rng.integers(0, 200, n) for n in (2, 17, 300))]
    for rows in cases:
        assert taker.take(rows).equals(native.take(rows)), rows
    assert taker.take(np.array([130, 2]), columns=["text"]).to_pylist() == [{"text": "row 130"}, {"text": "row 2"}]

    import shutil

    copy = ds.cache_dirs[0].parent / "copy.lance"  # a dataset with a deleted row: offsets are not row numbers
    shutil.copytree(ds.cache_dirs[0] / "data.lance", copy)
    edited = lance.dataset(str(copy))
    edited.delete("id = 5")
    taker = RowTaker(edited)
    assert taker.fragments == [] and taker.take(np.array([70, 5])).column("id").to_pylist() == [71, 6]


def _forked_child_reads(cache_dir, queue):
    from stable_datasets.layouts.lance.access import LanceProxy

    ds = sds.open_cache(cache_dir)
    rows = ds.__getitems__([3, 0])
    queue.put((type(ds.backends[0]._dataset).__name__, [r["id"] for r in rows], len(list(ds)),
               isinstance(ds.backends[0]._dataset, LanceProxy)))


def test_forked_children_read_lance_through_a_fresh_runtime(toy_builder):
    ds = sds.load_dataset(str(toy_builder), split="train", storage_format="lance", rows=20)
    ds[0]  # the parent now has a Lance runtime
    assert type(ds.backends[0]._dataset).__name__ == "LanceDataset"
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_forked_child_reads, args=(ds.cache_dirs[0], queue))
    child.start()
    name, ids, count, proxied = queue.get(timeout=60)
    child.join(timeout=30)
    assert proxied and name == "LanceProxy" and ids == [3, 0] and count == 20


def test_a_process_that_only_wrote_lance_still_forks_safely(toy_builder, cache_root):
    """Building a Lance cache starts the runtime too; a fork after it must use the helper."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import multiprocessing
        import stable_datasets as sds
        from stable_datasets.layouts.lance import access as lance_access
        builder = sds.load_builder({str(toy_builder)!r}, rows=12)
        directory = builder.prepare("train", "lance")["train"]   # writes, never opens for reading
        assert lance_access._lance_opened

        def child(queue):
            ds = sds.open_cache(directory)
            queue.put((type(ds.backends[0].ensure_open() or ds.backends[0]._dataset).__name__, len(list(ds))))

        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        process = context.Process(target=child, args=(queue,))
        process.start()
        print(*queue.get(timeout=60))
        process.join(timeout=30)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(cache_root)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["LanceProxy", "12"]
    # the helper is started without `-m` (which warned "found in sys.modules ..." once per worker)
    assert "RuntimeWarning" not in out.stderr, out.stderr[-2000:]


def test_a_relative_cache_dir_keeps_working_after_chdir(tmp_path, monkeypatch):
    """Before: with cache_dir="rel" (or STABLE_DATASETS_CACHE_DIR=rel) an open dataset held relative
    paths, and after os.chdir reading it raised 'corrupt Arrow shard (... Failed to open local file ...)'."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    ds = StableDataset.from_dict({"x": list(range(10))}, cache_dir="rel")
    reopened = sds.open_cache(os.path.relpath(ds.cache_dirs[0]))
    assert ds.cache_dirs[0].is_absolute() and reopened.cache_dirs[0].is_absolute()
    monkeypatch.chdir(tmp_path)
    assert ds[5] == {"x": 5} and reopened[7] == {"x": 7}
    assert str(ds.cache_dirs[0]).startswith(str(tmp_path / "work" / "rel"))
