"""Hugging Face `datasets` behaviour where we claim it, checked against the real package.

Each test takes its inputs and expected values from a test in Hugging Face's own suite (named
in a comment) and, where running `datasets` on the same input is cheap and offline, computes the
expected value with it side by side, so a change on either side shows up here. Deliberate
differences are asserted as such (and listed in docs/in-memory-and-hf.md and
docs/load-your-own-files.md under "Differences from Hugging Face datasets").
"""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets import StableDataset
from stable_datasets.dataset.splits import parse_split
from tests.fixtures.tars import write_tar

datasets = pytest.importorskip("datasets", minversion="5")  # the behaviour these tests pin is datasets 5's


# -- split strings ----------------------------------------------------------------------------
def _hf_bounds(spec: str, name2len: dict[str, int]) -> list[tuple[str, int, int]]:
    from datasets.arrow_reader import ReadInstruction

    absolute = ReadInstruction.from_spec(spec).to_absolute(name2len)
    return [(a.splitname, a.from_, max(a.from_, a.to)) for a in absolute]


def _our_bounds(spec: str, name2len: dict[str, int]) -> list[tuple[str, int, int]]:
    return [(part.name, *part.bounds(name2len[part.name])) for part in parse_split(spec)]


_SPLIT_SPECS = [
    # tests/test_arrow_reader.py::test_read_instruction_spec, ::test_make_file_instructions, and
    # BaseReaderTest.test_read / test_read_files ("test[:33%]", "train+test[10:20]")
    "train", "test[:33%]", "train+test[10:20]", "train[2:10]", "train[15%:-20%]", "train[-80%:10%]",
    "train[:10%](closest)", "train[:10%](pct1_dropremainder)",
    "train[:10%](pct1_dropremainder)+test[-10%:](pct1_dropremainder)",
    "train[-20%:]", "train[:200]", "train[:-200]", "train[-200:]",
    # rounding at halves, mixed units, empty and reversed ranges, repeated splits
    "train[:50%]", "train[:33%]", "train[33%:67%]", "train[-33%:]", "train[:-1%]", "train[1%:-1%](pct1_dropremainder)",
    "train[10%:20]", "train[10:20%]", "train[-5%:5]", "train[50:10]", "train[:0%]", "train[100%:]", "train[:]",
    "train[:10]+train[5:15]", "train[:1_0]", "train[-99%:](pct1_dropremainder)", "train[:-100%]",
]


@pytest.mark.parametrize("spec", _SPLIT_SPECS)
@pytest.mark.parametrize("train_rows", [1, 3, 7, 33, 95, 100, 101, 150, 250, 1005])
def test_split_string_bounds_match_read_instruction(spec, train_rows):
    # tests/test_arrow_reader.py::test_read_instruction_spec and ::test_make_file_instructions:
    # ReadInstruction.from_spec(spec).to_absolute(...) gives the rows Hugging Face reads
    name2len = {"train": train_rows, "test": 100}
    try:
        expected = _hf_bounds(spec, name2len)
    except ValueError as exc:  # pct1_dropremainder under 100 rows: both refuse
        assert "pct1_dropremainder" in spec and train_rows < 100, exc
        with pytest.raises(ValueError, match="pct1_dropremainder"):
            _our_bounds(spec, name2len)
        return
    assert _our_bounds(spec, name2len) == expected


@pytest.mark.parametrize("spec", ["train[:150%]", "train[-101%:]", "train[:10](closest)", "train[:10%](nearest)",
                                  "train[1:2:3]", "train[a:b]", "train[:10%](pct1_dropremainder"])
def test_split_strings_hf_refuses_are_value_errors(spec):
    # tests/test_arrow_reader.py: ReadInstruction raises ValueError for a percent outside [-100, 100],
    # a rounding on absolute bounds, an unknown rounding and a spec it cannot parse
    from datasets.arrow_reader import ReadInstruction

    with pytest.raises(ValueError):
        ReadInstruction.from_spec(spec).to_absolute({"train": 200})
    with pytest.raises(ValueError):
        _our_bounds(spec, {"train": 200})


def test_split_strings_select_the_rows_hf_selects(tmp_path):
    # BaseReaderTest.test_read_files ("train+test[10:20]" reads 110 rows) and test_read ("test[:33%]"),
    # run end to end on a loader: rows and their order, not just counts
    for split, n in (("train", 100), ("test", 100)):
        (tmp_path / f"{split}.csv").write_text("i\n" + "".join(f"{split}{k}\n" for k in range(n)))
    files = {"train": str(tmp_path / "train.csv"), "test": str(tmp_path / "test.csv")}
    for spec in ("train+test[10:20]", "test[:33%]", "train[10%:20]+train[:3]", "test[-10%:](pct1_dropremainder)"):
        ours = sds.load_dataset("csv", data_files=files, split=spec)["i"]
        hf = datasets.load_dataset("csv", data_files=files, split=spec, cache_dir=str(tmp_path / "hf"))["i"]
        assert ours == hf, spec


# -- train_test_split ---------------------------------------------------------------------------
_SIZES = [(10, None), (0.5, None), (None, 10), (0.25, None), (None, 0.3), (0.1, 0.2), (3, 5), (0.33, 0.33),
          (None, None), (1, None), (None, 29), (0.01, None), (0.001, None)]


