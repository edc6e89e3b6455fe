"""Hugging Face `Dataset` habits (issue 25 item 8), side by side with the real `datasets`.

Each test runs the same call on a `datasets.Dataset` and on ours built from the same columns
and compares the results (rows, files written, return values). Inputs follow Hugging Face's
tests/test_arrow_dataset.py (test_select, test_take/test_skip, test_flatten_indices, test_cast,
test_add_item, test_to_csv/test_to_json/test_to_parquet, test_map with fn_kwargs and
drop_last_batch, test_filter with fn_kwargs, test_train_test_split with a generator, formats).
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import stable_datasets as sds
from stable_datasets import StableDataset

datasets = pytest.importorskip("datasets", minversion="5")

COLUMNS = {"filename": [f"my_name-train_{i}" for i in range(30)], "col_1": list(range(30)),
           "col_2": [float(i) / 2 for i in range(30)]}


@pytest.fixture
def pair():
    hf = datasets.Dataset.from_dict(COLUMNS)
    ours = StableDataset.from_dict(COLUMNS, features=sds.Features({"filename": sds.Value("string"),
                                                                   "col_1": sds.Value("int64"),
                                                                   "col_2": sds.Value("float64")}))
    return hf, ours


def test_select_takes_what_hf_select_takes(pair):
    hf, ours = pair
    for indices in ([5, 0, 29], range(3, 12, 4), np.array([7, 7, 1]), pd.Series([2, 9]), (i for i in (4, 2))):
        again = list(indices) if not isinstance(indices, (list, range, np.ndarray, pd.Series)) else indices
        assert ours.select(iter(again) if isinstance(indices, type(i for i in ())) else indices).to_dict() == \
            hf.select(again).to_dict()
    assert ours[pd.Series([3, 1])] == hf[pd.Series([3, 1])]
    assert ours[range(2, 5)] == hf[range(2, 5)] and ours[np.array([9, 4])]["col_1"] == hf[np.array([9, 4])]["col_1"]
    with pytest.raises(TypeError):
        hf[iter([0, 1])]
    with pytest.raises(TypeError):
        ours[iter([0, 1])]


def test_take_skip_shape_num_columns(pair):
    hf, ours = pair
    for n in (0, 3, 29, 30, 45):
        assert ours.take(n).to_dict() == hf.take(n).to_dict()
    for n in (0, 3, 29):
        assert ours.skip(n).to_dict() == hf.skip(n).to_dict()
    # a deliberate difference: skipping every row is an empty dataset here, an IndexError in datasets 5
    assert len(ours.skip(30)) == len(ours.skip(45)) == 0
    with pytest.raises(IndexError):
        hf.skip(30)
    assert ours.shape == hf.shape == (30, 3) and ours.num_columns == hf.num_columns == 3


def test_flatten_indices_and_cast(pair):
    hf, ours = pair
    view = ours.shuffle(seed=42).select(range(10))
    flat = view.flatten_indices()
    assert not any(f["view"] for f in flat.cache_files) and all(f["view"] for f in view.cache_files)
    assert flat.to_dict() == view.to_dict()
    assert ours.flatten_indices() is ours
    hf_features = datasets.Features({"filename": datasets.Value("large_string"), "col_1": datasets.Value("float32"),
                                     "col_2": datasets.Value("float32")})
    ours_features = sds.Features({"filename": sds.Value("large_string"), "col_1": sds.Value("float32"),
                                  "col_2": sds.Value("float32")})
    cast_hf, cast_ours = hf.cast(hf_features), ours.cast(ours_features)
    assert cast_ours.to_dict() == cast_hf.to_dict()
    assert [f.dtype for f in cast_ours.features.values()] == [f.dtype for f in cast_hf.features.values()]
    with pytest.raises(ValueError, match=r"The columns in features \(\['col_1'\]\) must be identical as the "
                                         r"columns in the dataset: \['filename', 'col_1', 'col_2'\]"):
        ours.cast(sds.Features({"col_1": sds.Value("int32")}))
    with pytest.raises(ValueError, match="must be identical as the columns in the dataset"):
        hf.cast(datasets.Features({"col_1": datasets.Value("int32")}))


def test_add_item(pair):
    hf, ours = pair
    item = {"filename": "added", "col_1": 99, "col_2": 0.25}
    assert ours.add_item(item).to_dict() == hf.add_item(item).to_dict()
    assert len(ours.select([3, 1]).add_item(item)) == 3 and ours.select([3, 1]).add_item(item)[2] == item
    lacking = {"filename": "x", "col_1": 1}  # the column the item lacks is null in its row, as in Hugging Face
    assert ours.add_item(lacking).to_dict() == hf.add_item(lacking).to_dict()
    assert ours.add_item(lacking)[-1] == {"filename": "x", "col_1": 1, "col_2": None}


def test_add_item_with_new_columns_fills_nulls_as_hugging_face_does():
    """HF's test_dataset_add_item_new_columns, side by side."""
    theirs = datasets.Dataset.from_dict({"col_1": [0, 1, 2]},
                                        features=datasets.Features({"col_1": datasets.Value("uint8")}))
    ours = StableDataset.from_dict({"col_1": [0, 1, 2]}, features=sds.Features({"col_1": sds.Value("uint8")}))
    theirs, ours = theirs.add_item({"col_1": 3, "col_2": "a"}), ours.add_item({"col_1": 3, "col_2": "a"})
    assert ours.features == sds.Features({"col_1": sds.Value("uint8"), "col_2": sds.Value("string")})
    assert ours[:] == theirs[:] == {"col_1": [0, 1, 2, 3], "col_2": [None, None, None, "a"]}
    theirs, ours = theirs.add_item({"col_3": True}), ours.add_item({"col_3": True})
    assert list(ours.features) == ["col_1", "col_2", "col_3"] and ours.features["col_3"] == sds.Value("bool")
    assert ours[:] == theirs[:] == {"col_1": [0, 1, 2, 3, None], "col_2": [None, None, None, "a", None],
                                    "col_3": [None, None, None, None, True]}


