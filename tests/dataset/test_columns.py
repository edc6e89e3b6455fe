"""Column operations: views where the stored data does not change, rewrites where it does, and
Hugging Face's behaviour where we claim it (checked against the real `datasets` where cheap)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets import DatasetDict, StableDataset
from stable_datasets.dataset.splits import parse_split
from stable_datasets.errors import ExampleError, StableDatasetsError


@pytest.fixture
def people():
    return StableDataset.from_dict({"name": ["ann", "bob", "cid", "dee", "eve", "fay"],
                                    "age": [31, 25, 31, 47, 25, 19],
                                    "city": ["rome", "oslo", "oslo", "rome", "lima", "oslo"]})


def _builds(ds):
    """The published caches beside `ds` (each is a link to its current build folder `<name>@<id>`)."""
    return {p.name for p in ds.cache_dirs[0].parent.iterdir() if not p.name.startswith(".") and "@" not in p.name}


def test_select_remove_rename_are_views_with_their_own_features(people):
    before = _builds(people)
    picked = people.select_columns(["city", "name"])
    assert picked.column_names == ["city", "name"] and list(picked.features) == ["city", "name"]
    assert picked[0] == {"city": "rome", "name": "ann"} and picked[1:3] == {"city": ["oslo", "oslo"],
                                                                            "name": ["bob", "cid"]}
    assert picked.to_arrow().schema.names == ["city", "name"]
    assert people.remove_columns("age").column_names == ["name", "city"]
    renamed = people.rename_columns({"name": "who", "city": "where"})
    assert renamed.column_names == ["who", "age", "where"] and renamed[3] == {"who": "dee", "age": 47,
                                                                             "where": "rome"}
    assert renamed.rename_column("who", "name").select_columns("name")["name"] == people["name"]
    assert list(renamed.with_format("numpy")[:2]) == ["who", "age", "where"]
    assert next(iter(renamed.select([5]))) == {"who": "fay", "age": 19, "where": "oslo"}
    assert renamed.__getitems__([1, 0]) == [{"who": "bob", "age": 25, "where": "oslo"},
                                            {"who": "ann", "age": 31, "where": "rome"}]
    assert _builds(people) == before  # nothing was written
    assert pickle.loads(pickle.dumps(renamed))[0] == renamed[0]


def test_column_views_change_the_fingerprint_used_by_map(people):
    # a map over a renamed view is not the map over the original (its cache is named by the view)
    upper = people.map(lambda row: {"name": row["name"].upper()})
    swapped = people.rename_columns({"name": "city", "city": "name"}).map(lambda row: {"name": row["name"].upper()})
    assert upper["name"][:2] == ["ANN", "BOB"] and swapped["name"][:2] == ["ROME", "OSLO"]
    assert people.select_columns(["name"]).fingerprint != people.fingerprint
    assert people.select_columns(["name", "age", "city"]).fingerprint != people.select_columns(
        ["age", "name", "city"]).fingerprint


def test_column_operation_errors(people):
    with pytest.raises(KeyError, match=r"select_columns: no column\(s\) \['nope'\]"):
        people.select_columns(["nope"])
    with pytest.raises(ValueError, match="would leave no column"):
        people.remove_columns(["name", "age", "city"])
    with pytest.raises(ValueError, match=r"the columns would not be unique: \['age'\] named twice"):
        people.rename_column("name", "age")
    with pytest.raises(ValueError, match="already has a column 'age'"):
        people.add_column("age", [1] * 6)
    with pytest.raises(ValueError, match="5 values for a dataset of 6 rows"):
        people.add_column("x", [1] * 5)


def test_sort_is_a_stable_view_and_matches_hf(people):
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_dict(people.to_dict())
    assert people.sort("age")["name"] == hf.sort("age")["name"] == ["fay", "bob", "eve", "ann", "cid", "dee"]
    assert people.sort(["city", "age"], reverse=[False, True])["name"] == \
        hf.sort(["city", "age"], reverse=[False, True])["name"]
    assert people.sort("age", reverse=True)["name"] == hf.sort("age", reverse=True)["name"]
    with_nulls = StableDataset.from_dict({"v": [3, None, 1]})
    assert with_nulls.sort("v")["v"] == [1, 3, None]
    assert with_nulls.sort("v", null_placement="at_start")["v"] == [None, 1, 3]
    assert people.select([5, 4, 3]).sort("name")["name"] == ["dee", "eve", "fay"]  # within a selection


def test_unique_in_order_of_first_appearance(people):
    assert people.unique("city") == ["rome", "oslo", "lima"]
    assert people.select([4, 0]).unique("city") == ["lima", "rome"]
    assert people.rename_column("city", "c").unique("c") == ["rome", "oslo", "lima"]


def test_cast_column_relabels_or_rewrites(people):
    before = _builds(people)
    narrow = people.cast_column("age", sds.Value("int8"))
    assert narrow.features["age"] == sds.Value("int8") and narrow["age"] == people["age"]
    assert narrow.column_names == ["name", "age", "city"]
    assert narrow.cast_column("age", sds.Value("int8")).cache_dirs == narrow.cache_dirs
    assert len(_builds(people)) == len(before) + 1  # the rewrite is a cache beside the source
    with pytest.raises(ExampleError, match=r"example key 3, field 'age': label 47 is out of range \[0, 40\)"):
        people.cast_column("age", sds.Value("int8")).cast_column("age", sds.ClassLabel(num_classes=40))
    tripled = people.map(lambda row: {"age": row["age"] * 3})  # row 3: 141, beyond int8
    with pytest.raises(ExampleError, match=r"example key 3, field 'age': value 141 is out of range for int8"):
        tripled.cast_column("age", sds.Value("int8"))
    labelled = StableDataset.from_dict({"y": [0, 1, 1]}, features={"y": sds.ClassLabel(names=["a", "b"])})
    more = labelled.cast_column("y", sds.ClassLabel(names=["a", "b", "c"]))  # same storage: a view
    assert more.cache_dirs == labelled.cache_dirs and more.features["y"].names == ["a", "b", "c"]
    assert labelled.cast_column("y", sds.Value("int64")).cache_dirs == labelled.cache_dirs


def test_add_column_in_view_order(people):
    shuffled = people.select([2, 0, 1])
    added = shuffled.add_column("score", np.array([0.5, 1.5, 2.5]))
    assert added.column_names == ["name", "age", "city", "score"]
    assert added[:] == {"name": ["cid", "ann", "bob"], "age": [31, 31, 25], "city": ["oslo", "rome", "oslo"],
                        "score": [0.5, 1.5, 2.5]}
    typed = people.add_column("flag", [1, 0, 1, 0, 1, 0], feature=sds.ClassLabel(names=["no", "yes"]))
    assert typed.features["flag"] == sds.ClassLabel(names=["no", "yes"]) and typed["flag"][:2] == [1, 0]
    assert people.add_column("flag", [1, 0, 1, 0, 1, 0]).cache_dirs != \
        people.add_column("flag", [1, 1, 1, 0, 1, 0]).cache_dirs


def test_class_encode_column_matches_hf(people):
    datasets = pytest.importorskip("datasets")
    ours = people.class_encode_column("city")
    hf = datasets.Dataset.from_dict(people.to_dict()).class_encode_column("city")
    assert ours.features["city"].names == hf.features["city"].names == ["lima", "oslo", "rome"]
    assert ours["city"] == hf["city"] == [2, 1, 1, 2, 0, 1]
    with pytest.raises(ValueError, match="already a ClassLabel"):
        ours.class_encode_column("city")
    nulls = StableDataset.from_dict({"c": ["b", None, "a"]})
    assert nulls.class_encode_column("c")["c"] == [1, None, 0]
    kept = nulls.class_encode_column("c", include_nulls=True)
    assert kept.features["c"].names == ["None", "a", "b"] and kept["c"] == [2, 0, 1]


def test_dataset_dict_class_encode_uses_names_of_every_split():
    dd = DatasetDict({"train": StableDataset.from_dict({"c": ["x", "y"]}),
                      "test": StableDataset.from_dict({"c": ["z", "x"]})})
    encoded = dd.class_encode_column("c")
    assert encoded["train"].features["c"].names == ["x", "y", "z"] == encoded["test"].features["c"].names
    assert encoded["train"]["c"] == [0, 1] and encoded["test"]["c"] == [2, 0]
    assert dd.rename_column("c", "k").column_names == {"train": ["k"], "test": ["k"]}
    assert dd.unique("c") == {"train": ["x", "y"], "test": ["z", "x"]}
    assert dd.sort("c")["test"]["c"] == ["x", "z"]


def test_with_transform_as_hf(people):
    def shout(batch):
        return {"loud": [n.upper() for n in batch["name"]]}

    view = people.with_transform(shout)
    assert view[0] == {"loud": "ANN"} and view[1:3] == {"loud": ["BOB", "CID"]}
    assert view["loud"] == ["ANN", "BOB", "CID", "DEE", "EVE", "FAY"]
    assert [r["loud"] for r in view][-1] == "FAY" and view.__getitems__([5, 0]) == [{"loud": "FAY"}, {"loud": "ANN"}]
    both = people.with_transform(shout, columns=["name"], output_all_columns=True)
    assert both[3] == {"age": 47, "city": "rome", "loud": "DEE"}
    assert people[0] == {"name": "ann", "age": 31, "city": "rome"}  # the source is unchanged
    people.set_transform(shout)
    assert people[0] == {"loud": "ANN"} and people.select([2])[0] == {"loud": "CID"}
    assert people.with_format("python")[0]["name"] == "ann"  # a format resets the transform, as in HF
    people.set_transform(None)
    assert people[0]["name"] == "ann"
    with pytest.raises(KeyError, match=r"with_transform: no column\(s\) \['x'\]"):
        people.with_transform(shout, columns=["x"])


def test_train_test_split_without_shuffle_and_stratified():
    datasets = pytest.importorskip("datasets")
    ds = StableDataset.from_dict({"i": list(range(10))})
    hf = datasets.Dataset.from_dict({"i": list(range(10))})
    for kwargs in ({"test_size": 3}, {"test_size": 0.25}, {"train_size": 0.5, "test_size": 0.3}):
        ours, theirs = ds.train_test_split(shuffle=False, **kwargs), hf.train_test_split(shuffle=False, **kwargs)
        assert ours["train"]["i"] == theirs["train"]["i"] and ours["test"]["i"] == theirs["test"]["i"], kwargs
    labels = [0] * 60 + [1] * 30 + [2] * 10
    data = StableDataset.from_dict({"i": list(range(100)), "y": labels},
                                   features={"i": sds.Value("int64"), "y": sds.ClassLabel(num_classes=3)})
    split = data.train_test_split(test_size=0.2, stratify_by_column="y", seed=3)
    test_labels = np.bincount(split["test"]["y"], minlength=3)
    assert test_labels.tolist() == [12, 6, 2] and np.bincount(split["train"]["y"]).tolist() == [48, 24, 8]
    assert sorted(split["train"]["i"] + split["test"]["i"]) == list(range(100))
    assert data.train_test_split(test_size=0.2, stratify_by_column="y", seed=3)["test"]["i"] == split["test"]["i"]
    with pytest.raises(ValueError, match="must be a ClassLabel column"):
        data.train_test_split(test_size=0.2, stratify_by_column="i")
    with pytest.raises(ValueError, match="needs shuffle=True"):
        data.train_test_split(test_size=0.2, stratify_by_column="y", shuffle=False)


def test_map_input_columns_string_and_remove_columns_as_hf(people):
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_dict(people.to_dict())
    ours = people.map(lambda age: {"older": age + 1}, input_columns="age")
    assert ours["older"] == [a + 1 for a in people["age"]] == hf.map(lambda age: {"older": age + 1},
                                                                      input_columns="age")["older"]
    assert people.filter(lambda age: age > 30, input_columns="age")["name"] == ["ann", "cid", "dee"]

    def in_place(row):
        row["n"] = len(row["name"])
        return row

    for fn in (in_place, lambda row: {"age": row["age"], "n": 1}):
        assert people.map(fn, remove_columns=["age"]).column_names == \
            hf.map(fn, remove_columns=["age"]).column_names
    assert people.map(in_place, remove_columns=["age"]).column_names == ["name", "city", "n"]
    assert people.map(lambda b: b, batched=True, remove_columns=["age"]).column_names == ["name", "city"]


@pytest.mark.parametrize(("spec", "n", "expected"), [
    ("train[10%:20]", 200, (20, 40)),  # a percent on either bound makes both percentages
    ("train[10:20%]", 200, (20, 40)),
    ("train[:33%](closest)", 200, (0, 66)),
    ("train[:33%](pct1_dropremainder)", 250, (0, 66)),  # 33 blocks of 250 // 100 rows
    ("train[:33%]", 250, (0, 82)),  # closest: round(82.5) is 82, halves to even
    ("train[-1%:](pct1_dropremainder)", 199, (198, 199)),
    ("train[1_0:2_0]", 100, (10, 20)),
])
def test_split_rounding_and_mixed_bounds(spec, n, expected):
    part, = parse_split(spec)
    assert part.bounds(n) == expected


def test_split_strings_agree_with_hf():
    arrow_reader = pytest.importorskip("datasets.arrow_reader")
    specs = ["train[:10%]", "train[10%:]", "train[10%:20]", "train[-5%:]", "train[33%:67%]",
             "train[:33%](pct1_dropremainder)", "train[:-1%](pct1_dropremainder)", "train[2:-3]", "train[-200:]"]
    for n in (0, 3, 95, 100, 150, 1234):
        for spec in specs:
            try:
                theirs = [(a.from_, max(a.from_, a.to)) for a in
                          arrow_reader.ReadInstruction.from_spec(spec).to_absolute({"train": n})]
            except ValueError:
                theirs = "error"
            try:
                ours = [p.bounds(n) for p in parse_split(spec)]
            except ValueError:
                ours = "error"
            assert ours == theirs, (spec, n)
    with pytest.raises(ValueError, match="needs percent bounds"):
        parse_split("train[1:5](closest)")
    with pytest.raises(ValueError, match="rounding must be one of"):
        parse_split("train[:5%](nearest)")
    with pytest.raises(ValueError, match="at least 100"):
        parse_split("train[:5%](pct1_dropremainder)")[0].bounds(99)


def test_an_old_cache_with_sorted_metadata_opens_in_stored_column_order(people):
    # caches written before the declared order was kept list their features sorted by name
    directory = people.cache_dirs[0]
    path = directory / "_metadata.json"
    data = json.loads(path.read_text())
    data["features"] = dict(sorted(data["features"].items()))
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    reopened = sds.open_cache(directory)
    assert reopened.column_names == ["name", "age", "city"] and reopened[0] == people[0]


def test_column_views_keep_the_format_and_its_columns(people):
    numpy_view = people.with_format("numpy", columns=["age", "name"]).rename_column("age", "years")
    assert numpy_view.format == {"type": "numpy", "columns": ("years", "name"), "decode": True,
                                 "output_all_columns": False}
    assert numpy_view[:2]["years"].tolist() == [31, 25]
    assert people.with_format("numpy").remove_columns("name").format["type"] == "numpy"


def test_unique_of_list_and_struct_columns(tmp_path):
    """Before: ArrowNotImplementedError "Function 'unique' has no kernel matching input types (list<item: int64>)"."""
    ds = StableDataset.from_dict({"tags": [[1, 2], [1], [1, 2], None, [1]],
                                  "meta": [{"a": 1}, {"a": 2}, {"a": 1}, {"a": 1}, None]}, cache_dir=tmp_path)
    assert ds.unique("tags") == [[1, 2], [1], None]
    assert ds.unique("meta") == [{"a": 1}, {"a": 2}, None]


def test_a_missing_split_of_a_dataset_dict_names_the_splits_there_are(tmp_path):
    dd = DatasetDict({"train": StableDataset.from_dict({"x": [1]}, cache_dir=tmp_path)})
    with pytest.raises(KeyError, match=r"no split 'validation'; splits are \['train'\]"):
        dd["validation"]
    assert dd.get("validation") is None and "validation" not in dd


def test_reset_format_works_in_place_like_set_format(tmp_path):
    """Before: set_format changed the dataset but reset_format returned a new view and left it as it
    was, so after ds.set_format("numpy"); ds.reset_format() rows were still numpy (Hugging Face
    resets in place)."""
    ds = StableDataset.from_dict({"n": [1, 2, 3]}, cache_dir=tmp_path)
    ds.set_format("numpy")
    assert isinstance(ds[0:2]["n"], np.ndarray)
    assert ds.reset_format() is None
    assert ds[0:2] == {"n": [1, 2]} and ds.format["type"] == "python"
    dd = DatasetDict({"train": ds})
    dd.set_format("numpy")
    dd.reset_format()
    assert dd["train"][0:2] == {"n": [1, 2]}


def test_map_returning_other_columns_for_some_rows_names_the_column():
    ds = StableDataset.from_dict({"a": list(range(3000))})
    with pytest.raises(StableDatasetsError, match=r"map: the function returned column 'b' for some rows and not "
                                                  r"for others \(one returned \['a'\]\)"):
        ds.map(lambda r: {"a": r["a"], "b": 1} if r["a"] != 2 else {"a": 1})
    with pytest.raises(StableDatasetsError, match=r"example key 2500, field 'b': missing key 'b'"):
        ds.map(lambda r: {"a": r["a"], "b": 1} if r["a"] != 2500 else {"a": 1})