@pytest.mark.parametrize(("test_size", "train_size"), _SIZES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_train_test_split_sizes_and_rows_match_hf(test_size, train_size, shuffle):
    # tests/test_arrow_dataset.py::test_train_test_split (30 rows "my_name-train_<i>"): test_size=10 and 0.5,
    # train_size=10, shuffle=False gives train first; with a seed, the same generator (numpy default_rng)
    # draws the same permutation, so the rows match too
    data = {"filename": [f"my_name-train_{i}" for i in range(30)]}
    hf = datasets.Dataset.from_dict(data)
    ds = StableDataset.from_dict(data)
    kwargs = {"test_size": test_size, "train_size": train_size, "shuffle": shuffle, "seed": 42 if shuffle else None}
    expected = hf.train_test_split(**kwargs)
    got = ds.train_test_split(**kwargs)
    assert list(got) == list(expected) == ["train", "test"]
    for side in ("train", "test"):
        assert got[side]["filename"] == expected[side]["filename"], side
        assert got[side].features == ds.features


@pytest.mark.parametrize(("test_size", "train_size"), [(0, None), (30, None), (31, None), (1.0, None), (0.0, None),
                                                       (-1, None), (None, 30), (0.7, 0.7), (20, 20), (1.5, None),
                                                       (0.999, None)])
def test_train_test_split_sizes_hf_refuses_are_value_errors(test_size, train_size):
    # tests/test_arrow_dataset.py::test_train_test_split: sizes that do not fit raise ValueError
    data = {"x": list(range(30))}
    with pytest.raises(ValueError):
        datasets.Dataset.from_dict(data).train_test_split(test_size=test_size, train_size=train_size)
    with pytest.raises(ValueError):
        StableDataset.from_dict(data).train_test_split(test_size=test_size, train_size=train_size)


def test_train_test_split_seed_determinism():
    ds = StableDataset.from_dict({"x": list(range(50))})
    first = ds.train_test_split(test_size=0.2, seed=7)
    again = ds.train_test_split(test_size=0.2, seed=7)
    other = ds.train_test_split(test_size=0.2, seed=8)
    assert first["test"]["x"] == again["test"]["x"] and first["train"]["x"] == again["train"]["x"]
    assert first["test"]["x"] != other["test"]["x"]
    assert sorted(first["train"]["x"] + first["test"]["x"]) == list(range(50))


def test_train_test_split_stratified_counts_per_class_match_hf():
    # tests/test_arrow_dataset.py::test_train_test_split_startify: every class keeps its share on both sides
    labels = [0] * 10 + [1] * 6 + [2] * 4 + [3] * 15
    features = {"label": sds.ClassLabel(names=["a", "b", "c", "d"]), "i": sds.Value("int64")}
    ds = StableDataset.from_dict({"label": labels, "i": list(range(len(labels)))}, features=features)
    hf = datasets.Dataset.from_dict({"label": labels, "i": list(range(len(labels)))},
                                    features=datasets.Features({"label": datasets.ClassLabel(names=list("abcd")),
                                                                "i": datasets.Value("int64")}))
    for test_size in (0.33, 0.5, 8, 0.2):
        ours = ds.train_test_split(test_size=test_size, stratify_by_column="label", seed=0)
        theirs = hf.train_test_split(test_size=test_size, stratify_by_column="label", seed=0)
        for side in ("train", "test"):
            assert len(ours[side]) == len(theirs[side])
            assert sorted(ours[side]["label"]) == sorted(theirs[side]["label"]), (test_size, side)
        assert sorted(ours["train"]["i"] + ours["test"]["i"]) == list(range(len(labels)))


def test_train_test_split_stratify_errors_are_value_errors():
    # tests/test_arrow_dataset.py::test_errors_train_test_split_stratify: an unknown column, a column that is
    # not a ClassLabel, a class with one row, and a test side smaller than the number of classes
    labels = {"label": [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]}
    features = {"label": sds.ClassLabel(num_classes=5)}
    ds = StableDataset.from_dict(labels, features=features)
    with pytest.raises((ValueError, KeyError)):
        ds.train_test_split(0.33, stratify_by_column="labl")
    with pytest.raises(ValueError):
        StableDataset.from_dict(labels).train_test_split(0.33, stratify_by_column="label")
    with pytest.raises(ValueError):
        StableDataset.from_dict({"label": [0, 1, 1, 1]}, features={"label": sds.ClassLabel(num_classes=2)}) \
            .train_test_split(0.5, stratify_by_column="label")
    with pytest.raises(ValueError):
        ds.train_test_split(0.3, stratify_by_column="label")  # 3 test rows for 5 classes



# -- column operations ------------------------------------------------------------------------
_MULTI = {"col_1": [3, 2, 1, 0], "col_2": ["a", "b", "c", "d"], "col_3": [False, True, False, True]}


def _pair(data, hf_features=None, features=None):
    hf = datasets.Dataset.from_dict(data, features=hf_features)
    return hf, StableDataset.from_dict(data, features=features)


@pytest.mark.parametrize("operation", [
    # tests/test_arrow_dataset.py::test_class_encode_column, test_rename_columns ("not_there"), and the missing
    # column checks of select_columns / remove_columns / sort / unique / cast_column / map(remove_columns=)
    lambda ds: ds.class_encode_column("does not exist"),
    lambda ds: ds.rename_columns({"not_there": "new_name"}),
    lambda ds: ds.rename_column("not_there", "new_name"),
    lambda ds: ds.select_columns(["nope"]),
    lambda ds: ds.remove_columns("nope"),
    lambda ds: ds.sort("nope"),
    lambda ds: ds.unique("nope"),
    lambda ds: ds["nope"],
    lambda ds: ds.with_format("numpy", columns=["nope"]),
    lambda ds: ds.with_transform(lambda batch: batch, columns=["nope"]),
    lambda ds: ds.map(lambda row: row, remove_columns=["nope"]),
    lambda ds: ds.train_test_split(test_size=2, stratify_by_column="nope"),
])
def test_a_missing_column_is_a_value_error_as_in_hf_and_a_key_error(operation):
    hf, ds = _pair(_MULTI)
    with pytest.raises(ValueError):
        operation(hf)
    with pytest.raises(ValueError, match=r"nope|not_there|does not exist") as caught:
        operation(ds)
    assert isinstance(caught.value, KeyError)  # what Python's mappings raise, kept for those who catch it
    assert "columns are ['col_1', 'col_2', 'col_3']" in str(caught.value)
    assert not str(caught.value).startswith(("'", '"'))  # not quoted as a plain KeyError would be


@pytest.mark.parametrize("operation", [
    # tests/test_arrow_dataset.py::test_rename_columns (empty name, duplicates), test_sort (reverse list length),
    # test_class_encode_column (an array / sequence column)
    lambda ds: ds.rename_columns({"col_1": ""}),
    lambda ds: ds.rename_columns({"col_1": "new_name", "col_2": "new_name"}),
    lambda ds: ds.rename_column("col_1", "col_2"),
    lambda ds: ds.sort(["col_1", "col_2", "col_3"], reverse=[False]),
    lambda ds: ds.add_column("col_1", [1, 2, 3, 4]),
    lambda ds: ds.add_column("col_4", [1]),
])
def test_column_operation_refusals_are_value_errors_as_in_hf(operation):
    hf, ds = _pair(_MULTI)
    with pytest.raises(ValueError):
        operation(hf)
    with pytest.raises(ValueError):
        operation(ds)


def test_class_encode_column_of_a_sequence_is_a_value_error():
    # tests/test_arrow_dataset.py::test_class_encode_column (array_features): a List column cannot be encoded
    hf, ds = _pair({"col_3": [[3, 2, 1, 0]] * 4})
    for side in (hf, ds):
        with pytest.raises(ValueError):
            side.class_encode_column("col_3")


@pytest.mark.parametrize(("column", "names", "ids"), [
    # tests/test_arrow_dataset.py::test_class_encode_column: names are str(value), sorted as text
    ("col_1", ["0", "1", "2", "3"], [3, 2, 1, 0]),
    ("col_2", ["a", "b", "c", "d"], [0, 1, 2, 3]),
    ("col_3", ["False", "True"], [0, 1, 0, 1]),
])
def test_class_encode_column_names_and_ids(column, names, ids):
    hf, ds = _pair(_MULTI)
    encoded, expected = ds.class_encode_column(column), hf.class_encode_column(column)
    assert encoded.features[column].names == expected.features[column].names == names
    assert encoded[column] == list(expected[column]) == ids
    assert encoded.column_names == list(_MULTI)


@pytest.mark.parametrize("values", [[10, 9, 100, 2], [1.5, 0.5, 10.0, 2.0], ["b", "a", "B", "a"]])
def test_class_encode_column_orders_names_as_text_like_hf(values):
    hf, ds = _pair({"x": values})
    encoded, expected = ds.class_encode_column("x"), hf.class_encode_column("x")
    assert encoded.features["x"].names == expected.features["x"].names
    assert encoded["x"] == list(expected["x"])


@pytest.mark.parametrize("include_nulls", [False, True])
def test_class_encode_column_with_none(include_nulls):
    # tests/test_arrow_dataset.py::test_class_encode_column_with_none
    hf, ds = _pair({"col_1": ["a", "b", "c", None, "d", None]})
    encoded = ds.class_encode_column("col_1", include_nulls=include_nulls)
    expected = hf.class_encode_column("col_1", include_nulls=include_nulls)
    assert encoded.features["col_1"].names == expected.features["col_1"].names
    assert encoded["col_1"] == list(expected["col_1"])
    assert encoded.unique("col_1") == expected.unique("col_1")
    assert (None in encoded.unique("col_1")) == (not include_nulls)


@pytest.mark.parametrize("null_placement", ["first", "last", "at_start", "at_end"])
def test_sort_with_none(null_placement):
    # tests/test_arrow_dataset.py::test_sort_with_none
    hf, ds = _pair({"col_1": ["item_2", "item_3", "item_1", None, "item_4", None]})
    got = ds.sort("col_1", null_placement=null_placement)["col_1"]
    assert got == list(hf.sort("col_1", null_placement=null_placement)["col_1"])
    if null_placement in ("first", "at_start"):
        assert got == [None, None, "item_1", "item_2", "item_3", "item_4"]
    else:
        assert got == ["item_1", "item_2", "item_3", "item_4", None, None]


@pytest.mark.parametrize(("columns", "reverse"), [
    # tests/test_arrow_dataset.py::test_sort: one key, reversed, several keys with a reverse flag each
    ("filename", False), ("filename", True), (["col_3", "col_1"], [True, False]), (["col_1", "col_2"], True),
    ("n", False), ("n", True), ("f", False),
])
def test_sort_matches_hf(columns, reverse):
    data = {"filename": [f"my_name-train_{i}" for i in (8, 9, 0, 3, 1, 2, 5, 7, 6, 4)],
            "col_1": [3, 2, 1, 0, 3, 2, 1, 0, 3, 2], "col_2": list("abcdefghij"),
            "col_3": [False, True] * 5, "n": [2, None, 1, 3, None, 0, 5, 5, 1, 2],
            "f": [2.0, float("nan"), 1.0, None, -0.0, 0.0, 1.5, float("inf"), 3.0, -1.0]}
    hf, ds = _pair(data)
    expected = hf.sort(columns, reverse=reverse)
    assert ds.sort(columns, reverse=reverse)["col_2"] == list(expected["col_2"])


@pytest.mark.parametrize("values", [[3, 1, None, 3, 2, None, 1], ["b", "a", "b", None], [1.5, float("nan"), 1.5],
                                    [True, False, True]])
def test_unique_in_order_of_first_appearance_like_hf(values):
    hf, ds = _pair({"x": values})
    assert repr(ds.unique("x")) == repr(hf.unique("x"))


def test_column_choices_match_hf():
    # tests/test_arrow_dataset.py::test_select_columns, test_remove_columns, test_rename_column(s), test_add_column
    hf, ds = _pair(_MULTI)
    for operation in (lambda d: d.select_columns("col_1"), lambda d: d.select_columns(["col_3", "col_2", "col_1"]),
                      lambda d: d.remove_columns("col_1"), lambda d: d.remove_columns(["col_3", "col_1"]),
                      lambda d: d.rename_column("col_1", "new_name"),
                      lambda d: d.rename_columns({"col_1": "new_name", "col_2": "new_name2"}),
                      lambda d: d.rename_columns({"col_1": "col_2", "col_2": "col_1"}),
                      lambda d: d.add_column("col_4", ["x", "y", "z", "w"])):
        got, expected = operation(ds), operation(hf)
        assert got.column_names == expected.column_names
        assert got.to_dict() == expected.to_dict()
        assert got.to_list() == expected.to_list()
    assert ds.column_names == list(_MULTI)  # the source is unchanged


# -- cast_column between Value types ----------------------------------------------------------
@pytest.mark.parametrize(("values", "dtype"), [
    # tests/test_arrow_dataset.py::test_cast (int64 -> float64) and Arrow's safe casts HF's cast_column makes
    ([1, 2, 3], "float64"), ([1, 2, 3], "int8"), ([3, 4], "float32"), ([0.1], "float16"), ([1.0, 2.0], "int32"),
    ([1, 2, None], "string"), ([1.5, 2.25], "string"), ([True, False], "string"), (["1", "2"], "int64"),
    (["1.5", "-2"], "float64"), ([True, False, None], "int64"), ([1, 0, None], "bool"), (["true", "false"], "bool"),
    (["a", "b"], "large_string"), ([2**40], "float64"),
])
def test_cast_column_between_value_types_matches_hf(values, dtype):
    hf, ds = _pair({"x": values, "keep": list(range(len(values)))})
    got = ds.cast_column("x", sds.Value(dtype))
    expected = hf.cast_column("x", datasets.Value(dtype))
    assert got.features["x"] == sds.Value(dtype)
    assert got.column_names == ["x", "keep"] and got["keep"] == list(range(len(values)))
    assert repr(got["x"]) == repr(list(expected["x"]))


@pytest.mark.parametrize(("values", "dtype", "row", "message"), [
    # where Arrow's safe cast refuses, HF raises ArrowInvalid (a ValueError); ours names the row
    ([1, 2, 300], "int8", 2, "value 300 is out of range for int8"),
    ([1, -1], "uint8", 1, "value -1 is out of range for uint8"),
    ([1.0, 1.5, None], "int64", 1, "value 1.5 cannot be cast to int64"),
    (["1.5", "x"], "float64", 1, "value 'x' cannot be cast to float64"),
    ([2**53 + 1], "float64", 0, "value 9007199254740993 cannot be stored as float64"),
])
def test_cast_column_refusals_name_the_row(values, dtype, row, message):
    hf, ds = _pair({"x": values})
    with pytest.raises(ValueError):
        hf.cast_column("x", datasets.Value(dtype))
    with pytest.raises(ValueError, match=rf"example key {row}, field 'x': {message}"):
        ds.cast_column("x", sds.Value(dtype))


def test_cast_column_deliberate_differences():
    # Arrow's cast (so HF's) turns 1e40 into inf in float32 and 2 into True: both would lose the value
    hf, ds = _pair({"x": [1.5, 1e40], "n": [1, 2]})
    assert hf.cast_column("x", datasets.Value("float32"))["x"][1] == float("inf")
    with pytest.raises(ValueError, match=r"example key 1, field 'x': value 1e\+40 does not fit float32"):
        ds.cast_column("x", sds.Value("float32"))
    assert list(hf.cast_column("n", datasets.Value("bool"))["n"]) == [True, True]
    with pytest.raises(ValueError, match=r"example key 1, field 'n': value 2 is neither 0 nor 1"):
        ds.cast_column("n", sds.Value("bool"))
    # a ClassLabel cast to text gives its names (HF gives the ids as text: "1", "0")
    hf, ds = _pair({"y": [1, 0]}, datasets.Features({"y": datasets.ClassLabel(names=["a", "b"])}),
                   {"y": sds.ClassLabel(names=["a", "b"])})
    assert list(hf.cast_column("y", datasets.Value("string"))["y"]) == ["1", "0"]
    assert ds.cast_column("y", sds.Value("string"))["y"] == ["b", "a"]
    # an id out of the ClassLabel's range is refused (HF keeps the 5 under a 2-class label)
    hf, ds = _pair({"y": [1, 0, 5]})
    assert list(hf.cast_column("y", datasets.ClassLabel(names=["a", "b"]))["y"]) == [1, 0, 5]
    with pytest.raises(ValueError, match=r"example key 2, field 'y': label 5 is out of range \[0, 2\)"):
        ds.cast_column("y", sds.ClassLabel(names=["a", "b"]))


@pytest.mark.parametrize(("values", "feature"), [(["b", "a", "b"], "names"), ([1, 0, 1], "ids")])
def test_cast_column_to_class_label_matches_hf(values, feature):
    hf, ds = _pair({"y": values})
    expected = hf.cast_column("y", datasets.ClassLabel(names=["a", "b"]))["y"]
    assert ds.cast_column("y", sds.ClassLabel(names=["a", "b"]))["y"] == list(expected) == [1, 0, 1]


# -- map and transforms -----------------------------------------------------------------------
def _upper(batch):
    return {k: [str(v).upper() for v in values] for k, values in batch.items()}


@pytest.mark.parametrize("read", [lambda d: d[0], lambda d: d[:2], lambda d: d[[3, 1]], lambda d: d["col_1"][:2],
                                  lambda d: list(d)[2]])
@pytest.mark.parametrize(("columns", "output_all"), [(["col_1"], False), (["col_1", "col_2"], False),
                                                     (["col_1"], True), (None, False), (["col_3"], True)])
def test_with_transform_reads_like_hf(read, columns, output_all):
    # tests/test_arrow_dataset.py::test_set_transform (upper-cased columns, dset[0], dset[:2], dset["col_1"][:2]),
    # with output_all_columns: the transform's columns come first, then the others, as HF orders them
    hf, ds = _pair(_MULTI)
    got = read(ds.with_transform(_upper, columns=columns, output_all_columns=output_all))
    expected = read(hf.with_transform(_upper, columns=columns, output_all_columns=output_all))
    assert repr(got) == repr(expected)
    ds.set_transform(_upper, columns=columns, output_all_columns=output_all)
    assert repr(read(ds)) == repr(expected)


def test_with_transform_other_columns_win_over_a_transform_output_of_the_same_name():
    hf, ds = _pair(_MULTI)

    def shadow(batch):
        return {"col_2": ["?"] * len(batch["col_1"]), "new": batch["col_1"]}

    expected = hf.with_transform(shadow, columns=["col_1"], output_all_columns=True)[1]
    assert list(ds.with_transform(shadow, columns=["col_1"], output_all_columns=True)[1].items()) == \
        list(expected.items()) == [("col_2", "b"), ("new", 2), ("col_3", True)]


@pytest.mark.parametrize("call", [
    # tests/test_arrow_dataset.py::test_map_input_columns and ::test_map_remove_columns
    lambda d: d.map(lambda col_1: {"label": col_1 % 2}, input_columns="col_1"),
    lambda d: d.map(lambda a, b: {"s": f"{a}{b}"}, input_columns=["col_1", "col_2"]),
    lambda d: d.map(lambda x, i: {"name": x["col_2"] * 2, "id": i}, with_indices=True),
    lambda d: d.map(lambda x: x, remove_columns=["col_3"]),
    lambda d: d.map(lambda x: {"name": 1}, remove_columns=["col_1", "col_2", "col_3"]),
    lambda d: d.map(lambda x: {"col_1": x["col_1"] * 10}, remove_columns="col_1"),
    lambda d: d.map(lambda b: {"sq": [v * v for v in b["col_1"]]}, batched=True, batch_size=3),
    lambda d: d.map(lambda b: {"col_1": b["col_1"] * 2}, batched=True, batch_size=3,
                    remove_columns=["col_2", "col_3"]),
    lambda d: d.map(lambda b: {"n": [len(b["col_1"])]}, batched=True, batch_size=3,
                    remove_columns=["col_1", "col_2", "col_3"]),
    lambda d: d.map(lambda x: None),
    lambda d: d.map(lambda x: {"z": 0, "col_2": x["col_2"].upper()}),
    lambda d: d.filter(lambda v: v > 1, input_columns="col_1"),
    lambda d: d.filter(lambda b: [v % 2 == 1 for v in b["col_1"]], batched=True, batch_size=3),
    lambda d: d.filter(lambda x, i: i != 2, with_indices=True),
])
def test_map_and_filter_match_hf(call):
    hf, ds = _pair(_MULTI)
    got, expected = call(ds), call(hf)
    assert got.column_names == expected.column_names
    assert got.to_dict() == expected.to_dict()
    assert got.features == sds.Features.from_dict(expected.features.to_dict())


# -- generic loaders: the same files through both ------------------------------------------------
def _hf_load(tmp_path, kind, files, **options):
    datasets.disable_progress_bars()
    return datasets.load_dataset(kind, data_files=files, split="train", cache_dir=str(tmp_path / "hf-cache"), **options)


def _same_rows(ours, hf):
    """Column order, features (Hugging Face 5 reads text as large_string, which holds the same values) and rows."""
    hf_features = sds.Features.from_dict(json_roundtrip(hf.features.to_dict()))
    assert ours.column_names == hf.column_names
    assert ours.features == hf_features
    assert ours.to_dict() == hf.to_dict()


def json_roundtrip(value):
    import json

    return json.loads(json.dumps(value).replace('"large_string"', '"string"'))


def _write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    with open(path, "w", encoding=encoding, newline="") as fh:
        fh.write(text)
    return str(path)


_CSV_FILE = "header1,header2\n1,2\n10,20\n"  # tests/packaged_modules/test_csv.py fixture csv_file


@pytest.mark.parametrize(("text", "options"), [
    # tests/packaged_modules/test_csv.py (csv_file) with the pandas options HF passes through
    (_CSV_FILE, {}), (_CSV_FILE, {"header": None}), (_CSV_FILE, {"names": ["a", "b"]}),
    (_CSV_FILE, {"column_names": ["a", "b"]}), (_CSV_FILE, {"names": ["a", "b"], "header": 0}),
    (_CSV_FILE, {"skiprows": 1}), (_CSV_FILE, {"skiprows": 1, "header": None}),
    ("a\tb\n1\tx\n2\ty\n", {"sep": "\t"}), ("a\tb\n1\tx\n2\ty\n", {"delimiter": "\t"}), ("a;b\n1;x\n", {}),
    # quoting: a delimiter and doubled quotes inside quotes, and an escape character
    ('a,b\n"x, y",1\n"he said ""hi""",2\n\'s\',3\n', {}), ('a,b\n"x\\"y",1\n', {"escapechar": "\\"}),
    # nulls: pandas' default markers, na_values added to them, keep_default_na=False
    ("a,b\nq,NA\nr,n/a\nNULL,x\n,y\nfoo,None\n", {}),
    ("a,b\nq,NA\nr,n/a\nNULL,x\n,y\nfoo,None\n", {"na_values": ["foo"]}),
    ("a,b\nq,NA\nr,n/a\nNULL,x\n,y\nfoo,None\n", {"na_values": "foo"}),
    ("a,b\nq,NA\nr,n/a\nNULL,x\n,y\nfoo,None\n", {"na_values": ["foo"], "keep_default_na": False}),
    ("a,b\nq,x\n-,y\n", {"na_values": ["-"], "keep_default_na": False}),
    # types, line ends, byte order mark, blank lines, spaces in the header, another encoding
    ("a,b,c\nTrue,true,1\nFalse,false,0\n", {}), ("a,b,c\n1,1.5,007\n2,,010\n", {}), ("d\n2020-01-01\n", {}),
    ("a,b\r\n1,2\r\n3,4\r\n", {}), ("\ufeffa,b\n1,2\n", {}), ("a,b\n1,2\n\n3,4\n\n", {}), ("a, b\n1, 2\n", {}),
    ("a\n1\nx\n", {}), ("label\ngood\nbad\ngood\n", {}),
])
def test_csv_loader_matches_hf(tmp_path, text, options):
    path = _write(tmp_path, "file.csv", text)
    _same_rows(sds.load_dataset("csv", data_files=path, split="train", **options),
               _hf_load(tmp_path, "csv", path, **options))


def test_csv_latin1_matches_hf(tmp_path):
    path = _write(tmp_path, "file.csv", "a\ncafé\n", encoding="latin-1")
    _same_rows(sds.load_dataset("csv", data_files=path, split="train", encoding="latin-1"),
               _hf_load(tmp_path, "csv", path, encoding="latin-1"))


def test_csv_cast_label_and_malformed_row(tmp_path):
    # tests/packaged_modules/test_csv.py::test_csv_cast_label and
    # ::test_csv_generate_tables_raises_error_with_malformed_csv
    path = _write(tmp_path, "csv_with_label.csv", "label\ngood\nbad\ngood\n")
    features = {"label": sds.ClassLabel(names=["good", "bad"])}
    assert sds.load_dataset("csv", data_files=path, split="train", features=features)["label"] == [0, 1, 0]
    hf_features = datasets.Features({"label": datasets.ClassLabel(names=["good", "bad"])})
    hf = _hf_load(tmp_path, "csv", path, features=hf_features)
    assert hf["label"] == [0, 1, 0]
    bad = _write(tmp_path, "malformed_file.csv", "header1,header2\n1,2\n10,20,\n")
    with pytest.raises(ValueError, match=r"malformed_file\.csv, line 3: expected 2 fields, got 3"):
        sds.load_dataset("csv", data_files=bad, split="train")


@pytest.mark.parametrize(("text", "hf_columns", "message"), [
    # deliberate: pandas renames a repeated header name ("a.1") and names an unnamed one ("Unnamed: 0");
    # we say which header name is wrong
    ("a,a\n1,2\n", ["a", "a.1"], r"line 1: column name 'a' appears more than once"),
    (",a\n0,x\n", ["Unnamed: 0", "a"], r"line 1: column 1 of the header has no name"),
])
def test_csv_header_names_pandas_invents_are_errors(tmp_path, text, hf_columns, message):
    path = _write(tmp_path, "file.csv", text)
    assert _hf_load(tmp_path, "csv", path).column_names == hf_columns
    with pytest.raises(ValueError, match=message):
        sds.load_dataset("csv", data_files=path, split="train")


def test_csv_int_column_with_nulls_stays_int(tmp_path):
    # deliberate: pandas turns an int column with an empty field into float64 (1.0, NaN, 3.0)
    path = _write(tmp_path, "file.csv", "a,b\n1,x\n,y\n3,z\n")
    assert _hf_load(tmp_path, "csv", path)["a"] == [1.0, None, 3.0]
    ours = sds.load_dataset("csv", data_files=path, split="train")
    assert ours.features["a"] == sds.Value("int64") and ours["a"] == [1, None, 3]


_LOREM = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\nUt enim ad minim veniam.\n"
          "Duis aute irure dolor.\nExcepteur sint occaecat.\n\nSecond paragraph:\nLorem ipsum dolor sit amet.\n"
          "Ut enim ad minim veniam.\n")  # the shape of tests/packaged_modules/test_text.py's text_file