@pytest.mark.parametrize("item", [{"col_1": "2", "col_2": 2, "col_3": 2.0}, {"col_1": "2", "col_2": "2", "col_3": "2"},
                                  {"col_1": 2, "col_2": 2, "col_3": 2}, {"col_1": 2.0, "col_2": 2.0, "col_3": 2.0}])
def test_add_item_casts_values_of_another_kind_to_the_columns_as_hugging_face_does(item):
    """HF's test_dataset_add_item items, on its dataset_dict fixture; the format stays."""
    data = {"col_1": ["0", "1", "2", "3"], "col_2": [0, 1, 2, 3], "col_3": [0.0, 1.0, 2.0, 3.0]}
    theirs = datasets.Dataset.from_dict(data).add_item(item)
    ours = StableDataset.from_dict(data).with_format("numpy").add_item(item)
    assert ours.format["type"] == "numpy" and type(ours[-1]["col_1"]) is np.str_
    assert ours.with_format("python")[:] == theirs[:]
    assert ours.with_format("python")[-1] == {"col_1": "2", "col_2": 2, "col_3": 2.0}


def test_exports_write_what_hf_writes(pair, tmp_path):
    hf, ours = pair
    view, hf_view = ours.select(range(5, 25)), hf.select(range(5, 25))
    assert view.to_csv(tmp_path / "ours.csv", batch_size=7) == hf_view.to_csv(tmp_path / "hf.csv", batch_size=7)
    assert (tmp_path / "ours.csv").read_text() == (tmp_path / "hf.csv").read_text()
    assert view.to_json(tmp_path / "ours.jsonl", batch_size=7) == hf_view.to_json(tmp_path / "hf.jsonl", batch_size=7)
    assert (tmp_path / "ours.jsonl").read_text() == (tmp_path / "hf.jsonl").read_text()
    assert json.loads((tmp_path / "ours.jsonl").read_text().splitlines()[0]) == hf_view[0]
    ours_bytes, hf_bytes = view.to_parquet(tmp_path / "ours.parquet"), hf_view.to_parquet(tmp_path / "hf.parquet")
    assert ours_bytes == hf_bytes
    assert pq.read_table(tmp_path / "ours.parquet").to_pydict() == pq.read_table(tmp_path / "hf.parquet").to_pydict()
    # to a buffer, and with pandas' own options passed through
    text, hf_text = io.BytesIO(), io.BytesIO()
    assert ours.to_csv(text, sep=";", index=True) == hf.to_csv(hf_text, sep=";", index=True)
    assert text.getvalue() == hf_text.getvalue()
    as_str = io.StringIO()  # a text buffer gets text here (datasets 5 writes bytes into it and fails)
    assert ours.take(2).to_csv(as_str) == len(as_str.getvalue()) and as_str.getvalue().startswith("filename,")
    raw, hf_raw = io.BytesIO(), io.BytesIO()
    ours.to_json(raw, orient="records", lines=False)
    hf.to_json(hf_raw, orient="records", lines=False)
    assert json.loads(raw.getvalue()) == json.loads(hf_raw.getvalue())


