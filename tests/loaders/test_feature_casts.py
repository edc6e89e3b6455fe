"""`features=` on the csv and json loaders casts what Hugging Face casts, checked side by side on the same
file against `datasets` (installed with the test extras); a value that cannot be cast is an error naming the
file, the line (1-based, the CSV header counted) and the column, and nothing is published."""

from __future__ import annotations

import json

import datasets
import pytest

import stable_datasets as sds
from stable_datasets.loaders.columns import LoaderError, cast_file_column

V, CL = datasets.Value, datasets.ClassLabel


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, newline="")
    return str(path)


def _hf(tmp_path, kind, path, features):
    datasets.disable_progress_bars()
    return datasets.load_dataset(kind, data_files=path, split="train", features=datasets.Features(features),
                                 cache_dir=str(tmp_path / "hf-cache"))


def _ours(tmp_path, kind, path, features, **options):
    return sds.load_dataset(kind, data_files=path, split="train", features=datasets.Features(features),
                            cache_dir=str(tmp_path / "cache"), **options)


def _features_of(hf):
    text = json.dumps(hf.features.to_dict()).replace('"large_string"', '"string"')  # HF 5 reads text as large
    return sds.Features.from_dict(json.loads(text))


CASTS = [
    # integers written with a point or an exponent, as pandas reads them for an int column
    ("csv", "a\n0.0\n1.0\n", {"a": V("int32")}, [0, 1]),
    ("csv", "a\n1e3\n2\n-4.000\n", {"a": V("int64")}, [1000, 2, -4]),
    ("csv", "a\n7\n0.0\n", {"a": V("int8")}, [7, 0]),
    ("json", '{"a": 0.0}\n{"a": 1.0}\n', {"a": V("int32")}, [0, 1]),
    ("json", '{"a": [1, 2]}\n{"a": [3.0]}\n', {"a": datasets.List(V("int32"))}, [[1, 2], [3]]),
    # numbers (and booleans) into a string column: their text, as HF gives it
    ("csv", "a\n1\n1.5\n00012\n1.50\n", {"a": V("string")}, ["1", "1.5", "00012", "1.50"]),
    ("json", '{"a": 1}\n{"a": 1.5}\n', {"a": V("string")}, ["1", "1.5"]),
    ("json", '{"a": true}\n', {"a": V("string")}, ["true"]),
    ("json", '{"a": 1}\n{"a": true}\n', {"a": V("string")}, ["1", "true"]),
    # int to float, bool to int, bools
    ("csv", "a\n1\n2\n", {"a": V("float32")}, [1.0, 2.0]),
    ("json", '{"a": 1}\n{"a": 2}\n', {"a": V("float64")}, [1.0, 2.0]),
    ("json", '{"a": true}\n', {"a": V("int32")}, [1]),
    ("csv", "a\ntrue\nFalse\n", {"a": V("bool")}, [True, False]),
    ("csv", "a\n1\n0\n", {"a": V("bool")}, [True, False]),
    ("json", '{"a": true}\n{"a": false}\n', {"a": V("bool")}, [True, False]),
    # class labels from names and from ids (tests/packaged_modules/test_csv.py::test_csv_cast_label)
    ("csv", "label\ngood\nbad\ngood\n", {"label": CL(names=["good", "bad"])}, [0, 1, 0]),
    ("csv", "label\n0\n1\n", {"label": CL(names=["good", "bad"])}, [0, 1]),
    ("json", '{"label": "dog"}\n{"label": "cat"}\n', {"label": CL(names=["cat", "dog"])}, [1, 0]),
    ("json", '{"label": 1}\n{"label": 0}\n', {"label": CL(names=["cat", "dog"])}, [1, 0]),
    # nulls, blank lines, a field a record lacks
    ("csv", "a\n1\n\n3\n", {"a": V("int32")}, [1, 3]),
    ("json", '{"a": null}\n{"a": 2}\n', {"a": V("int32")}, [None, 2]),
    # a nested struct (fields in another order than the file's, an int into a float field)
    ("json", '{"a": {"x": 1, "y": "s"}}\n', {"a": {"y": V("string"), "x": V("float32")}}, [{"y": "s", "x": 1.0}]),
]