@pytest.mark.parametrize("options", [{}, {"keep_linebreaks": True}, {"sample_by": "paragraph"},
                                     {"sample_by": "document"}, {"sample_by": "paragraph", "keep_linebreaks": True}])
@pytest.mark.parametrize("text", [_LOREM, "a\r\nb\r\n", "a\nb", "a\n\n\nb\n\n\n\nc", "a\r\n\r\nb\r\n",
                                  "form\x0cfeed\nline\u2028separator\nnel\x85x\nfs\x1cgs\x1drs\x1e\n", "\n\n",
                                  "x\ry\n"])
def test_text_loader_matches_hf(tmp_path, text, options):
    # tests/packaged_modules/test_text.py::test_text_linebreaks and ::test_text_sample_by: lines split at "\n" only
    # (after universal newlines), paragraphs at a blank line, documents whole
    path = _write(tmp_path, "text.txt", text)
    ours = sds.load_dataset("text", data_files=path, split="train", **options)
    try:
        expected = _hf_load(tmp_path, "text", path, **options)
    except ValueError as exc:  # HF refuses a split with no rows; ours is an empty one
        assert "corresponds to no data" in str(exc) and len(ours) == 0
        return
    _same_rows(ours, expected)


def test_text_sample_by_expected_values(tmp_path):
    # tests/packaged_modules/test_text.py::test_text_sample_by, the expected values as that test derives them
    path = _write(tmp_path, "text.txt", _LOREM)
    load = lambda **options: sds.load_dataset("text", data_files=path, split="train", **options)["text"]  # noqa: E731
    assert load() == _LOREM.splitlines()
    assert load(keep_linebreaks=True) == _LOREM.splitlines(keepends=True)
    assert load(sample_by="paragraph") == _LOREM.split("\n\n")
    assert load(sample_by="document") == [_LOREM]