def test_map_and_filter_keywords(pair):
    hf, ours = pair

    def add(col_1, k):
        return {"plus": col_1 + k}

    kwargs = dict(input_columns="col_1", fn_kwargs={"k": 10}, remove_columns=["filename"])
    assert ours.map(add, **kwargs).to_dict() == hf.map(add, **kwargs).to_dict()

    def double(batch):
        return {"double": [2 * x for x in batch["col_1"]]}

    for batch_size in (7, 10):
        kwargs = dict(batched=True, batch_size=batch_size, drop_last_batch=True)
        assert ours.map(double, **kwargs).to_dict() == hf.map(double, **kwargs).to_dict()

    def indexed(row, index, offset):
        return {"i": index + offset}

    kwargs = dict(with_indices=True, fn_kwargs={"offset": 100})
    assert ours.map(indexed, **kwargs)["i"] == hf.map(indexed, **kwargs)["i"]

    def above(row, limit):
        return row["col_1"] > limit

    assert ours.filter(above, fn_kwargs={"limit": 20}).to_dict() == hf.filter(above, fn_kwargs={"limit": 20}).to_dict()
    assert ours.filter(lambda b, limit: [x < limit for x in b["col_1"]], batched=True, fn_kwargs={"limit": 4})[
        "col_1"] == [0, 1, 2, 3]


def test_train_test_split_with_a_generator(pair):
    hf, ours = pair
    for kwargs in ({"generator": np.random.default_rng(7)}, {"seed": 7}, {"seed": np.random.default_rng(7)}):
        expected = hf.train_test_split(test_size=0.2, **kwargs)
        again = dict(kwargs)
        again.update({k: np.random.default_rng(7) for k, v in kwargs.items() if isinstance(v, np.random.Generator)})
        got = ours.train_test_split(test_size=0.2, **again)
        assert got["test"]["col_1"] == expected["test"]["col_1"] and got["train"]["col_1"] == expected["train"][
            "col_1"]
    with pytest.raises(ValueError, match="Both `seed` and `generator` were provided"):
        ours.train_test_split(test_size=2, seed=1, generator=np.random.default_rng(1))


def test_format_aliases(pair):
    hf, ours = pair
    for alias, full in (("np", "numpy"), ("pt", "torch")):
        assert ours.with_format(alias).format["type"] == full
    assert ours.with_format("np")[:3]["col_1"].tolist() == hf.with_format("np")[:3]["col_1"].tolist()
    assert ours.with_format("pt")[:3]["col_2"].tolist() == hf.with_format("pt")[:3]["col_2"].tolist()
    for name in ("pandas", "polars"):
        mine, theirs = ours.with_format(name), hf.with_format(name)
        assert type(mine[:4]) is type(theirs[:4]) and mine[:4].equals(theirs[:4])
        assert type(mine[2]) is type(theirs[2]) and mine[2].shape == theirs[2].shape == (1, 3)
        assert list(mine["col_1"]) == list(theirs["col_1"])
    assert ours.with_format("pandas")[2]["filename"].tolist() == ["my_name-train_2"]
    with pytest.raises(ValueError, match="unknown format 'tensorflow'"):
        ours.with_format("tensorflow")


def test_bool_arrays_of_every_rank():
    for rank in (2, 3, 4, 5):
        shape = (2,) * rank
        value = (np.arange(2 ** rank).reshape(shape) % 3 == 0)
        ours_type, hf_type = getattr(sds, f"Array{rank}D"), getattr(datasets, f"Array{rank}D")
        ours = StableDataset.from_dict({"m": [value, ~value]}, features=sds.Features({"m": ours_type(shape, "bool")}))
        hf = datasets.Dataset.from_dict({"m": [value, ~value]},
                                        features=datasets.Features({"m": hf_type(shape, "bool")}))
        assert ours.with_format("numpy")[0]["m"].dtype == np.bool_
        assert np.array_equal(ours.with_format("numpy")[1]["m"], hf.with_format("numpy")[1]["m"])
        assert ours[0]["m"].tolist() == np.asarray(hf[0]["m"]).tolist()


def test_classlabel_arguments_as_hf(tmp_path):
    names_file = tmp_path / "labels.txt"
    names_file.write_text("negative\npositive")
    for cls in (sds.ClassLabel, datasets.ClassLabel):
        assert cls(names_file=str(names_file)).names == ["negative", "positive"]
        with pytest.raises(ValueError, match="Please provide either names or names_file but not both."):
            cls(names=["negative", "positive"], names_file=str(names_file))
        with pytest.raises(TypeError, match="Please provide names as a list, is <class 'numpy.ndarray'>"):
            cls(names=np.array(["negative", "positive"]))
        with pytest.raises(ValueError):
            cls(num_classes=3, names=["negative", "positive"])
        with pytest.raises(ValueError):
            cls()