@pytest.mark.parametrize(("kind", "text", "features", "values"), CASTS)
def test_a_cast_gives_what_hugging_face_gives(tmp_path, kind, text, features, values):
    path = _write(tmp_path, "data.csv" if kind == "csv" else "data.jsonl", text)
    hf = _hf(tmp_path, kind, path, features)
    ours = _ours(tmp_path, kind, path, features)
    name = next(iter(features))
    assert hf[name] == values
    assert ours[name] == values
    assert ours.features == _features_of(hf)


def test_every_column_of_a_json_file_cast_at_once_matches_hugging_face(tmp_path):
    records = [{"id": 1.0, "score": 3, "tags": [1, 2.0], "ok": True, "meta": {"n": 2, "s": "x"}, "note": 5},
               {"id": 2, "score": 4.5, "tags": [], "ok": None, "meta": {"n": 3.0, "s": "y"}, "note": 6.5}]
    path = _write(tmp_path, "all.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    features = {"id": V("int64"), "score": V("float32"), "tags": datasets.List(V("int16")), "ok": V("bool"),
                "meta": {"n": V("int32"), "s": V("string")}, "note": V("string")}
    hf, ours = _hf(tmp_path, "json", path, features), _ours(tmp_path, "json", path, features)
    assert ours.to_dict() == hf.to_dict() == {
        "id": [1, 2], "score": [3.0, 4.5], "tags": [[1, 2], []], "ok": [True, None],
        "meta": [{"n": 2, "s": "x"}, {"n": 3, "s": "y"}], "note": ["5", "6.5"]}
    assert ours.features == _features_of(hf)


REFUSED = [
    # (kind, file, features, the error's line and column and value); HF refuses each of these too
    ("csv", "a,b\n1,x\nabc,y\n", {"a": V("int32"), "b": V("string")}, r"line 3: column 'a': value 'abc' "
     r"cannot be stored as int32"),
    ("csv", "a,b\n0.0,x\n1.5,y\n", {"a": V("int32"), "b": V("string")}, r"line 3: column 'a': value '1\.5' "
     r"cannot be stored as int32"),
    ("csv", "b,a\nx,2\ny,300\n", {"b": V("string"), "a": V("int8")}, r"line 3: column 'a': value '300' "
     r"cannot be stored as int8"),
    ("csv", "a\ngood\n\nworse\n", {"a": CL(names=["good", "bad"])}, r"line 4: column 'a': unknown class name "
     r"'worse'"),
    ("json", '{"a": 1}\n\n{"a": 1.5}\n', {"a": V("int32")}, r"line 3: column 'a': value 1\.5 cannot be stored "
     r"as int32"),
    ("json", '{"a": 1}\n{"a": "abc"}\n', {"a": V("int32")}, r"line 2: column 'a': value 'abc' cannot be stored "
     r"as int32"),
    ("json", '{"a": {"x": 1}}\n{"a": "str"}\n', {"a": {"x": V("int32")}}, r"line 2: column 'a': value 'str' "
     r"cannot be stored as"),
    ("json", '{"a": 300}\n', {"a": V("int8")}, r"line 1: column 'a': value 300 cannot be stored as int8"),
    ("json", '{"a": 1e20}\n', {"a": V("int64")}, r"line 1: column 'a': value 1e\+20 cannot be stored as int64"),
    # a nested field the features do not name, in a column the parser reads loosely (true for a string):
    # Arrow's struct cast would drop it without a word
    ("json", '{"s": {"a": false}}\n{"s": {"a": true, "extra": 2}}\n', {"s": {"a": V("string")}},
     r"line 2: column 's': .*'extra': 2"),
]


@pytest.mark.parametrize(("kind", "text", "features", "message"), REFUSED)
def test_a_value_that_cannot_be_cast_names_file_line_and_column_and_nothing_is_published(
        tmp_path, kind, text, features, message):
    name = "bad.csv" if kind == "csv" else "bad.jsonl"
    path = _write(tmp_path, name, text)
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        _hf(tmp_path, kind, path, features)
    with pytest.raises(LoaderError, match=rf"^{path}, {message}"):
        _ours(tmp_path, kind, path, features)
    assert not list((tmp_path / "cache").rglob("_metadata.json"))