# tests/packaged_modules/test_json.py: its fixtures and expected values (EXPECTED_ONE, _THREE, _LIST_OF_STRINGS)
_THREE_LINES = '{"col_1": -1}\n{"col_1": 1, "col_2": 2}\n{"col_1": 10, "col_2": 20}\n'
_THREE_ARRAY = '[\n    {"col_1": -1},\n    {"col_1": 1, "col_2": 2},\n    {"col_1": 10, "col_2": 20}\n]\n'
_STRINGS = '[\n    "First text.",\n    "Second text.",\n    "Third text."\n]'
_EXPECTED_ONE = {"col_1": [1], "col_2": [2]}
_EXPECTED_THREE = {"col_1": [-1, 1, 10], "col_2": [None, 2, 20]}
_EXPECTED_LIST_OF_STRINGS = {"text": ["First text.", "Second text.", "Third text."]}


@pytest.mark.parametrize(("name", "text", "options", "expected"), [
    ("file.json", '{\n    "col_1": 1,\n    "col_2": 2\n}\n', {}, _EXPECTED_ONE),  # json_file
    ("file.jsonl", _THREE_LINES, {}, _EXPECTED_THREE),  # jsonl_file
    ("file.ndjson", _THREE_LINES, {}, _EXPECTED_THREE),  # ndjson_file
    ("file_utf16_encoded.jsonl", _THREE_LINES, {"encoding": "utf-16"}, _EXPECTED_THREE),
    ("file_with_list_of_dicts.json", _THREE_ARRAY, {}, _EXPECTED_THREE),
    ("file_with_list_of_dicts_field.json", f'{{"field1": 1, "field2": "aabb", "field3": {_THREE_ARRAY}}}',
     {"field": "field3"}, _EXPECTED_THREE),
    ("file_with_list_of_strings.json", _STRINGS, {}, _EXPECTED_LIST_OF_STRINGS),
    ("file.json", f'{{"field1": 1, "field2": "aabb", "field3": {_STRINGS}}}', {"field": "field3"},
     _EXPECTED_LIST_OF_STRINGS),
    ("file.json", '{"field1": 1, "field2": "aabb", "field3": {"col_1": [-1, 1, 10], "col_2": [null, 2, 20]}}',
     {"field": "field3"}, _EXPECTED_THREE),
    ("file.json", '[{"ID": 0, "Language": "Language-0", "Topic": "Topic-0"}, '
                  '{"ID": 1, "Language": "Language-1", "Topic": "Topic-1"}]', {},
     {"ID": [0, 1], "Language": ["Language-0", "Language-1"], "Topic": ["Topic-0", "Topic-1"]}),
    ("file_with_bom.jsonl", '\ufeff{"col_1": [1, 2]}\n{"col_1": []}\n', {}, {"col_1": [[1, 2], []]}),
    ("latin.jsonl", '{"t": "café"}\n', {"encoding": "latin-1"}, {"t": ["café"]}),
    ("order.jsonl", '{"z": 1, "a": 2}\n{"a": 3, "z": 4, "m": 5}\n', {}, {"z": [1, 4], "a": [2, 3], "m": [None, 5]}),
    ("nested.jsonl", '{"a": {"b": [1, 2], "c": {"d": "x"}}}\n{"a": {"b": [], "c": {"d": null}}}\n', {},
     {"a": [{"b": [1, 2], "c": {"d": "x"}}, {"b": [], "c": {"d": None}}]}),
    ("numbers.jsonl", '{"a": 1, "l": [1, 2.5]}\n\n{"a": 2.5, "l": []}\n\n', {},
     {"a": [1.0, 2.5], "l": [[1.0, 2.5], []]}),
    ("late.json", '[{"a": null}, {"a": 2}]', {}, {"a": [None, 2]}),
])
def test_json_loader_matches_hf(tmp_path, name, text, options, expected):
    # tests/packaged_modules/test_json.py::test_json_generate_tables and ::test_json_generate_tables_with_sorted_columns
    encoding = options.get("encoding", "utf-8")
    path = _write(tmp_path, name, text, encoding=encoding)
    ours = sds.load_dataset("json", data_files=path, split="train", **options)
    assert ours.to_dict() == expected and ours.column_names == list(expected)
    _same_rows(ours, _hf_load(tmp_path, "json", path, **options))


def test_json_missing_features_are_null_columns(tmp_path):
    # tests/packaged_modules/test_json.py::test_json_generate_tables_with_missing_features
    features = {"col_1": sds.Value("int64"), "col_2": sds.Value("int64"), "missing_col": sds.Value("string")}
    for name, text, options in (("file.jsonl", _THREE_LINES, {}), ("file.json", _THREE_ARRAY, {}),
                                ("field.json", f'{{"field3": {_THREE_ARRAY}}}', {"field": "field3"})):
        path = _write(tmp_path, name, text)
        ours = sds.load_dataset("json", data_files=path, split="train", features=features, **options)
        assert ours.to_dict() == {**_EXPECTED_THREE, "missing_col": [None, None, None]}, name


@pytest.mark.parametrize(("text", "hf_values", "ours"), [
    # deliberate: HF 5 stores these as its Json feature; a column here has one type, so a number then a
    # string is an error naming the line (features= decides), and objects with other keys are one struct
    ('{"col_1": -1}\n{"col_1": 1}\n{"col_1": "foo"}\n', [-1, 1, "foo"], r"changed from number to string"),
    ('{"col_1": {"a": 0}}\n{"col_1": {"b": 0}}\n', [{"a": 0}, {"b": 0}], [{"a": 0, "b": None}, {"a": None, "b": 0}]),
])
def test_json_values_of_changing_types_are_one_type_here(tmp_path, text, hf_values, ours):
    path = _write(tmp_path, "file.jsonl", text)
    assert _hf_load(tmp_path, "json", path)["col_1"] == hf_values
    if isinstance(ours, str):
        with pytest.raises(ValueError, match=ours):
            sds.load_dataset("json", data_files=path, split="train")
    else:
        assert sds.load_dataset("json", data_files=path, split="train")["col_1"] == ours