# -- issue 36 item 18: exports of binary, nested and image columns; nothing left by a failed export ------------
def _mixed():
    return StableDataset.from_dict(
        {"i": [1, 2], "l": [[1, 2], []], "s": [{"x": 1, "y": [1.5]}, None], "f": [[[1.0, 2.0]], [[3.0]]],
         "a": [np.eye(2, dtype=np.uint8), np.zeros((2, 2), np.uint8)]},
        features=sds.Features({"i": sds.Value("int64"), "l": sds.Sequence(sds.Value("int64")),
                               "s": {"x": sds.Value("int64"), "y": sds.Sequence(sds.Value("float32"))},
                               "f": sds.Sequence(sds.Sequence(sds.Value("float64"))),
                               "a": sds.Array2D((2, 2), "uint8")}))


def test_csv_cells_of_nested_columns_are_json_never_numpy_reprs(tmp_path):
    """Before: '[1 2]', "{'x': 1, 'y': array([1.5], dtype=float32)}" and '[array([1., 2.])]' in the file."""
    import csv

    ds = _mixed()
    ds.to_csv(tmp_path / "out.csv")
    text = (tmp_path / "out.csv").read_text()
    assert "array(" not in text and "[1 2]" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [json.loads(r["l"]) for r in rows] == [[1, 2], []]
    assert [json.loads(r["s"]) if r["s"] else None for r in rows] == [{"x": 1, "y": [1.5]}, None]
    assert [json.loads(r["f"]) for r in rows] == [[[1.0, 2.0]], [[3.0]]]
    assert [json.loads(r["a"]) for r in rows] == [[1, 0, 0, 1], [0, 0, 0, 0]]  # Array2D: its stored (flat) form
    ds.to_json(tmp_path / "out.jsonl")
    assert [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()] == [
        {"i": 1, "l": [1, 2], "s": {"x": 1, "y": [1.5]}, "f": [[1.0, 2.0]], "a": [1, 0, 0, 1]},
        {"i": 2, "l": [], "s": None, "f": [[3.0]], "a": [0, 0, 0, 0]}]


@pytest.mark.parametrize("feature, value, shown", [
    (sds.Value("binary"), b"\x00\xff", "Value(dtype='binary')"),
    (sds.Image(), np.zeros((2, 2, 3), np.uint8), "Image(format='png', quality=None)"),
    (sds.Sequence(sds.Value("binary")), [b"\x89PNG"], "Sequence(")])
@pytest.mark.parametrize("method", ["to_csv", "to_json"])
def test_text_exports_refuse_bytes_naming_the_column_and_write_nothing(tmp_path, feature, value, shown, method):
    """Before: to_json raised UnicodeDecodeError from pandas and left a 0-byte file; to_csv wrote Python's
    b'\\x00\\xff' reprs (a PNG's bytes as text). Parquet holds bytes: it exports them."""
    from stable_datasets.dataset.hf_methods import ExportError

    ds = StableDataset.from_dict({"k": [1], "blob": [value]}, features=sds.Features({"k": sds.Value("int64"),
                                                                                   "blob": feature}))
    folder = tmp_path / "exports"
    folder.mkdir()
    target = folder / "out.txt"
    with pytest.raises(ExportError, match=rf"^{method}: column 'blob' holds bytes \({re.escape(shown)}.*; "
                                          rf"{method[3:].upper()} has no bytes type: export it with to_parquet, or "
                                          "remove_columns/cast it first$"):
        getattr(ds, method)(target)
    assert list(folder.iterdir()) == []
    ds.to_parquet(folder / "out.parquet")
    assert pq.read_table(folder / "out.parquet")["blob"].to_pylist() == ds.to_arrow()["blob"].to_pylist()


def test_a_failed_export_leaves_no_file_and_keeps_an_older_one(tmp_path):
    """Before: a failure inside pandas or the Parquet writer left a 0-byte (or half-written) file at the path."""
    ds = _mixed()
    folder = tmp_path / "exports"
    folder.mkdir()
    with pytest.raises(ValueError):
        ds.to_json(folder / "a.json", orient="no-such-orient")
    with pytest.raises(Exception, match="compression"):
        ds.to_parquet(folder / "b.parquet", compression="no-such-codec")
    assert list(folder.iterdir()) == []
    (folder / "c.csv").write_text("older\n")
    with pytest.raises(TypeError):
        ds.to_csv(folder / "c.csv", no_such_option=1)
    assert (folder / "c.csv").read_text() == "older\n" and len(list(folder.iterdir())) == 1


