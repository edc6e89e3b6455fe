"""Generic loaders: load_dataset("csv" | "json" | "parquet" | "arrow" | "text", data_files=...)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stable_datasets as sds
from stable_datasets.errors import ExampleError
from stable_datasets.loaders import LoaderError


def _bump_mtime(path: Path) -> None:
    """Give a rewritten file a new mtime even on coarse-clock filesystems."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def _cache_dir(ds) -> str:
    return os.path.dirname(os.path.dirname(ds.cache_files[0]["filename"])) if ds.cache_files else ""


# -- CSV --------------------------------------------------------------------------------------
def test_csv_infers_types_and_nulls_like_pandas(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,name,score,flag\n1,ann,1.5,true\n2,,2.0,false\n3,NA,,true\n")
    ds = sds.load_dataset("csv", data_files=str(path), split="train")
    assert dict(ds.features) == {"id": sds.Value("int64"), "name": sds.Value("string"),
                                 "score": sds.Value("float64"), "flag": sds.Value("bool")}
    assert ds[:] == {"id": [1, 2, 3], "name": ["ann", None, None], "score": [1.5, 2.0, None],
                     "flag": [True, False, True]}


def test_csv_options_named_as_hugging_face_names_them(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("# a comment line\nx\ty\n1\ta\n2\tb\n")
    ds = sds.load_dataset("csv", data_files=str(path), split="train", sep="\t", skiprows=1)
    assert ds[:] == {"x": [1, 2], "y": ["a", "b"]}
    ds = sds.load_dataset("csv", data_files=str(path), split="train", delimiter="\t", skiprows=2, header=None)
    assert ds.column_names == ["0", "1"] and ds[:] == {"0": [1, 2], "1": ["a", "b"]}
    ds = sds.load_dataset("csv", data_files=str(path), split="train", delimiter="\t", skiprows=2,
                          column_names=["n", "s"])
    assert ds[:] == {"n": [1, 2], "s": ["a", "b"]}


def test_csv_row_with_wrong_number_of_fields_names_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    lines = ["a,b,c"] + [f"{i},{i},{i}" for i in range(1, 300)]
    lines[211] = "7,8,9,10"  # line 212 of the file
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LoaderError, match=r"bad\.csv, line 212: expected 3 fields, got 4"):
        sds.load_dataset("csv", data_files=str(path), split="train")


def test_csv_features_cast_and_a_value_that_does_not_fit_names_the_column(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("label,x\ncat,1\ndog,2\ncat,3\n")
    features = sds.Features({"label": sds.ClassLabel(names=["cat", "dog"]), "x": sds.Value("int16")})
    ds = sds.load_dataset("csv", data_files=str(path), split="train", features=features)
    assert ds.features == features and ds[:] == {"label": [0, 1, 0], "x": [1, 2, 3]}
    path.write_text("label,x\ncat,1\ndog,70000\n")
    with pytest.raises(LoaderError, match=r"d\.csv, line 3: column 'x': value '70000' cannot be stored as int16"):
        sds.load_dataset("csv", data_files=str(path), split="train", features=features)
    path.write_text("label,x\ncat,1\nbird,2\n")
    with pytest.raises(LoaderError, match=r"d\.csv, line 3: column 'label': unknown class name 'bird'"):
        sds.load_dataset("csv", data_files=str(path), split="train", features=features)


def test_csv_inferred_int_column_with_a_later_fraction_is_an_error_not_a_truncation(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x\n1\n2\n")
    features = {"x": sds.Value("int64")}
    path.write_text("x\n1\n2.5\n")
    with pytest.raises(LoaderError, match=r"d\.csv.*'x'"):
        sds.load_dataset("csv", data_files=str(path), split="train", features=features)


def test_csv_edit_add_remove_rebuild_and_unchanged_reuses(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.csv").write_text("x\n1\n2\n")
    pattern = str(folder / "*.csv")
    first = sds.load_dataset("csv", data_files=pattern, split="train")
    assert first["x"] == [1, 2]
    again = sds.load_dataset("csv", data_files=pattern, split="train")
    assert again.cache_files == first.cache_files  # unchanged: the same cache
    (folder / "a.csv").write_text("x\n1\n2\n3\n")
    _bump_mtime(folder / "a.csv")
    assert sds.load_dataset("csv", data_files=pattern, split="train")["x"] == [1, 2, 3]
    (folder / "b.csv").write_text("x\n9\n")
    assert sds.load_dataset("csv", data_files=pattern, split="train")["x"] == [1, 2, 3, 9]
    (folder / "a.csv").unlink()
    assert sds.load_dataset("csv", data_files=pattern, split="train")["x"] == [9]


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_csv_in_every_storage_format(tmp_path, storage_format):
    path = tmp_path / "d.csv"
    path.write_text("x,s\n" + "".join(f"{i},r{i}\n" for i in range(50)))
    ds = sds.load_dataset("csv", data_files=str(path), split="train", storage_format=storage_format)
    assert ds["x"] == list(range(50)) and ds[49] == {"x": 49, "s": "r49"}


# -- data_files forms and splits ------------------------------------------------------------------
def test_data_files_forms_and_split_selection(tmp_path):
    for name, rows in [("train1.csv", [1, 2]), ("train2.csv", [3]), ("test.csv", [7])]:
        (tmp_path / name).write_text("x\n" + "".join(f"{r}\n" for r in rows))
    as_list = sds.load_dataset("csv", data_files=[str(tmp_path / "train1.csv"), str(tmp_path / "train2.csv")])
    assert list(as_list) == ["train"] and as_list["train"]["x"] == [1, 2, 3]
    as_dict = sds.load_dataset("csv", data_files={"train": str(tmp_path / "train*.csv"),
                                                  "test": str(tmp_path / "test.csv")})
    assert sorted(as_dict) == ["test", "train"]
    assert as_dict["test"]["x"] == [7] and as_dict["train"]["x"] == [1, 2, 3]
    picked = sds.load_dataset("csv", data_files={"train": str(tmp_path / "train*.csv"),
                                                 "test": str(tmp_path / "test.csv")}, split="test")
    assert picked["x"] == [7]
    sliced = sds.load_dataset("csv", data_files=str(tmp_path / "train*.csv"), split="train[1:]")
    assert sliced["x"] == [2, 3]
    with pytest.raises(FileNotFoundError, match=r"nothing\*\.csv.*matches no file"):
        sds.load_dataset("csv", data_files=str(tmp_path / "nothing*.csv"), split="train")


def test_a_file_whose_name_has_glob_characters_is_read_as_named(tmp_path):
    """`scores [v1].csv` exists: it is that file, not a pattern matching `scores v.csv` or nothing."""
    (tmp_path / "scores [v1].csv").write_text("x\n1\n")
    (tmp_path / "scores v.csv").write_text("x\n2\n")
    ds = sds.load_dataset("csv", data_files=str(tmp_path / "scores [v1].csv"), split="train")
    assert ds["x"] == [1]
    assert sds.load_dataset("csv", data_files=str(tmp_path / "scores [v]*.csv"), split="train")["x"] == [2]


def test_a_leading_tilde_names_the_home_folder_in_data_files_and_data_dir(tmp_path, monkeypatch):
    """As load_dataset("~/folder") and cache_dir="~/..." already did; before, data_files="~/x.csv"
    was 'data file ~/x.csv does not exist' and data_dir="~" 'is not a folder'."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "t.csv").write_text("x\n4\n")
    assert sds.load_dataset("csv", data_files="~/t.csv", split="train")["x"] == [4]
    assert sds.load_dataset("csv", data_files={"train": ["~/*.csv"]})["train"]["x"] == [4]
    assert sds.load_dataset("csv", data_dir="~", split="train")["x"] == [4]


def test_data_dir_with_relative_data_files(tmp_path):
    (tmp_path / "a.csv").write_text("x\n5\n")
    ds = sds.load_dataset("csv", data_dir=str(tmp_path), data_files="a.csv", split="train")
    assert ds["x"] == [5]


def test_a_data_folder_is_loaded_with_the_loader_of_its_files(tmp_path):
    folder = tmp_path / "mydata"
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    (folder / "train" / "part-0.jsonl").write_text('{"t": "a"}\n{"t": "b"}\n')
    (folder / "test" / "part-0.jsonl").write_text('{"t": "z"}\n')
    (folder / "README.md").write_text("not data")
    dd = sds.load_dataset(str(folder))
    assert sorted(dd) == ["test", "train"]
    assert dd["train"]["t"] == ["a", "b"] and dd["test"]["t"] == ["z"]
    assert sds.load_dataset(str(folder), split="test")["t"] == ["z"]


def test_loader_without_files_is_a_clear_error():
    with pytest.raises(ValueError, match="'csv' loader needs data_files="):
        sds.load_dataset("csv", split="train")


# -- JSON -------------------------------------------------------------------------------------
def test_json_lines_nested_values_and_blank_lines(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1, "tags": ["x", "y"], "meta": {"k": 1.5}}\n\n{"a": 2, "tags": [], "meta": {"k": 2.5}}\n')
    ds = sds.load_dataset("json", data_files=str(path), split="train")
    assert ds[:] == {"a": [1, 2], "tags": [["x", "y"], []], "meta": [{"k": 1.5}, {"k": 2.5}]}


def test_json_top_level_array_and_field(tmp_path):
    (tmp_path / "arr.json").write_text(json.dumps([{"q": "a", "n": 1}, {"q": "b", "n": 2}], indent=2))
    assert sds.load_dataset("json", data_files=str(tmp_path / "arr.json"), split="train")[:] == \
        {"q": ["a", "b"], "n": [1, 2]}
    (tmp_path / "field.json").write_text(json.dumps({"version": 1, "data": [{"q": "c"}, {"q": "d"}]}))
    assert sds.load_dataset("json", data_files=str(tmp_path / "field.json"), field="data", split="train")["q"] == \
        ["c", "d"]
    (tmp_path / "cols.json").write_text(json.dumps({"data": {"q": ["e", "f"], "n": [5, 6]}}))
    assert sds.load_dataset("json", data_files=str(tmp_path / "cols.json"), field="data", split="train")[:] == \
        {"q": ["e", "f"], "n": [5, 6]}
    with pytest.raises(LoaderError, match="no top-level field 'rows'"):
        sds.load_dataset("json", data_files=str(tmp_path / "cols.json"), field="rows", split="train")


def test_invalid_json_on_line_812_names_the_file_and_line(tmp_path):
    path = tmp_path / "chat.jsonl"
    lines = [json.dumps({"i": i, "text": f"row {i}"}) for i in range(1000)]
    lines[811] = '{"i": 811, "text": "oops"'
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LoaderError, match=r"chat\.jsonl, line 812: invalid JSON"):
        sds.load_dataset("json", data_files=str(path), split="train")
    # the same in a parallel build, where the line falls in the second part's byte range
    with pytest.raises(LoaderError, match=r"chat\.jsonl, line 812: invalid JSON"):
        sds.load_dataset("json", data_files=str(path), split="train", num_proc=2)


def test_json_rows_of_a_parallel_build_equal_a_one_process_build(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps({"i": i, "s": "x" * (i % 7)}) + "\n" for i in range(5000)))
    one = sds.load_dataset("json", data_files=str(path), split="train")
    two = sds.load_dataset("json", data_files=str(path), split="train", num_proc=2, storage_format="parquet")
    assert one["i"] == list(range(5000)) and two[:] == one[:]


def test_json_edit_rebuilds(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"i": i}) + "\n" for i in range(50)))
    assert len(sds.load_dataset("json", data_files=str(path), split="train")) == 50
    path.write_text("".join(json.dumps({"i": i}) + "\n" for i in range(80)))
    _bump_mtime(path)
    assert len(sds.load_dataset("json", data_files=str(path), split="train")) == 80


# -- Parquet and Arrow ----------------------------------------------------------------------
def test_parquet_row_groups_divide_a_parallel_build(tmp_path):
    table = pa.table({"i": list(range(10_000)), "s": [f"r{i}" for i in range(10_000)]})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=1000)
    one = sds.load_dataset("parquet", data_files=str(tmp_path / "d.parquet"), split="train")
    two = sds.load_dataset("parquet", data_files=str(tmp_path / "d.parquet"), split="train", num_proc=2,
                           storage_format="parquet")
    assert one["i"] == list(range(10_000)) and two[:] == one[:]
    assert one.features == sds.Features({"i": sds.Value("int64"), "s": sds.Value("string")})


def test_parquet_with_hugging_face_features_keeps_them(tmp_path):
    import datasets

    hf = datasets.Dataset.from_dict({"label": [0, 1, 1], "x": [1.0, 2.0, 3.0]},
                                    features=datasets.Features({"label": datasets.ClassLabel(names=["no", "yes"]),
                                                                "x": datasets.Value("float32")}))
    hf.to_parquet(str(tmp_path / "hf.parquet"))
    ds = sds.load_dataset("parquet", data_files=str(tmp_path / "hf.parquet"), split="train")
    assert ds.features == sds.Features({"label": sds.ClassLabel(names=["no", "yes"]), "x": sds.Value("float32")})
    assert ds[:] == {"label": [0, 1, 1], "x": [1.0, 2.0, 3.0]}


def test_parquet_edit_rebuilds(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"i": [1, 2]}), path)
    assert sds.load_dataset("parquet", data_files=str(path), split="train")["i"] == [1, 2]
    pq.write_table(pa.table({"i": [1, 2, 3]}), path)
    _bump_mtime(path)
    assert sds.load_dataset("parquet", data_files=str(path), split="train")["i"] == [1, 2, 3]


def test_damaged_parquet_file_names_the_file(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"i": list(range(100))}), path)
    data = bytearray(path.read_bytes())
    data[-8:-4] = b"\xff\xff\xff\x7f"  # footer length beyond the file
    path.write_bytes(bytes(data))
    with pytest.raises(LoaderError, match=r"d\.parquet: not a readable Parquet file"):
        sds.load_dataset("parquet", data_files=str(path), split="train")


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_arrow_ipc_file_and_stream(tmp_path, kind):
    table = pa.table({"i": [1, 2, 3], "s": ["a", "b", None]})
    path = tmp_path / "d.arrow"
    with pa.OSFile(str(path), "wb") as sink:
        writer = pa.ipc.new_file(sink, table.schema) if kind == "file" else pa.ipc.new_stream(sink, table.schema)
        writer.write_table(table)
        writer.close()
    ds = sds.load_dataset("arrow", data_files=str(path), split="train")
    assert ds[:] == {"i": [1, 2, 3], "s": ["a", "b", None]}


def test_arrow_file_written_by_hugging_face(tmp_path):
    import datasets

    hf = datasets.Dataset.from_dict({"text": ["a", "b"], "n": [1, 2]})
    hf.save_to_disk(str(tmp_path / "saved"))
    arrow_files = sorted(str(p) for p in (tmp_path / "saved").glob("*.arrow"))
    ds = sds.load_dataset("arrow", data_files=arrow_files, split="train")
    assert ds[:] == {"text": ["a", "b"], "n": [1, 2]}


def test_a_folder_saved_by_hugging_face_save_to_disk_loads_with_its_splits_and_features(tmp_path):
    # before: the folder's loader was inferred from its most common files, the JSON ones
    # (state.json, dataset_info.json), and the load failed with 'state.json, line 1: invalid JSON'
    import datasets

    features = datasets.Features({"t": datasets.Value("string"), "l": datasets.ClassLabel(names=["n", "y"])})
    hf = datasets.Dataset.from_dict({"t": ["a", "b", "c"], "l": [0, 1, 1]}, features=features)
    hf.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": hf, "test": hf.select([2])}).save_to_disk(str(tmp_path / "both"))
    one = sds.load_dataset(str(tmp_path / "one"))
    assert list(one) == ["train"] and one["train"][:] == {"t": ["a", "b", "c"], "l": [0, 1, 1]}
    assert one["train"].features["l"] == sds.ClassLabel(names=["n", "y"])
    both = sds.load_dataset(str(tmp_path / "both"))
    assert list(both) == ["train", "test"] and both["test"][:] == {"t": ["c"], "l": [1]}
    assert sds.load_dataset(str(tmp_path / "both"), split="train")["t"] == ["a", "b", "c"]


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_arrow_file_with_a_damaged_offset_names_the_file_and_never_crashes(tmp_path, kind):
    # a string offset past the end of its data: pyarrow reads the batch without checking it, and
    # the Parquet writer then crashed the process (SIGBUS) while Arrow and Lance caches were
    # published with the damage in them (found only when read back, as a 'corrupt Arrow shard')
    import struct

    table = pa.table({"i": list(range(8)), "s": ["ab"] * 8})
    path = tmp_path / "d.arrow"
    with pa.OSFile(str(path), "wb") as sink:
        writer = pa.ipc.new_file(sink, table.schema) if kind == "file" else pa.ipc.new_stream(sink, table.schema)
        writer.write_table(table)
        writer.close()
    data = path.read_bytes()
    offsets = struct.pack("<4i", 0, 2, 4, 6)
    assert data.count(offsets) == 1
    path.write_bytes(data.replace(offsets, struct.pack("<4i", 0, 2, 1 << 30, 6)))
    probe = (
        "import sys, stable_datasets as sds\n"
        "for fmt in ('parquet', 'arrow', 'lance'):\n"
        "    try:\n"
        "        sds.load_dataset('arrow', data_files=sys.argv[1], split='train', storage_format=fmt,\n"
        "                         cache_dir=sys.argv[2])\n"
        "    except sds.loaders.LoaderError as exc:\n"
        "        print(fmt, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(path), str(tmp_path / "cache")], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["parquet", "arrow", "lance"], out.stdout
    for line in lines:
        assert f"{path}: record batch 0 (rows 0-7) is damaged (" in line, line
    assert not list((tmp_path / "cache").rglob("_metadata.json"))  # nothing published


# -- text -------------------------------------------------------------------------------------
def test_text_sample_by_line_paragraph_document(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"first line\r\nsecond\n\nthird para\nline two\n")
    by_line = sds.load_dataset("text", data_files=str(path), split="train")
    assert by_line["text"] == ["first line", "second", "", "third para", "line two"]
    kept = sds.load_dataset("text", data_files=str(path), split="train", keep_linebreaks=True)
    assert kept["text"] == ["first line\n", "second\n", "\n", "third para\n", "line two\n"]
    paragraphs = sds.load_dataset("text", data_files=str(path), split="train", sample_by="paragraph")
    assert paragraphs["text"] == ["first line\nsecond", "third para\nline two\n"]
    document = sds.load_dataset("text", data_files=str(path), split="train", sample_by="document")
    assert document["text"] == ["first line\nsecond\n\nthird para\nline two\n"]


def test_text_rows_match_hugging_face(tmp_path):
    import datasets

    path = tmp_path / "t.txt"
    path.write_text("alpha\n\nbeta  \n gamma\n\n\ndelta\nlast without newline")
    for options in ({}, {"keep_linebreaks": True}, {"sample_by": "paragraph"}, {"sample_by": "document"}):
        ours = sds.load_dataset("text", data_files=str(path), split="train", **options)["text"]
        theirs = datasets.load_dataset("text", data_files=str(path), split="train",
                                       cache_dir=str(tmp_path / "hf"), **options)["text"]
        assert ours == theirs, options


def test_text_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"ok\nok\nbad \xff byte\n")
    with pytest.raises(LoaderError, match=r"t\.txt, line 3: not valid utf-8"):
        sds.load_dataset("text", data_files=str(path), split="train")


def test_text_parallel_build_by_byte_ranges(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("".join(f"line {i}\n" for i in range(20_000)))
    ds = sds.load_dataset("text", data_files=str(path), split="train", num_proc=2)
    assert ds["text"] == [f"line {i}" for i in range(20_000)]


# -- against Hugging Face on the same files -----------------------------------------------------
def test_csv_and_json_rows_match_hugging_face(tmp_path):
    import datasets

    csv_path = tmp_path / "d.csv"
    csv_path.write_text('id,name,score\n1,"a, quoted",1.5\n2,,2\n3,"multi\nline",\n')
    json_path = tmp_path / "d.jsonl"
    json_path.write_text('{"id": 1, "tags": ["a"]}\n{"id": 2, "tags": ["b", "c"]}\n')
    for loader, path in (("csv", csv_path), ("json", json_path)):
        ours = sds.load_dataset(loader, data_files=str(path), split="train")
        theirs = datasets.load_dataset(loader, data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
        assert ours[:] == theirs[:], loader


# -- hostile input in a subprocess: an error, never a crash ---------------------------------
def test_flipped_bytes_in_input_files_fail_cleanly(tmp_path):
    # one subprocess imports stable_datasets once and forks a child per case: a crash still kills only the child,
    # and the parent reports each child's exit (before, one fresh interpreter per case cost ~4 s each)
    script = tmp_path / "probe.py"
    script.write_text("""
import os, sys, random
import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError

def probe(path, loader, seed, cache_dir):
    data = bytearray(open(path, 'rb').read())
    rng = random.Random(seed)
    for _ in range(8):
        data[rng.randrange(len(data))] = rng.randrange(256)
    open(path, 'wb').write(bytes(data))
    try:
        ds = sds.load_dataset(loader, data_files=path, split='train', cache_dir=cache_dir)
        len(ds); ds[:]
    except (ValueError, OSError, StableDatasetsError) as exc:
        print('result', path, 'error', type(exc).__name__)
    else:
        print('result', path, 'ok')

cache_dir, cases = sys.argv[1], sys.argv[2:]
for path, loader, seed in zip(cases[0::3], cases[1::3], cases[2::3]):
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            probe(path, loader, int(seed), cache_dir)
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code)
    print('exit', path, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
""")
    pq.write_table(pa.table({"i": list(range(500)), "s": [f"r{i}" for i in range(500)]}), tmp_path / "d.parquet",
                   row_group_size=100)
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"i": i, "s": f"r{i}"}) + "\n" for i in range(500)))
    (tmp_path / "d.csv").write_text("i,s\n" + "".join(f"{i},r{i}\n" for i in range(500)))
    cases = []
    for seed in range(3):
        for loader, name in (("parquet", "d.parquet"), ("json", "d.jsonl"), ("csv", "d.csv")):
            copy = tmp_path / f"{seed}-{name}"
            copy.write_bytes((tmp_path / name).read_bytes())
            cases.append((str(copy), loader, str(seed)))
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "c"), *(a for case in cases for a in case)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line.split() for line in out.stdout.splitlines()]
    exits = {line[1]: int(line[2]) for line in lines if line[0] == "exit"}
    results = {line[1]: line[2] for line in lines if line[0] == "result"}
    for path, loader, seed in cases:
        assert exits.get(path) == 0, (loader, seed, exits.get(path), out.stderr[-2000:])
        assert results.get(path) in ("ok", "error"), (loader, seed, out.stdout)


def test_touching_an_input_rebuilds_without_sleeping_on_coarse_clocks(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x\n1\n")
    first = sds.load_dataset("csv", data_files=str(path), split="train")
    time.sleep(0.01)
    path.touch()
    _bump_mtime(path)
    assert sds.load_dataset("csv", data_files=str(path), split="train").cache_files != first.cache_files


def test_an_example_error_names_the_loader_and_split(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(ExampleError, match=r"broken\.png"):
        sds.load_dataset("imagefolder", data_dir=str(tmp_path / "img"), split="train")


def test_json_field_beyond_the_inferred_features_names_the_line(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [json.dumps({"a": i}) for i in range(100_000)] + [json.dumps({"a": 1, "late": "x"})]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(LoaderError, match=r"d\.jsonl, line 100001: field 'late' is not in the features \['a'\]"):
        sds.load_dataset("json", data_files=str(path), split="train")


def test_remote_csv_over_http_is_downloaded_and_rebuilt_when_its_etag_changes(tmp_path):
    from tests.http_server import FileServer

    with FileServer() as server:
        server.files["/d.csv"] = b"x,y\n1,a\n"
        server.validators["/d.csv"] = {"ETag": '"v1"'}
        url = server.url + "/d.csv"
        assert sds.load_dataset("csv", data_files=url, split="train")[:] == {"x": [1], "y": ["a"]}
        server.files["/d.csv"] = b"x,y\n1,a\n2,b\n"
        server.validators["/d.csv"] = {"ETag": '"v2"'}
        assert sds.load_dataset("csv", data_files=url, split="train")["x"] == [1, 2]


def test_hugging_face_features_are_accepted(tmp_path):
    import datasets

    path = tmp_path / "d.csv"
    path.write_text("label,x\nneg,1\npos,2\n")
    hf_features = datasets.Features({"label": datasets.ClassLabel(names=["neg", "pos"]), "x": datasets.Value("int32")})
    ds = sds.load_dataset("csv", data_files=str(path), split="train", features=hf_features)
    assert ds.features == sds.Features({"label": sds.ClassLabel(names=["neg", "pos"]), "x": sds.Value("int32")})
    assert ds[:] == {"label": [0, 1], "x": [1, 2]}


def test_csv_files_divided_among_processes_keep_their_order(tmp_path):
    for i in range(5):
        (tmp_path / f"part-{i}.csv").write_text("x\n" + "".join(f"{10 * i + j}\n" for j in range(i + 1)))
    one = sds.load_dataset("csv", data_files=str(tmp_path / "part-*.csv"), split="train")
    two = sds.load_dataset("csv", data_files=str(tmp_path / "part-*.csv"), split="train", num_proc=2,
                           storage_format="lance")
    assert one["x"] == [0, 10, 11, 20, 21, 22, 30, 31, 32, 33, 40, 41, 42, 43, 44] and two["x"] == one["x"]


def test_one_large_csv_is_divided_by_line_ranges_outside_quotes(tmp_path):
    from stable_datasets.loaders.csv_files import CsvLoader, _cuts_outside_quotes

    plain = tmp_path / "plain.csv"
    plain.write_text("# skipped\nid,name\n" + "".join(f'{i},"n {i}"\n' for i in range(20_000)))
    builder = sds.load_builder("csv", data_files=str(plain), skiprows=1)
    assert isinstance(builder, CsvLoader) and len(builder.piece_ranges(str(plain), 3)) == 3
    one = sds.load_dataset("csv", data_files=str(plain), split="train", skiprows=1)
    three = sds.load_dataset("csv", data_files=str(plain), split="train", skiprows=1, num_proc=3)
    assert one["id"] == list(range(20_000)) and three[:] == one[:]

    quoted = tmp_path / "quoted.csv"
    quoted.write_text("id,text\n" + "".join(f'{i},"line {i}\nnext line of {i}"\n' for i in range(5000)))
    data = quoted.read_bytes()
    pieces = builder.piece_ranges(str(quoted), 7)
    assert pieces[0][1] == 0 and pieces[-1][2] == len(data) and len(pieces) > 1
    assert all(a[2] == b[1] for a, b in itertools.pairwise(pieces))  # contiguous, nothing lost
    for _, lo, hi in pieces:  # every cut ends a record: an even number of quotes before it
        assert data[:hi].count(b'"') % 2 == 0 and data[lo:hi].endswith(b'"\n')
    cuts = builder._line_cuts(str(quoted), 7)
    assert _cuts_outside_quotes(str(quoted), cuts, '"', chunk_bytes=7) == [0] + [p[2] for p in pieces]  # 7-byte chunks
    two = sds.load_dataset("csv", data_files=str(quoted), split="train", num_proc=2)
    assert two["text"][4999] == "line 4999\nnext line of 4999" and len(two) == 5000


# -- found by hostile6 (hostile inputs to the loaders) ------------------------------------------
@pytest.mark.parametrize(("name", "text"), [("ids.csv", "id\n18446744073709551615\n1\n"),
                                            ("ids.jsonl", '{"id": 18446744073709551615}\n{"id": 1}\n')])
def test_integers_past_int64_are_kept_exactly_as_uint64(tmp_path, name, text):
    # pandas reads this column as uint64; pyarrow's inference alone gave float64 and rounded it
    (tmp_path / name).write_text(text)
    ds = sds.load_dataset("csv" if name.endswith(".csv") else "json", data_files=str(tmp_path / name), split="train")
    assert ds.features["id"] == sds.Value("uint64") and ds["id"] == [18446744073709551615, 1]


@pytest.mark.parametrize(("name", "text", "line", "fits"), [
    ("big.csv", "id\n1\n184467440737095516150\n", 3, "fits neither int64 nor uint64"),
    ("mixed.csv", "id,x\n-5,1\n18446744073709551615,2\n", 3, "fits no integer type in a column that also has"),
    ("big.jsonl", '{"id": 1}\n{"id": 184467440737095516150}\n', 2, "fits neither int64 nor uint64"),
    ("mixed.jsonl", '{"id": 18446744073709551615}\n{"id": -1}\n', 2, "fits no integer type")])
def test_integers_no_integer_type_holds_are_refused_naming_the_line(tmp_path, name, text, line, fits):
    (tmp_path / name).write_text(text)
    with pytest.raises(LoaderError, match=rf"{name.replace('.', '[.]')}, line {line}: column 'id': the integer "
                                          rf"-?\d+ {fits}"):
        sds.load_dataset("csv" if name.endswith(".csv") else "json", data_files=str(tmp_path / name), split="train")


def test_floats_beside_a_long_integer_stay_float64(tmp_path):
    (tmp_path / "f.csv").write_text("v\n1.5\n18446744073709551615\n")
    ds = sds.load_dataset("csv", data_files=str(tmp_path / "f.csv"), split="train")
    assert ds.features["v"] == sds.Value("float64") and ds["v"] == [1.5, 18446744073709551615.0]


@pytest.mark.parametrize("name", ["late.csv", "late.jsonl"])
def test_an_integer_past_int64_after_the_sample_names_its_line(tmp_path, name):
    rows, text = 25_000, "x" * 40  # past the 1 MiB sample the types are inferred from
    if name.endswith(".csv"):
        body = "id,t\n" + "".join(f"{i},{text}\n" for i in range(rows)) + "9223372036854775808,y\n"
        line = rows + 2
    else:
        body = "".join(f'{{"id": {i}, "t": "{text}"}}\n' for i in range(rows))
        body += '{"id": 9223372036854775808, "t": "y"}\n'
        line = rows + 1
    (tmp_path / name).write_text(body)
    with pytest.raises(LoaderError, match=rf"{name.replace('.', '[.]')}, line {line}: column 'id': value '?"
                                          r"9223372036854775808'? cannot be stored as int64; pass features="):
        sds.load_dataset("csv" if name.endswith(".csv") else "json", data_files=str(tmp_path / name), split="train")


def test_a_missing_data_file_is_named_before_anything_is_read(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data file .*nothere[.]csv does not exist \(split 'train'\)"):
        sds.load_dataset("csv", data_files=str(tmp_path / "nothere.csv"), split="train")


def test_an_empty_json_file_says_it_is_empty_and_nothing_else(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(LoaderError) as info:
        sds.load_dataset("json", data_files=str(tmp_path / "empty.jsonl"), split="train")
    assert "empty.jsonl" in str(info.value) and "empty" in str(info.value).lower()
    assert "changes type" not in str(info.value) and "lines 1-0" not in str(info.value)


def test_a_csv_not_valid_in_its_encoding_is_an_error_naming_the_file_and_line(tmp_path):
    (tmp_path / "latin.csv").write_bytes("name\ncafé\n".encode("latin-1"))
    with pytest.raises(LoaderError, match=r"latin\.csv, line 2"):
        sds.load_dataset("csv", data_files=str(tmp_path / "latin.csv"), split="train")
    assert sds.load_dataset("csv", data_files=str(tmp_path / "latin.csv"), split="train",
                            encoding="latin-1")["name"] == ["café"]


@pytest.mark.parametrize("header", ["a,a", "a,"])
def test_a_bad_csv_header_is_an_error_naming_the_file(tmp_path, header):
    (tmp_path / "head.csv").write_text(f"{header}\n1,2\n")
    with pytest.raises(LoaderError, match=r"head\.csv"):
        sds.load_dataset("csv", data_files=str(tmp_path / "head.csv"), split="train")


def test_a_folder_of_mixed_files_says_which_files_it_leaves_out(tmp_path, warnings_logged):
    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "b.jsonl").write_text('{"x": 2}\n')
    (tmp_path / "c.jsonl").write_text('{"x": 3}\n')
    assert sds.load_dataset(str(tmp_path), split="train")["x"] == [2, 3]
    assert any("a.csv" in m for m in warnings_logged), warnings_logged


@pytest.mark.parametrize("where", ["first", "later"])
def test_a_record_of_several_mib_loads_as_in_hugging_face(tmp_path, where):
    # a long document in a JSON Lines file or a CSV field (HF grows its block size): before,
    # "straddling object straddles two block boundaries" for JSON, and for CSV "line 2: field
    # larger than field limit (131072)", the limit of the csv module used to locate the error
    long = "w" * (3 << 20)
    jsonl = tmp_path / "docs.jsonl"
    rows = [{"id": i, "text": f"doc {i}"} for i in range(3)]
    rows[0 if where == "first" else 2]["text"] = long
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = sds.load_dataset("json", data_files=str(jsonl), split="train")
    assert ds["text"] == [r["text"] for r in rows]
    table = tmp_path / "docs.csv"
    table.write_text("id,text\n" + "".join(f'{r["id"]},"{r["text"]}, quoted"\n' for r in rows))
    ds = sds.load_dataset("csv", data_files=str(table), split="train")
    assert ds["text"] == [r["text"] + ", quoted" for r in rows]


def test_a_malformed_csv_row_after_a_long_field_is_named(tmp_path):
    table = tmp_path / "d.csv"
    table.write_text("a,b\n1," + "x" * 200_000 + "\n2,y,extra\n")
    with pytest.raises(LoaderError, match=rf"{table}, line 3: expected 2 fields, got 3"):
        sds.load_dataset("csv", data_files=str(table), split="train")


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_inputs_are_read_as_in_hugging_face(tmp_path, suffix):
    # before: '<file>.gz, not valid utf-8 text (invalid start byte, in line 1)' (HF decompresses them)
    import bz2
    import gzip
    import lzma

    def compress(data: bytes) -> bytes:
        if suffix == ".zst":
            out = pa.BufferOutputStream()
            with pa.CompressedOutputStream(out, "zstd") as stream:
                stream.write(data)
            return out.getvalue().to_pybytes()
        return {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](data)

    csv_file = tmp_path / f"d.csv{suffix}"
    csv_file.write_bytes(compress(b"a,b\n1,x\n2,y\n"))
    assert sds.load_dataset("csv", data_files=str(csv_file), split="train")[:] == {"a": [1, 2], "b": ["x", "y"]}
    jsonl = tmp_path / f"d.jsonl{suffix}"
    jsonl.write_bytes(compress(b'{"a": 1}\n{"a": 2}\n'))
    assert sds.load_dataset("json", data_files=str(jsonl), split="train")["a"] == [1, 2]
    text = tmp_path / f"d.txt{suffix}"
    text.write_bytes(compress(b"l1\nl2\n"))
    assert sds.load_dataset("text", data_files=str(text), split="train")["text"] == ["l1", "l2"]
    csv_file.write_bytes(compress(b"a,b\n3,z\n"))  # edited: rebuilt from the new content
    assert sds.load_dataset("csv", data_files=str(csv_file), split="train")[:] == {"a": [3], "b": ["z"]}


def test_a_damaged_compressed_input_names_the_file(tmp_path):
    import gzip

    data = bytearray(gzip.compress(b"a,b\n" + b"".join(b"%d,x\n" % i for i in range(1000))))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "d.csv.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(LoaderError, match=rf"{path}: damaged gzip data \("):
        sds.load_dataset("csv", data_files=str(path), split="train")


def test_a_folder_of_compressed_data_files_is_read_by_their_inner_format(tmp_path):
    import gzip

    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl.gz").write_bytes(gzip.compress(b'{"a": 1}\n{"a": 2}\n'))
    (folder / "test.jsonl.gz").write_bytes(gzip.compress(b'{"a": 3}\n'))
    splits = sds.load_dataset(str(folder))
    assert splits["train"]["a"] == [1, 2] and splits["test"]["a"] == [3]
    assert sds.load_dataset("json", data_dir=str(folder), split="test")["a"] == [3]


def test_an_empty_first_file_does_not_stop_inference_from_the_others(tmp_path):
    # as in Hugging Face: before, '<file>: the file is empty (no JSON records)' when the empty
    # file came first in data_files (the same files in the other order loaded)
    (tmp_path / "0-empty.jsonl").write_text("")
    (tmp_path / "1-rows.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    ds = sds.load_dataset("json", data_files=str(tmp_path / "*.jsonl"), split="train")
    assert ds[:] == {"a": [1, 2]}
    (tmp_path / "1-rows.jsonl").write_text("")
    with pytest.raises(LoaderError, match=r"0-empty\.jsonl: the file is empty \(no JSON records\)"):
        sds.load_dataset("json", data_files=str(tmp_path / "*.jsonl"), split="train")


def test_a_folder_given_as_a_data_file_is_named_with_what_to_pass(tmp_path):
    # before: pyarrow's "OSError: Expected file path, but ... is a directory", after the folder's
    # stat (which an edit inside it does not change) had gone into the fingerprint
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n1\n")
    with pytest.raises(ValueError, match=rf"data file {tmp_path / 'data'} \(split 'train'\) is a folder: pass "
                                         r"data_dir= or a glob such as '.*data/\*\*'"):
        sds.load_dataset("csv", data_files=str(tmp_path / "data"), split="train")


def test_a_column_name_lance_cannot_store_is_named_before_anything_is_built(tmp_path):
    # before: "OSError: LanceError(Schema): Top level field a.b cannot contain `.` ... schema.rs:359:28"
    (tmp_path / "d.csv").write_text("id,a.b\n1,2\n")
    message = (r"storage_format='lance' cannot store the column 'a\.b': Lance reads a dot in a column name as a "
               r"path into a struct; rename the column \(rename_column\) or choose storage_format='arrow' or "
               r"'parquet'")
    with pytest.raises(ValueError, match=message):
        sds.load_dataset("csv", data_files=str(tmp_path / "d.csv"), split="train", storage_format="lance")
    with pytest.raises(ValueError, match=message):
        sds.StableDataset.from_dict({"id": [1], "a.b": [2]}, storage_format="lance")
    assert sds.load_dataset("csv", data_files=str(tmp_path / "d.csv"), split="train")[0] == {"id": 1, "a.b": 2}


def test_a_column_type_without_a_feature_names_the_file_and_column(tmp_path):
    # before: "no feature type for Arrow type map<string, int64 ('m')>; pass features=...", no file
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": [1], "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}), path)
    with pytest.raises(LoaderError, match=rf"{path}: column 'm': no feature type for Arrow type map<string, int64"):
        sds.load_dataset("parquet", data_files=str(path), split="train")


def test_pretty_printed_json_records_are_named_by_the_line_they_start_on(tmp_path):
    # before: "b.json, line 1: invalid JSON (Expecting property name enclosed in double quotes)"
    # for a valid file whose record has a field the features (from a.json) lack
    (tmp_path / "a.json").write_text('{\n  "n": 1\n}\n')
    (tmp_path / "b.json").write_text('{\n  "n": 2\n}\n{\n  "n": 3,\n  "extra": "x"\n}\n')
    with pytest.raises(LoaderError, match=rf"{tmp_path / 'b.json'}, line 4: field 'extra' is not in the features "
                                          r"\['n'\]; pass features= naming every field"):
        sds.load_dataset("json", data_files=[str(tmp_path / "a.json"), str(tmp_path / "b.json")], split="train")
    (tmp_path / "b.json").write_text('{\n  "n": 2\n}\n{\n  "n": 3,\n  "n2": \n}\n')
    with pytest.raises(LoaderError, match=rf"{tmp_path / 'b.json'}, line \d: invalid JSON"):
        sds.load_dataset("json", data_files=[str(tmp_path / "a.json"), str(tmp_path / "b.json")], split="train")


def write_csv_with_quoted_crlf_at(path: Path, offsets: list[int], encoding: str = "utf-8") -> list[str]:
    """A CSV (id,text) whose rows include `"x\\r\\ny"` values with their "\\r" at each byte offset of `offsets` (of
    the text as UTF-8) between rows of filler; returns the `text` column it holds."""
    lines, values, size = ["id,text\n"], [], 8

    def add(value: str) -> None:
        nonlocal size
        lines.append(f'{len(values)},"{value}"\n')
        values.append(value)
        size += len(lines[-1].encode())

    for offset in offsets:
        while size < offset - 200:
            add("f" * 60)
        add("x" * (offset - size - len(f'{len(values)},"')) + "\r\ny")
    add("last")
    path.write_bytes("".join(lines).encode(encoding))
    return values


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_quoted_crlf_cut_by_a_parse_block_keeps_its_line_feed(tmp_path, encoding):
    from stable_datasets.loaders.csv_files import PARSE_BLOCK_BYTES

    block = PARSE_BLOCK_BYTES  # the "\r" the last byte of the first and the third block, the "\n" a block's first
    path = tmp_path / "crlf.csv"
    values = write_csv_with_quoted_crlf_at(path, [block - 1, 3 * block - 1], encoding)
    text = path.read_bytes().decode(encoding).encode()
    assert text[block - 1:block + 1] == text[3 * block - 1:3 * block + 1] == b"\r\n"
    built = sds.load_dataset("csv", data_files=str(path), split="train", encoding=encoding)
    assert built["text"] == values
    assert sum(v.endswith("\r\ny") for v in built["text"]) == 2


def write_text_lines(path: Path, encoding: str, least_bytes: int) -> list[str]:
    """Lines of CJK text (上 is 0A 4E in UTF-16-LE: a 0x0A byte that is no line feed) and emoji (surrogate pairs) in
    `encoding`, at least `least_bytes` of them; returns the lines."""
    lines, size, mark = [], 0, len("".encode(encoding))
    while size < least_bytes:
        lines.append(f"{len(lines)} 上海 Ċ 😀 " + "上" * (len(lines) % 300))
        size += len(f"{lines[-1]}\n".encode(encoding)) - mark
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return lines


def test_utf16_text_past_a_read_block_gives_every_line_back(tmp_path):
    from stable_datasets.loaders.lines import BLOCK_BYTES

    encoding = "utf-16"  # UTF-32 and the other byte order: test_file_stream, with small units

    path = tmp_path / "wide.txt"
    lines = write_text_lines(path, encoding, BLOCK_BYTES + (1 << 20))  # more than one block of whole lines
    assert path.stat().st_size > BLOCK_BYTES
    for errors in ("strict", "replace"):  # replace never garbles a valid line
        built = sds.load_dataset("text", data_files=str(path), split="train", encoding=encoding,
                                 encoding_errors=errors)
        assert built["text"] == lines