# -- imagefolder ---------------------------------------------------------------------------------
def _png(path, value):
    import cv2
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((4, 5, 3), value, np.uint8))


def _image_rows(ds):
    import numpy as np

    return [{k: (int(np.asarray(v)[0, 0, 0]) if k == "image" else v) for k, v in row.items()} for row in ds]


def _same_image_rows(ours, hf):
    assert ours.column_names == hf.column_names
    assert {k: type(v).__name__ for k, v in ours.features.items()} == {k: type(v).__name__ for k, v in
                                                                       hf.features.items()}
    if "label" in ours.features and hasattr(ours.features["label"], "names"):
        assert ours.features["label"].names == hf.features["label"].names
    assert _image_rows(ours) == _image_rows(hf)


def _folder(root, layout):
    """Images named by path with a pixel value each; a `metadata.*` entry holds its text."""
    for name, content in layout.items():
        if name.rsplit("/", 1)[-1].startswith("metadata."):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(content)
        else:
            _png(root / name, content)
    return str(root)


_LABELLED = {"cat/image_cat.png": 10, "dog/image_dog.png": 20, "cat/b.png": 11}
_META_JSONL = ('{"file_name": "image_rgb.png", "caption": "Nice image"}\n'
               '{"file_name": "image_rgb2.png", "caption": "Nice second image"}\n'
               '{"file_name": "subdir/image_rgb3.png", "caption": "Nice third image"}\n')
_META_CSV = ("file_name,caption\nimage_rgb.png,Nice image\nimage_rgb2.png,Nice second image\n"
             "subdir/image_rgb3.png,Nice third image\n")


@pytest.mark.parametrize(("layout", "options"), [
    # tests/packaged_modules/test_imagefolder.py and test_folder_based_builder.py: labels from folder names
    # (test_inferring_labels_from_data_dirs), drop_labels (test_generate_examples_drop_labels), one label
    # (test_data_files_with_one_label_no_metadata), files at different levels
    # (test_data_files_with_different_levels_no_metadata), metadata.jsonl/.csv with files in a subdir
    # (data_files_with_one_split_and_metadata), drop_metadata, a "label" key in the metadata
    # (image_files_with_labels_and_duplicated_label_key_in_metadata), metadata missing an image
    (_LABELLED, {}), (_LABELLED, {"drop_labels": True}), (_LABELLED, {"drop_labels": False}),
    ({"cat/a.png": 10, "cat/b.png": 11}, {}), ({"cat/a.png": 10, "cat/b.png": 11}, {"drop_labels": False}),
    ({"a.png": 10, "sub/b.png": 11, "sub2/c.png": 12}, {}),
    ({"a.png": 10, "sub/b.png": 11, "sub2/c.png": 12}, {"drop_labels": False}),
    ({"image_rgb.png": 10, "image_rgb2.png": 11, "subdir/image_rgb3.png": 12, "metadata.jsonl": _META_JSONL}, {}),
    ({"image_rgb.png": 10, "image_rgb2.png": 11, "subdir/image_rgb3.png": 12, "metadata.csv": _META_CSV}, {}),
    ({"image_rgb.png": 10, "image_rgb2.png": 11, "subdir/image_rgb3.png": 12, "metadata.jsonl": _META_JSONL},
     {"drop_metadata": True}),
    ({"cat/image_cat.png": 10, "dog/image_dog.png": 20,
      "metadata.jsonl": '{"file_name": "cat/image_cat.png", "caption": "Nice image of a cat", "label": "Cat"}\n'
                        '{"file_name": "dog/image_dog.png", "caption": "Nice image of a dog", "label": "Dog"}\n'}, {}),
    ({"image_rgb.png": 10, "image_rgb2.png": 11,
      "metadata.jsonl": '{"file_name": "image_rgb.png", "caption": "Nice image"}\n'}, {}),
    ({f"{n}.png": i for i, n in enumerate(["b10", "a2", "a10", "B1", "c"])}, {}),  # file order
    ({f"{n}/x.png": i for i, n in enumerate(["b", "A", "a", "10", "9"])}, {}),  # class name order
])
def test_imagefolder_matches_hf(tmp_path, layout, options):
    root = _folder(tmp_path / "data", layout)
    _same_image_rows(sds.load_dataset("imagefolder", data_dir=root, split="train", **options),
                     datasets.load_dataset("imagefolder", data_dir=root, split="train",
                                           cache_dir=str(tmp_path / "hf-cache"), **options))


@pytest.mark.parametrize("layout", [
    # data_files_with_two_splits_and_metadata: train/ and test/ folders, each with its metadata
    {**{f"train/img{i}.png": i + 1 for i in range(3)}, **{f"test/img{i}.png": i + 4 for i in range(2)},
     "train/metadata.jsonl": "".join(f'{{"file_name": "img{i}.png", "caption": "train{i}"}}\n' for i in range(3)),
     "test/metadata.jsonl": "".join(f'{{"file_name": "img{i}.png", "caption": "test{i}"}}\n' for i in range(2))},
    {"train/cat/a.png": 1, "train/dog/b.png": 2, "test/cat/c.png": 3, "test/dog/d.png": 4},
])
def test_imagefolder_splits_from_folder_names_match_hf(tmp_path, layout):
    root = _folder(tmp_path / "data", layout)
    ours = sds.load_dataset("imagefolder", data_dir=root)
    expected = datasets.load_dataset("imagefolder", data_dir=root, cache_dir=str(tmp_path / "hf-cache"))
    assert sorted(ours) == sorted(expected) == ["test", "train"]
    for split in ("train", "test"):
        _same_image_rows(ours[split], expected[split])


@pytest.mark.parametrize("pattern", ["a/*", "a/**", "a/**/*.csv"])
def test_data_files_globs_match_files_as_hf(tmp_path, pattern):
    # HF resolves data_files patterns to files only, and '**' crosses folders (tests/test_data_files.py)
    for name in ("a/x.csv", "a/sub/y.csv", "a/sub/deeper/z.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"v\n{name}\n")
    files = str(tmp_path / pattern)
    assert sds.load_dataset("csv", data_files=files, split="train")["v"] == \
        list(_hf_load(tmp_path, "csv", files)["v"])


# -- features ------------------------------------------------------------------------------------
def test_class_label_as_hf():
    # tests/features/test_features.py::test_classlabel_init, ::test_classlabel_str2int, ::test_classlabel_int2str
    names = ["negative", "positive"]
    label = sds.ClassLabel(names=names)
    assert label.names == names and label.num_classes == 2
    assert sds.ClassLabel(num_classes=2, names=names).names == names
    assert sds.ClassLabel(num_classes=2).names == ["0", "1"]
    for bad in (lambda: sds.ClassLabel(num_classes=3, names=names), lambda: sds.ClassLabel()):
        with pytest.raises(ValueError):
            bad()
    assert [label.str2int(n) for n in names] == [0, 1] and [label.int2str(i) for i in (0, 1)] == names
    for bad in (lambda: label.str2int("__bad_label_name__"), lambda: label.str2int(1), lambda: label.str2int(None),
                lambda: label.int2str(2), lambda: label.int2str(-1), lambda: label.int2str(None)):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.parametrize(("serialized", "expected"), [
    # tests/features/test_features.py::test_features_from_dict_with_list_types
    ({"col": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "List"}},
     {"col": sds.Sequence(sds.Value("int32"))}),
    ({"col": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "LargeList"}},
     {"col": sds.Sequence(sds.Value("int32"))}),
    ({"col": {"feature": {"sub_col": {"dtype": "int32", "_type": "Value"}}, "_type": "List"}},
     {"col": sds.Sequence({"sub_col": sds.Value("int32")})}),
    ({"col": {"feature": {"sub_col": {"dtype": "int32", "_type": "Value"}}, "_type": "LargeList"}},
     {"col": sds.Sequence({"sub_col": sds.Value("int32")})}),
    ({"col": {"feature": {"sub_col": {"dtype": "int32", "_type": "Value"}}, "_type": "Sequence"}},
     {"col": {"sub_col": sds.Sequence(sds.Value("int32"))}}),
])
def test_features_from_dict_with_list_types(serialized, expected):
    assert sds.Features.from_dict(serialized) == sds.Features(expected)
    assert sds.Features.from_dict(datasets.Features.from_dict(serialized).to_dict()) == sds.Features(expected)


_H = datasets
_ROUND_TRIP = {
    "bool": (_H.Value("bool"), [True, None]), "int8": (_H.Value("int8"), [-1, 2]),
    "int16": (_H.Value("int16"), [1, None]), "uint32": (_H.Value("uint32"), [2**32 - 1, 0]),
    "float16": (_H.Value("float16"), [0.5, None]), "float32": (_H.Value("float32"), [1.5, 2.0]),
    "string": (_H.Value("string"), ["a", None]), "large_string": (_H.Value("large_string"), ["a", "b"]),
    "binary": (_H.Value("binary"), [b"\x00", None]), "large_binary": (_H.Value("large_binary"), [b"x", b""]),
    "class_label": (_H.ClassLabel(names=["neg", "pos"]), [1, 0]),
    "class_label_num_classes": (_H.ClassLabel(num_classes=3), [2, None]),
    "list": (_H.List(_H.Value("int32")), [[1], []]), "list_fixed": (_H.List(_H.Value("float32"), length=2),
                                                                     [[1.0, 2.0], [3.0, 4.0]]),
    "list_of_lists": (_H.List(_H.List(_H.Value("string"))), [[["a"]], [[], ["b", "c"]]]),
    "list_of_dicts": (_H.List({"a": _H.Value("int32"), "b": _H.Value("string")}), [[{"a": 1, "b": "x"}], []]),
    "legacy_sequence_of_dict": (_H.Sequence({"a": _H.Value("int32"), "b": _H.Value("string")}),
                                [{"a": [1, 2], "b": ["x", "y"]}, {"a": [], "b": []}]),
    "sequence_of_sequence": (_H.Sequence(_H.Sequence(_H.Value("int8"))), [[[1], [2, 3]], []]),
    "nested_dict": ({"x": _H.Value("int64"), "y": {"z": _H.List(_H.Value("float64"))}},
                    [{"x": 1, "y": {"z": [0.5]}}, {"x": 2, "y": {"z": []}}]),
    "list_of_class_labels": (_H.List(_H.ClassLabel(names=["a", "b"])), [[0, 1], [1]]),
    "array2d": (_H.Array2D((2, 2), "int32"), [[[0, 1], [2, 3]], [[1, 1], [1, 1]]]),
    "array3d": (_H.Array3D((1, 2, 2), "uint8"), [[[[0, 1], [2, 3]]], None]),
    "array4d": (_H.Array4D((1, 1, 1, 2), "float16"), [[[[[0.5, 1.0]]]], [[[[2.0, 3.0]]]]]),
}