# -- issue 37 item 4: num_proc checked, int64 exact with nulls, compression honoured ------------------------------
@pytest.mark.parametrize("method", ["to_csv", "to_json"])
@pytest.mark.parametrize("num_proc", [0, -1])
def test_text_exports_refuse_num_proc_below_one_as_hf_does(pair, method, num_proc):
    """HF tests/io/test_csv.py::test_dataset_to_csv_invalidproc (and its JSON twin): num_proc=0 is a ValueError.
    Before: accepted and ignored."""
    hf, ours = pair
    with pytest.raises(ValueError, match=rf"^num_proc {num_proc} must be an integer > 0\.$"):
        getattr(hf, method)(io.BytesIO(), num_proc=num_proc)
    with pytest.raises(ValueError, match=rf"^num_proc {num_proc} must be an integer > 0\.$"):
        getattr(ours, method)(io.BytesIO(), num_proc=num_proc)
    assert getattr(ours, method)(io.BytesIO(), num_proc=2) == getattr(hf, method)(io.BytesIO(), num_proc=2)


def test_text_exports_keep_int64_exact_beside_nulls_as_hf_writes_them():
    """pandas turns an int column with a null into float64: 2**53 + 1 was written as 9007199254740992.0 (a
    different number) and 3 as 3.0. HF passes integer_object_nulls=True; the files are now HF's, byte for byte."""
    columns = {"a": [2**53 + 1, None, 3, -(2**63)], "b": ["x", "y", None, "z"]}
    features = sds.Features({"a": sds.Value("int64"), "b": sds.Value("string")})
    ours = StableDataset.from_dict(columns, features=features)
    hf = datasets.Dataset.from_dict(columns, features=datasets.Features({"a": datasets.Value("int64"),
                                                                         "b": datasets.Value("string")}))
    for method in ("to_csv", "to_json"):
        mine, theirs = io.BytesIO(), io.BytesIO()
        assert getattr(ours, method)(mine) == getattr(hf, method)(theirs)
        assert mine.getvalue() == theirs.getvalue()
    csv_out, json_out = io.BytesIO(), io.BytesIO()
    ours.to_csv(csv_out)
    ours.to_json(json_out)
    assert csv_out.getvalue() == b'a,b\n9007199254740993,x\n,y\n3,\n-9223372036854775808,z\n'
    assert [json.loads(line)["a"] for line in json_out.getvalue().splitlines()] == [2**53 + 1, None, 3, -(2**63)]


@pytest.mark.parametrize("suffix, compression, opener", [
    (".gz", "gzip", "gzip"), (".bz2", "bz2", "bz2"), (".xz", "xz", "lzma")])
@pytest.mark.parametrize("method", ["to_csv", "to_json"])
def test_text_exports_compress_as_asked_or_as_the_suffix_says(pair, tmp_path, suffix, compression, opener, method):
    """HF tests/io/test_json.py::test_dataset_to_json_compression (gzip, bz2, xz): the file decompresses to the
    plain export. pandas infers the codec from the suffix, and so do we. Before: plain text under a .gz name."""
    import importlib

    _, ours = pair
    plain = io.BytesIO()
    written = getattr(ours, method)(plain)
    asked, inferred = tmp_path / f"asked.out{suffix}", tmp_path / f"inferred.out{suffix}"
    assert getattr(ours, method)(asked, compression=compression) == written  # bytes before compression, as HF
    getattr(ours, method)(inferred)
    module = importlib.import_module(opener)
    for path in (asked, inferred):
        assert module.decompress(path.read_bytes()) == plain.getvalue()
    read_back = pd.read_csv(asked) if method == "to_csv" else pd.read_json(asked, lines=True)
    assert read_back.to_dict("list") == COLUMNS
    unpacked = io.BytesIO()
    getattr(ours, method)(unpacked, compression={"method": compression})
    assert module.decompress(unpacked.getvalue()) == plain.getvalue()
    getattr(ours, method)(tmp_path / f"none.out{suffix}", compression=None)
    assert (tmp_path / f"none.out{suffix}").read_bytes() == plain.getvalue()


def test_text_exports_refuse_a_compression_they_cannot_stream(pair, tmp_path):
    _, ours = pair
    folder = tmp_path / "exports"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"^compression 'zip' is not supported for a text export; use one of "):
        ours.to_csv(folder / "a.csv", compression="zip")
    with pytest.raises(ValueError, match=r"^to_json: compression='gzip' writes bytes; give a path or a binary"):
        ours.to_json(io.StringIO(), compression="gzip")
    assert list(folder.iterdir()) == []