def test_integer_text_is_read_exactly_and_other_forms_through_float64_only_where_exact():
    import pyarrow as pa

    column = pa.chunked_array([["9223372036854775807", "-3", None, "1e3", "+7", "2.000"]])
    cast, problem = cast_file_column(column, pa.int64())
    assert problem is None and cast.to_pylist() == [9223372036854775807, -3, None, 1000, 7, 2]
    assert cast_file_column(pa.chunked_array([["9007199254740993.0"]]), pa.int64())[1] == \
        "an integer past 2**53 written with a decimal point or an exponent is not read exactly"
    assert cast_file_column(pa.chunked_array([["1.5"]]), pa.int64())[1] is not None
    assert cast_file_column(pa.chunked_array([["x"]]), pa.int64())[1] is not None


def test_a_float_form_in_a_late_range_of_a_csv_is_cast_and_a_fraction_there_names_its_line(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files

    monkeypatch.setattr(csv_files, "RANGE_BYTES", 64)  # about 6 lines a range
    features = {"n": V("int64"), "word": V("string")}
    lines = ["n,word"] + [f"{i},w{i}" for i in range(200)]
    lines[151] = "150.0,w150"  # line 152 of the file, in a late range
    path = _write(tmp_path, "r.csv", "\n".join(lines) + "\n")
    ds = _ours(tmp_path, "csv", path, features)
    assert ds["n"] == list(range(200))
    lines[181] = "180.5,w180"  # line 182
    path = _write(tmp_path, "r.csv", "\n".join(lines) + "\n")
    with pytest.raises(LoaderError, match=rf"^{path}, line 182: column 'n': value '180\.5' cannot be stored as "
                                          r"int64; pass features="):
        sds.load_dataset("csv", data_files=path, split="train", features=datasets.Features(features),
                         cache_dir=str(tmp_path / "c2"))
    assert not list((tmp_path / "c2").rglob("_metadata.json"))


def test_a_streamed_csv_starts_again_past_the_rows_it_gave_when_an_int_column_needs_text(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files

    monkeypatch.setattr(csv_files, "WHOLE_FILE_BYTES", 64)  # an escapechar file past this is streamed...
    monkeypatch.setattr(csv_files, "BLOCK_BYTES", 128)  # ...in blocks of a few lines
    lines = ["n,word"] + [f"{i},w{i}" for i in range(100)]
    lines[60] = "59.0,w59"
    path = _write(tmp_path, "s.csv", "\n".join(lines) + "\n")
    features = {"n": V("int32"), "word": V("string")}
    ds = _ours(tmp_path, "csv", path, features, escapechar="\\")
    assert ds["n"] == list(range(100)) and ds["word"] == [f"w{i}" for i in range(100)]
    lines[90] = "89.25,w89"
    path = _write(tmp_path, "s.csv", "\n".join(lines) + "\n")
    with pytest.raises(LoaderError, match=rf"^{path}, line 91: column 'n': value '89\.25' cannot be stored as int32"):
        sds.load_dataset("csv", data_files=path, split="train", features=datasets.Features(features),
                         escapechar="\\", cache_dir=str(tmp_path / "c2"))


def test_a_range_piece_of_a_csv_names_the_line_counted_from_the_start_of_the_file(tmp_path):
    lines = ["n,text"] + [f'{i},"t{i}"' for i in range(50)]
    lines[20] = '19,"two\nlines"'  # a quoted line break before the range: lines, not records, are counted
    lines[40] = "39.5,x"  # line 42 of the file
    path = _write(tmp_path, "q.csv", "\n".join(lines) + "\n")
    data = (tmp_path / "q.csv").read_bytes()
    start = data.index(b"30,")
    loader = sds.load_builder("csv", data_files=path, features=sds.Features({"n": sds.Value("int16"),
                                                                            "text": sds.Value("string")}))
    with pytest.raises(LoaderError, match=rf"^{path}, line 42: column 'n': value '39\.5' cannot be stored as int16"):
        list(loader.read_piece([path, start, len(data)]))


def test_a_string_column_of_objects_and_lists_keeps_their_json_text_as_hugging_face_does(tmp_path):
    path = _write(tmp_path, "o.jsonl", '{"a": {"x": 1}}\n{"a": [1, "y"]}\n{"a": "plain"}\n{"a": null}\n')
    features = {"a": V("string")}
    hf, ours = _hf(tmp_path, "json", path, features), _ours(tmp_path, "json", path, features)
    assert ours["a"] == ['{"x":1}', '[1,"y"]', "plain", None]
    # deliberate (docs/load-your-own-files.md): in a column of mixed kinds HF writes a string as its JSON text too
    assert hf["a"] == ['{"x":1}', '[1,"y"]', '"plain"', None]


def test_a_column_of_mixed_kinds_is_cast_by_each_value_s_text(tmp_path):
    path = _write(tmp_path, "m.jsonl", '{"a": 1, "b": 1}\n{"a": "2", "b": "x"}\n{"a": 3.0, "b": true}\n')
    ds = _ours(tmp_path, "json", path, {"a": V("int32"), "b": V("string")})
    assert ds.to_dict() == {"a": [1, 2, 3], "b": ["1", "x", "true"]}
    path = _write(tmp_path, "m.jsonl", '{"a": 1}\n{"a": "2"}\n\n{"a": true}\n')
    with pytest.raises(LoaderError, match=rf"^{path}, line 4: column 'a': value 'true' cannot be stored as int32"):
        _ours(tmp_path, "json", path, {"a": V("int32")})


def test_a_list_of_mixed_kinds_for_a_list_of_strings_names_the_line_and_the_value(tmp_path):
    path = _write(tmp_path, "l.jsonl", '{"a": ["x"]}\n{"a": ["y", 2]}\n')
    # deliberate: HF stores ['"y"', '2'] (each item's JSON text, a string quoted); we refuse it
    assert _hf(tmp_path, "json", path, {"a": datasets.List(V("string"))})["a"] == [['"x"'], ['"y"', "2"]]
    with pytest.raises(LoaderError, match=rf"^{path}, line 2: column 'a': value 2 \(at \[\]\) cannot be stored as "):
        _ours(tmp_path, "json", path, {"a": datasets.List(V("string"))})


def test_a_json_document_casts_as_json_lines_do(tmp_path):
    records = [{"a": 0.0, "b": 1}, {"a": "2", "b": "x"}, {"a": 3, "b": True}]
    path = _write(tmp_path, "d.json", json.dumps(records))
    features = {"a": V("int32"), "b": V("string")}
    assert _ours(tmp_path, "json", path, features).to_dict() == {"a": [0, 2, 3], "b": ["1", "x", "true"]}
    columns = _write(tmp_path, "c.json", json.dumps({"data": {"a": [1.0, "4"], "b": [2, "y"]}}))
    assert _ours(tmp_path, "json", columns, features, field="data").to_dict() == {"a": [1, 4], "b": ["2", "y"]}
    bad = _write(tmp_path, "bad.json", json.dumps([{"a": 1, "b": "x"}, {"a": 2.5, "b": "y"}]))
    with pytest.raises(LoaderError, match=rf"^{bad}: column 'a', row 2: value 2\.5 cannot be stored as "):
        _ours(tmp_path, "json", bad, features)


def test_a_column_loosened_in_one_json_block_casts_in_every_later_block_and_a_fraction_names_its_line(
        tmp_path, monkeypatch):
    from stable_datasets.loaders import lines as line_blocks

    monkeypatch.setattr(line_blocks, "BLOCK_BYTES", 256)  # blocks of a few records each
    records = [{"n": float(i) if i < 5 else i, "s": i if i % 7 == 0 else f"t{i}"} for i in range(120)]
    path = _write(tmp_path, "b.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    features = {"n": V("int32"), "s": V("string")}
    hf, ours = _hf(tmp_path, "json", path, features), _ours(tmp_path, "json", path, features)
    assert ours["n"] == hf["n"] == list(range(120))  # 0.0 in the first block only, ints after
    # (HF writes the strings of a column of mixed kinds as JSON text too: a deliberate difference, see above)
    assert ours["s"] == [str(i) if i % 7 == 0 else f"t{i}" for i in range(120)]
    records[100]["n"] = 100.5  # line 101, in a block long after the one that loosened the column
    path = _write(tmp_path, "b.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(LoaderError, match=rf"^{path}.*line 101: column 'n': value 100\.5 cannot be stored as int32"):
        _ours(tmp_path / "again", "json", path, features)
    assert not list((tmp_path / "again").rglob("_metadata.json"))