@pytest.mark.parametrize("name", list(_ROUND_TRIP))
def test_features_and_values_round_trip_through_hf(name):
    # tests/features/test_features.py::test_features_to_dict_and_from_dict_round_trip, with values:
    # datasets -> from_hf -> to_hf gives the same features and the same values back
    feature, values = _ROUND_TRIP[name]
    hf = datasets.Dataset.from_dict({"c": values}, features=datasets.Features({"c": feature}))
    ours = StableDataset.from_hf(hf)
    assert ours.features == sds.Features.from_dict(hf.features.to_dict())
    back = ours.to_hf()
    assert back.features == hf.features
    assert repr(back["c"][:]) == repr(hf["c"][:])


def test_images_round_trip_through_hf_with_their_mode():
    import numpy as np

    gray = np.arange(6, dtype=np.uint8).reshape(2, 3)
    rgba = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    for feature, pixels in ((_H.Image(), rgba[..., :3]), (_H.Image(mode="L"), gray), (_H.Image(mode="RGBA"), rgba)):
        hf = datasets.Dataset.from_dict({"c": [pixels, None]}, features=datasets.Features({"c": feature}))
        ours = StableDataset.from_hf(hf)
        np.testing.assert_array_equal(ours[0]["c"], pixels)
        assert ours[1]["c"] is None
        back = ours.to_hf()
        assert back.features == hf.features
        np.testing.assert_array_equal(np.asarray(back[0]["c"]), np.asarray(hf[0]["c"]))
        assert back[1]["c"] is None


def test_hf_features_without_an_equivalent(tmp_path):
    # a column of nulls (what datasets infers for an all-null JSON field) comes in as text, as our loaders store it
    hf = datasets.Dataset.from_dict({"c": [None, None], "k": [1, 2]})
    assert hf.features["c"] == datasets.Value("null")
    ours = StableDataset.from_hf(hf)
    assert ours.features["c"] == sds.Value("string") and ours["c"] == [None, None]
    # a dynamic first dimension, and feature types with no counterpart here, are errors naming the column
    dynamic = datasets.Dataset.from_dict({"c": [[[0.0, 1.0]]]},
                                         features=datasets.Features({"c": datasets.Array2D((None, 2), "float32")}))
    with pytest.raises(ValueError, match=r"feature 'c': Array2D with shape \(None, 2\) has a dynamic first dimension"):
        StableDataset.from_hf(dynamic)
    # deliberate: a LargeList comes in as a list (one list type here) and goes back as List
    large = datasets.Dataset.from_dict({"c": [[1], []]}, features=datasets.Features({"c": datasets.LargeList(
        datasets.Value("int64"))}))
    assert StableDataset.from_hf(large).to_hf().features["c"] == datasets.List(datasets.Value("int64"))
    feature = datasets.Translation(languages=["en", "fr"])
    with pytest.raises(ValueError, match=r"feature 'c': unknown feature type 'Translation'"):
        sds.Features.from_dict(datasets.Features({"c": feature}).to_dict())
    # Array5D has a counterpart now (issue 25): both directions
    five = sds.Features.from_dict(datasets.Features({"c": datasets.Array5D((1, 1, 1, 1, 2), "int8")}).to_dict())
    assert five["c"] == sds.Array5D((1, 1, 1, 1, 2), "int8")
    assert sds.features.hf.to_hf_features(five)["c"] == datasets.Array5D((1, 1, 1, 1, 2), "int8")


# -- images ----------------------------------------------------------------------------------------
def _encoded(array, fmt="PNG", orientation=None):
    import io

    import PIL.Image

    image = PIL.Image.fromarray(array)
    buffer = io.BytesIO()
    if orientation is None:
        image.save(buffer, format=fmt)
    else:
        exif = image.getexif()
        exif[0x0112] = orientation
        image.save(buffer, format=fmt, exif=exif)
    return buffer.getvalue()


def _pixels():
    import numpy as np

    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (6, 9, 3), dtype=np.uint8)
    return {"rgb": rgb, "rgba": np.dstack([rgb, rng.integers(0, 256, (6, 9), dtype=np.uint8)]),
            "gray": rng.integers(0, 256, (6, 9), dtype=np.uint8),
            "gray16": rng.integers(0, 65536, (6, 9), dtype=np.uint16)}


@pytest.mark.parametrize("mode", ["L", "RGBA", "RGB", "I;16"])
@pytest.mark.parametrize(("source", "fmt", "orientation"), [
    ("rgb", "PNG", None), ("rgba", "PNG", None), ("gray", "PNG", None), ("rgb", "JPEG", None),
    ("gray", "JPEG", None), ("rgb", "WEBP", None), ("rgb", "JPEG", 6), ("rgb", "JPEG", 3), ("gray", "JPEG", 8),
])
def test_image_modes_decode_to_hf_values(source, fmt, orientation, mode):
    # tests/features/test_image.py::test_image_change_mode, ::test_image_decode_example_with_exif_orientation_tag:
    # Image(mode=...) gives the pixels PIL's convert(mode) gives, turned upright by the EXIF orientation
    import numpy as np

    data = _encoded(_pixels()[source], fmt, orientation)
    hf = datasets.Dataset.from_dict({"i": [data]}, features=datasets.Features({"i": datasets.Image(mode=mode)}))
    ours = StableDataset.from_dict({"i": [data]}, features={"i": sds.Image(mode=mode)})
    expected = np.asarray(hf[0]["i"])
    got = ours[0]["i"]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("source", "mode"), [("rgb", None), ("rgba", "RGBA"), ("gray", "L"), ("gray16", "I;16")])
def test_image_inputs_as_hf_accepts_them(tmp_path, source, mode):
    # tests/features/test_image.py::test_image_feature_encode_example (path, Path, bytes, the dict forms),
    # ::test_dataset_with_image_feature_from_pil_image and ::test_dataset_with_image_feature_from_np_array
    import numpy as np
    import PIL.Image

    pixels = _pixels()[source]
    path = tmp_path / "image.png"
    path.write_bytes(_encoded(pixels))
    data = path.read_bytes()
    inputs = [str(path), path, data, {"path": str(path)}, {"path": str(path), "bytes": None},
              {"path": str(path), "bytes": data}, {"path": None, "bytes": data}, {"bytes": data},
              PIL.Image.open(path), pixels]
    hf_feature, feature = datasets.Image(mode=mode), sds.Image(mode=mode)
    hf = datasets.Dataset.from_dict({"i": inputs}, features=datasets.Features({"i": hf_feature}))
    ours = StableDataset.from_dict({"i": inputs}, features={"i": feature})
    for row in range(len(inputs)):
        np.testing.assert_array_equal(ours[row]["i"], np.asarray(hf[row]["i"]))
        np.testing.assert_array_equal(ours[row]["i"], pixels)


def test_image_feature_with_none():
    # tests/features/test_image.py::test_dataset_with_image_feature_with_none
    for data, features, hf_features in (
            ({"image": [None]}, {"image": sds.Image()}, {"image": datasets.Image()}),
            ({"images": [[None]]}, {"images": sds.Sequence(sds.Image())}, {"images": datasets.List(datasets.Image())}),
            ({"nested": [{"image": None}]}, {"nested": {"image": sds.Image()}},
             {"nested": {"image": datasets.Image()}})):
        ours = StableDataset.from_dict(data, features=features)
        hf = datasets.Dataset.from_dict(data, features=datasets.Features(hf_features))
        assert ours[0] == hf[0] and ours[:1] == hf[:1]


@pytest.mark.filterwarnings("ignore:Downcasting array dtype")
def test_image_deliberate_differences():
    import numpy as np
    import PIL.Image

    pixels = _pixels()
    # Image() decodes every image to RGB (HF gives each file's own mode); Image(mode=...) keeps gray/alpha/16 bits
    for source in ("gray", "rgba"):
        data = _encoded(pixels[source])
        hf = datasets.Dataset.from_dict({"i": [data]}, features=datasets.Features({"i": datasets.Image()}))
        assert np.asarray(hf[0]["i"]).shape == pixels[source].shape
        ours = StableDataset.from_dict({"i": [data]}, features={"i": sds.Image()})
        np.testing.assert_array_equal(ours[0]["i"], np.asarray(PIL.Image.open(__import__("io").BytesIO(data))
                                                                  .convert("RGB")))
    # arrays are stored as PNG pixels, never cast: HF downcasts int64 to int32 TIFF and stores bool/float as
    # TIFF; here a dtype other than uint8/uint16 is an error saying which dtypes an image can have
    for array in (np.arange(16).reshape(4, 4), np.eye(4, dtype=bool), np.eye(4, dtype=np.float32)):
        datasets.Dataset.from_dict({"i": [array]}, features=datasets.Features({"i": datasets.Image()}))
        with pytest.raises(ValueError, match=r"image arrays must be uint8 \(or uint16 for png\)"):
            StableDataset.from_dict({"i": [array]}, features={"i": sds.Image()})


# -- in-memory constructors and exports ------------------------------------------------------------
def _same_dataset(ours, hf):
    assert ours.column_names == hf.column_names
    assert sds.Features.from_dict(json_roundtrip(ours.features.to_dict())) == \
        sds.Features.from_dict(json_roundtrip(hf.features.to_dict()))
    assert ours.to_dict() == hf.to_dict()


@pytest.mark.parametrize("make", [
    # tests/test_arrow_dataset.py::test_from_dict (an Arrow column among lists), tests/test_dataset_list.py::
    # test_create and ::test_variable_list_records, from_pandas (nulls, categoricals, an index, nullable dtypes)
    lambda lib: lib.from_dict({"col_1": [3, 2, 1, 0], "col_2": ["a", "b", "c", "d"],
                               "col_3": __import__("pyarrow").array([True, False, True, False])}),
    lambda lib: lib.from_list([{"col_1": 3, "col_2": "a"}, {"col_1": 2, "col_2": "b"}]),
    lambda lib: lib.from_list([{"col_1": []}, {"col_1": [1, 2]}]),
    lambda lib: lib.from_dict({"a": [1, 2.5], "b": [b"x", None], "d": [{"x": 1}, {"y": 2}], "n": [1.0, None]}),
    lambda lib: lib.from_dict({"a": __import__("numpy").arange(3, dtype="int16"),
                               "b": __import__("numpy").ones((3, 2), "float32")}),
    lambda lib: lib.from_pandas(_frame()), lambda lib: lib.from_pandas(_frame().set_index("name")),
    lambda lib: lib.from_pandas(_frame().iloc[1:]), lambda lib: lib.from_pandas(_frame().set_index("name"),
                                                                                 preserve_index=False),
    lambda lib: lib.from_generator(_generate, gen_kwargs={"n": 3}),
    lambda lib: lib.from_arrow(__import__("pyarrow").table({"x": [1, None], "y": [["a"], []]}))
    if lib is StableDataset else datasets.Dataset(__import__("pyarrow").table({"x": [1, None], "y": [["a"], []]})),
])
def test_constructors_match_hf(make):
    _same_dataset(make(StableDataset), make(datasets.Dataset))


def _frame():
    import pandas as pd

    return pd.DataFrame({"x": [1.5, None, 3.0], "name": ["a", "b", None], "i": [1, 2, 3], "b": [True, False, None],
                         "cat": pd.Categorical(["u", "v", "u"]), "n": pd.array([1, None, 3], dtype="Int64"),
                         "s": pd.array(["p", None, "q"], dtype="string"), "l": [[1, 2], [], [3]]})


def _generate(n):
    for i in range(n):
        yield {"i": i, "t": str(i)}


_EXPORTED = {"a": [1, 2, None], "s": ["x", None, "z"], "l": [[1], [], None], "d": [{"k": 1}, None, {"k": 3}],
             "f": [0.5, None, 2.0]}


@pytest.mark.parametrize("export", [
    # tests/test_arrow_dataset.py::test_to_dict, ::test_to_list, ::test_to_pandas, ::test_to_polars, batched too
    lambda d: d.to_dict(), lambda d: d.to_list(), lambda d: list(d.to_dict(batched=True, batch_size=2)),
    lambda d: d.to_pandas().to_dict("list"), lambda d: [f.to_dict("list") for f in d.to_pandas(batched=True,
                                                                                                batch_size=2)],
    lambda d: list(d.to_pandas().dtypes.astype(str)),
    lambda d: d.to_polars().to_dicts(), lambda d: [f.to_dicts() for f in d.to_polars(batched=True, batch_size=2)],
    lambda d: str(d.to_polars().schema), lambda d: list(d.iter(batch_size=2)),
    lambda d: d.select([2, 0]).select_columns(["s", "a"]).to_dict(),
    lambda d: list(d.select([2, 0]).to_dict(batched=True, batch_size=1)),
])
def test_exports_match_hf(export):
    pytest.importorskip("polars")
    ours, hf = StableDataset.from_dict(_EXPORTED), datasets.Dataset.from_dict(_EXPORTED)
    assert repr(export(ours)) == repr(export(hf))


def test_constructor_deliberate_differences():
    # tests/test_dataset_list.py::test_uneven_records: HF takes the columns of the first record only and drops
    # col_2; here every record's keys are columns
    uneven = [{"col_1": 1}, {"col_2": "x"}]
    assert datasets.Dataset.from_list(uneven).column_names == ["col_1"]
    assert StableDataset.from_list(uneven).to_dict() == {"col_1": [1, None], "col_2": [None, "x"]}
    # tests/test_arrow_dataset.py::test_from_dict: HF turns ints into text (and bools into ints) for features
    # that say so; here values keep their kind and the error says what to do
    data = {"col_1": [3, 2, 1, 0]}
    assert datasets.Dataset.from_dict(data, features=datasets.Features({"col_1": datasets.Value("string")}))[
        "col_1"][:] == ["3", "2", "1", "0"]
    with pytest.raises(ValueError, match=r"example key 0, field 'col_1': expected a str, got int: 3; values are not "
                                         r"converted between kinds .* cast_column after"):
        StableDataset.from_dict(data, features={"col_1": sds.Value("string")})
    assert StableDataset.from_dict(data).cast_column("col_1", sds.Value("string"))["col_1"] == ["3", "2", "1", "0"]
    # a column with no value: HF stores a null column; here its type must be given
    with pytest.raises(ValueError, match="holds only nulls, so its type cannot be inferred; pass features="):
        StableDataset.from_dict({"a": [None, None]})
    assert StableDataset.from_dict({"a": [None, None]}, features={"a": sds.Value("string")})["a"] == [None, None]


# -- webdataset, parquet, arrow ----------------------------------------------------------------------
def _tar(path, members):
    return str(write_tar(path, members))


def _jpeg():
    import numpy as np

    return _encoded(np.zeros((4, 6, 3), np.uint8), "JPEG")


def _wds_rows(ds):
    import numpy as np

    rows = []
    for row in ds:
        rows.append({k: (np.asarray(v).shape if k.endswith(("jpg", "jpeg")) and v is not None else v)
                     for k, v in row.items() if k != "__url__"})
    return rows


def _image_shard(tmp_path):
    import json

    caption = json.dumps({"caption": "this is an image"}).encode()
    return _tar(tmp_path / "file.tar", [m for i in range(3) for m in ((f"{i:05d}.json", caption),
                                                                      (f"{i:05d}.jpg", _jpeg()))])


def _case_shard(tmp_path):
    import json

    members = []
    for i in range(3):
        name = f"{i:05d}_{'a' if i % 2 else 'A'}"
        for tag, ext in (("INFO1", "json"), ("info2", "json"), ("info3", "JSON"), ("info3", "json")):
            members.append((f"{name}.{tag}.{ext}", json.dumps({"caption": f"caption for {name}.{tag}.{ext}"}).encode()))
    return _tar(tmp_path / "file.tar", members)


def _gz_shard(tmp_path):
    import gzip

    return _tar(tmp_path / "file.tar", [(f"{i:05d}.txt.gz", gzip.compress(b"hello\nworld\n")) for i in range(3)])


def _npy(array):
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _misc_shard(tmp_path):
    import numpy as np

    members = [m for i in range(2) for m in ((f"sub/dir/{i}.txt", b"text %d" % i), (f"sub/dir/{i}.cls", b"%d" % i),
                                              (f"sub/dir/{i}.bin", b"\x00\x01"), (f"sub/dir/{i}.json", b'{"a": 1}'),
                                              (f"sub/dir/{i}.npy", _npy(np.arange(3) + i)),
                                              (f"sub/dir/{i}.grid.npy", _npy(np.eye(2, dtype=np.float32) * i)))]
    return _tar(tmp_path / "file.tar", members)


@pytest.mark.parametrize("make", [_image_shard, _case_shard, _gz_shard, _misc_shard])
def test_webdataset_loader_matches_hf(tmp_path, make):
    # tests/packaged_modules/test_webdataset.py::test_image_webdataset, ::test_upper_lower_case,
    # ::test_gzipped_text_webdataset; txt/cls/json/bytes members and keys with folders
    shard = make(tmp_path)
    ours = sds.load_dataset("webdataset", data_files=shard, split="train")
    hf = _hf_load(tmp_path, "webdataset", shard)
    # deliberate: __key__ and __url__ come first here (as the webdataset library orders them), last in HF
    assert ours.column_names[:2] == ["__key__", "__url__"]
    assert [*ours.column_names[2:], "__key__", "__url__"] == hf.column_names
    assert _wds_rows(ours) == [{k: r[k] for k in ours.column_names if k != "__url__"} for r in _wds_rows(hf)]
    assert ours["__url__"] == list(hf["__url__"]) == [shard] * len(ours)


def test_webdataset_npy_members_are_never_unpickled(tmp_path):
    import numpy as np

    shard = _tar(tmp_path / "file.tar", [("0.npy", _npy(np.array([{"a": 1}], dtype=object)))])
    with pytest.raises(ValueError, match=r"member '0\.npy': cannot read the 'npy' member as npy .*allow_pickle"):
        sds.load_dataset("webdataset", data_files=shard, split="train")


def test_webdataset_given_features_fill_what_a_sample_lacks_with_nulls(tmp_path):
    # tests/packaged_modules/test_webdataset.py::test_webdataset_with_features and
    # ::test_image_webdataset_missing_keys: a declared json field or member that no sample has is None
    shard = _image_shard(tmp_path)
    features = {"__key__": sds.Value("string"), "__url__": sds.Value("string"),
                "json": {"caption": sds.Value("string"), "additional_field": sds.Value("int64")},
                "jpg": sds.Image(), "jpeg": sds.Image(), "txt": sds.Value("string")}
    ours = sds.load_dataset("webdataset", data_files=shard, split="train", features=features)
    assert ours[0]["json"] == {"caption": "this is an image", "additional_field": None}
    assert ours[0]["jpeg"] is None and ours[0]["txt"] is None and ours[0]["jpg"].shape == (4, 6, 3)
    hf_features = datasets.Features({"__key__": datasets.Value("string"), "__url__": datasets.Value("string"),
                                     "json": {"caption": datasets.Value("string"),
                                              "additional_field": datasets.Value("int64")},
                                     "jpg": datasets.Image(), "jpeg": datasets.Image(),
                                     "txt": datasets.Value("string")})
    hf = _hf_load(tmp_path, "webdataset", shard, features=hf_features)
    assert hf[0]["json"] == ours[0]["json"] and hf[0]["jpeg"] is None and hf[0]["txt"] is None
    # without features=, a later sample that lacks a column is an error naming it (HF: a null)
    uneven = _tar(tmp_path / "uneven.tar", [("0.txt", b"a"), ("0.cls", b"1"), ("1.txt", b"b")])
    with pytest.raises(ValueError, match=r"uneven\.tar:1', field 'cls': missing key 'cls'"):
        sds.load_dataset("webdataset", data_files=uneven, split="train")


def _table():
    import pyarrow as pa

    return pa.table({"a": [1, 2, None], "s": ["x", None, "z"], "l": [[1], [], None], "d": [{"k": 1}, None, {"k": 3}],
                     "dict": pa.array(["u", "v", "u"]).dictionary_encode()})


@pytest.mark.parametrize("options", [{}, {"columns": ["s", "a"]}, {"columns": ["d"]}])
def test_parquet_loader_matches_hf(tmp_path, options):
    # tests/packaged_modules/test_parquet.py: rows, features, and columns= (read in the file's order)
    import pyarrow.parquet as pq

    path = str(tmp_path / "file.parquet")
    pq.write_table(_table(), path)
    _same_rows(sds.load_dataset("parquet", data_files=path, split="train", **options),
               _hf_load(tmp_path, "parquet", path, **options))
    with pytest.raises(ValueError, match=r"columns= names \['nope'\], which the file does not have"):
        sds.load_dataset("parquet", data_files=path, split="train", columns=["nope"])


@pytest.mark.parametrize("writer", ["file", "stream", "datasets"])
def test_arrow_loader_matches_hf(tmp_path, writer):
    # tests/packaged_modules/test_arrow.py: Arrow IPC files and streams, and what datasets saves (features kept)
    import pyarrow as pa

    if writer == "datasets":
        hf_saved = datasets.Dataset.from_dict({"label": [0, 1], "t": ["a", "b"]}, features=datasets.Features(
            {"label": datasets.ClassLabel(names=["n", "y"]), "t": datasets.Value("string")}))
        hf_saved.save_to_disk(str(tmp_path / "saved"))
        files = sorted(str(p) for p in (tmp_path / "saved").glob("*.arrow"))
    else:
        files = str(tmp_path / "file.arrow")
        table = _table()
        with pa.OSFile(files, "wb") as sink:
            with (pa.ipc.new_file if writer == "file" else pa.ipc.new_stream)(sink, table.schema) as out:
                out.write_table(table)
    ours = sds.load_dataset("arrow", data_files=files, split="train")
    _same_rows(ours, _hf_load(tmp_path, "arrow", files))
    if writer == "datasets":
        assert ours.features["label"] == sds.ClassLabel(names=["n", "y"])


def test_parquet_types_without_a_feature_here(tmp_path):
    # deliberate (documented): timestamps are stored as ISO text and decimals as float64, where HF keeps
    # timestamp[...] and decimal128 columns
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "file.parquet")
    pq.write_table(pa.table({"ts": pa.array([0, None], pa.timestamp("s")),
                             "dec": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2))}), path)
    hf = _hf_load(tmp_path, "parquet", path)
    assert hf.features["dec"] == datasets.Value("decimal128(5, 2)") and hf["dec"][0] == decimal.Decimal("1.25")
    ours = sds.load_dataset("parquet", data_files=path, split="train")
    assert ours.features["ts"] == sds.Value("string") and ours["ts"] == ["1970-01-01 00:00:00.000", None]
    assert ours.features["dec"] == sds.Value("float64") and ours["dec"] == [1.25, None]


# -- load_dataset("path/to/folder"): the loader and the splits from the files --------------------------
def _summary(result):
    if hasattr(result, "features"):
        return result.column_names, result.to_dict()
    return {split: _summary(result[split]) for split in sorted(result)}


def _tree(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return str(root)


@pytest.mark.parametrize(("files", "options"), [
    # tests/test_data_files.py / test_load.py: splits from file and folder names, the loader from the files
    ({"train.csv": "x\n1\n2\n", "test.csv": "x\n3\n", "validation.csv": "x\n4\n"}, {}),
    ({"data/train-00000.jsonl": '{"x": 1}\n', "data/test-00000.jsonl": '{"x": 2}\n', "README.md": "# hi\n"}, {}),
    ({"train/a.txt": "l1\nl2\n", "dev/b.txt": "l3\n"}, {}),
    ({"x.csv": "x\n1\n", "y.csv": "x\n2\n"}, {}),
    ({"a.csv": "x\n1\n", "b.json": '{"x": 2}\n', "c.json": '{"x": 3}\n'}, {}),
    ({"train.csv": "x\n1\n", "test.csv": "x\n2\n"}, {"split": "test"}),
    ({"train.csv": "x\n1\n", "test.csv": "x\n2\n"}, {"split": "train+test"}),
])
def test_folder_loading_matches_hf(tmp_path, files, options):
    root = _tree(tmp_path / "data", files)
    assert _summary(sds.load_dataset(root, **options)) == \
        _summary(datasets.load_dataset(root, cache_dir=str(tmp_path / "hf-cache"), **options))


def test_folder_files_no_split_name_fits_are_train_not_dropped(tmp_path):
    # deliberate: once some file names a split, HF drops the files that name none (here trainer.csv and
    # contest.csv, whose names contain no whole split word); here they go to "train", so no row is lost
    root = _tree(tmp_path / "data", {"trainer.csv": "x\n1\n", "testing.csv": "x\n2\n", "contest.csv": "x\n3\n",
                                     "valid.csv": "x\n4\n"})
    hf = datasets.load_dataset(root, cache_dir=str(tmp_path / "hf-cache"))
    assert sorted(hf) == ["test", "validation"]
    ours = sds.load_dataset(root)
    assert sorted(ours) == ["test", "train", "validation"] and sorted(ours["train"]["x"]) == [1, 3]
    assert ours["test"]["x"] == hf["test"]["x"] == [2] and ours["validation"]["x"] == hf["validation"]["x"] == [4]


def test_folder_with_data_dir_inside_it_as_hf(tmp_path):
    root = _tree(tmp_path / "data", {"g/train.csv": "x\n1\n", "g/test.csv": "x\n2\n", "other.csv": "x\n9\n"})
    expected = datasets.load_dataset(root, data_dir="g", cache_dir=str(tmp_path / "hf-cache"))
    assert _summary(sds.load_dataset(root, data_dir="g")) == _summary(expected)


# -- DatasetDict, shuffle, indexing --------------------------------------------------------------------
def _splits(lib):
    if lib is datasets:
        return datasets.DatasetDict({"train": datasets.Dataset.from_dict({"c": ["b", "a", "b"], "n": [3, 1, 2]}),
                                     "test": datasets.Dataset.from_dict({"c": ["z", "a"], "n": [5, 4]})})
    return sds.DatasetDict({"train": StableDataset.from_dict({"c": ["b", "a", "b"], "n": [3, 1, 2]}),
                            "test": StableDataset.from_dict({"c": ["z", "a"], "n": [5, 4]})})


@pytest.mark.parametrize("operation", [
    # tests/test_dataset_dict.py: the column operations applied to every split
    lambda d, lib: {k: list(v["n"]) for k, v in d.sort("n").items()},
    lambda d, lib: d.unique("c"), lambda d, lib: d.num_rows, lambda d, lib: d.column_names,
    lambda d, lib: {k: v.column_names for k, v in d.rename_column("c", "x").items()},
    lambda d, lib: {k: v.column_names for k, v in d.remove_columns("c").items()},
    lambda d, lib: {k: v.column_names for k, v in d.select_columns(["n"]).items()},
    lambda d, lib: {k: v.to_dict() for k, v in d.map(lambda r: {"m": r["n"] * 2}).items()},
    lambda d, lib: {k: v.to_dict() for k, v in d.filter(lambda r: r["n"] > 2).items()},
    lambda d, lib: {k: list(v["n"]) for k, v in d.shuffle(seed=1).items()},
    lambda d, lib: {k: list(v["n"]) for k, v in d.cast_column("n", lib.Value("string")).items()},
])
def test_dataset_dict_operations_match_hf(operation):
    assert operation(_splits(StableDataset), sds) == operation(_splits(datasets), datasets)


def test_dataset_dict_class_encode_column_shares_names_across_splits():
    # deliberate (documented): HF encodes each split on its own values (train ['a', 'b'], test ['a', 'z'],
    # so "a" is 0 in both but "z" and "b" share id 1); here the names are those of every split
    hf = _splits(datasets).class_encode_column("c")
    assert hf["train"].features["c"].names == ["a", "b"] and hf["test"].features["c"].names == ["a", "z"]
    ours = _splits(StableDataset).class_encode_column("c")
    assert ours["train"].features["c"].names == ours["test"].features["c"].names == ["a", "b", "z"]
    assert ours["train"]["c"] == [1, 0, 1] and ours["test"]["c"] == [2, 0]


@pytest.mark.parametrize("read", [
    # tests/test_arrow_dataset.py::test_shuffle (same seed, same numpy generator: same order), test_select,
    # and indexing
    lambda d: list(d.shuffle(seed=42)["a"]), lambda d: list(d.shuffle(seed=1234).select(range(3))["a"]),
    lambda d: list(d.select(range(5, 8))["a"]), lambda d: list(d.select([9, 0, 9])["a"]), lambda d: d[-1],
    lambda d: d[1:10:3], lambda d: d[[3, 1]], lambda d: list(d.shard(num_shards=3, index=1)["a"]),
    lambda d: list(d.shard(num_shards=3, index=0, contiguous=False)["a"]),
    lambda d: [len(d.shard(3, index=i, contiguous=True)) for i in range(3)],
])
def test_rows_picked_match_hf(read):
    data = {"a": list(range(20))}
    assert read(StableDataset.from_dict(data)) == read(datasets.Dataset.from_dict(data))


def test_out_of_range_rows_are_index_errors_as_in_hf():
    ours, hf = StableDataset.from_dict({"a": list(range(20))}), datasets.Dataset.from_dict({"a": list(range(20))})
    for side in (ours, hf):
        with pytest.raises(IndexError):
            side[20]
        with pytest.raises(IndexError):
            side.select([25])
