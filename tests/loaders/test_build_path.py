"""The cold-build path of the tabular loaders: what it skips must not change what it checks."""

from __future__ import annotations

import hashlib
import os

import pytest

import stable_datasets as sds
from stable_datasets.cache import hashing
from stable_datasets.loaders.csv_files import CsvLoader


def test_file_hasher_digest_matches_the_file_written_in_steps(tmp_path):
    path = tmp_path / "shard.bin"
    chunk = os.urandom(hashing._WRITEBACK_STEP // 3 + 17)
    with open(path, "wb") as fh:
        hasher = hashing.FileHasher(path)
        written = 0
        for _ in range(10):  # past the writeback step several times, not on its boundary
            fh.write(chunk)
            fh.flush()
            written += len(chunk)
            hasher.advance(written)
        fh.write(b"tail")
    assert hasher.finish() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_features_are_inferred_once_per_build_and_again_when_the_file_changes(tmp_path, monkeypatch):
    data = tmp_path / "a.csv"
    data.write_text("x,y\n1,a\n2,b\n")
    calls = []
    original = CsvLoader.infer_features

    def counting(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(CsvLoader, "infer_features", counting)
    ds = sds.load_dataset("csv", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.to_dict() == {"x": [1, 2], "y": ["a", "b"]}
    assert len(calls) == 1
    data.write_text("x,y\n1.5,a\n2,b\n3,c\n")  # another size: the first file is not the one inferred from
    ds = sds.load_dataset("csv", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.to_dict() == {"x": [1.5, 2.0, 3.0], "y": ["a", "b", "c"]}
    assert len(calls) == 2


def test_a_csv_read_in_ranges_gives_the_rows_and_errors_of_one_read(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files
    from stable_datasets.loaders.columns import LoaderError

    monkeypatch.setattr(csv_files, "RANGE_BYTES", 64)  # about 6 lines a range
    path = tmp_path / "r.csv"
    path.write_text("n,word\n" + "".join(f"{i},w{i}\n" for i in range(200)))
    ds = sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c1"))
    assert ds.to_dict() == {"n": list(range(200)), "word": [f"w{i}" for i in range(200)]}
    lines = path.read_text().splitlines()
    lines[150] = "oops,w149"  # line 151 of the file, in a late range
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LoaderError, match=r"r\.csv, line 151: column 'n': value 'oops' cannot be stored as int64"):
        sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c2"),
                         features={"n": sds.Value("int64"), "word": sds.Value("string")})
    assert not list((tmp_path / "c2").rglob("_metadata.json"))


def test_a_csv_with_a_quoted_line_break_is_not_cut_into_ranges(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files

    monkeypatch.setattr(csv_files, "RANGE_BYTES", 64)
    path = tmp_path / "q.csv"
    path.write_text("n,word\n" + "".join(f'{i},"w{i}\nsecond"\n' for i in range(100)))
    ds = sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    assert ds["word"] == [f"w{i}\nsecond" for i in range(100)]


def test_read_ahead_raises_the_readers_error_and_stops_a_reader_left_early():
    from stable_datasets.loaders.read_ahead import read_ahead

    def failing():
        yield 1
        raise ValueError("bad line 7")

    seen = []
    with pytest.raises(ValueError, match="bad line 7"):
        for item in read_ahead(failing()):
            seen.append(item)
    assert seen == [1]

    produced = []
    closed = []

    def endless():
        try:
            i = 0
            while True:
                produced.append(i)
                yield i
                i += 1
        finally:
            closed.append(True)

    reader = read_ahead(endless(), depth=2)
    assert [next(reader) for _ in range(3)] == [0, 1, 2]
    reader.close()  # the consumer stops: the thread stops too, and closes the generator
    assert closed == [True] and len(produced) <= 3 + 2 + 1


def _parquet(path, **columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)
    return str(path)


def test_a_table_already_in_the_features_schema_is_kept_but_class_ids_are_still_checked(tmp_path):
    from stable_datasets.loaders.columns import LoaderError

    features = {"x": sds.Value("int64"), "label": sds.ClassLabel(names=["a", "b", "c"])}
    good = _parquet(tmp_path / "good.parquet", x=[1, 2, 3], label=[0, 2, 1])
    ds = sds.load_dataset("parquet", data_files=good, split="train", cache_dir=str(tmp_path / "c1"), features=features)
    assert ds.to_dict() == {"x": [1, 2, 3], "label": [0, 2, 1]}
    bad = _parquet(tmp_path / "bad.parquet", x=[1, 2, 3], label=[0, 7, 1])  # the schema is the features' schema
    with pytest.raises(LoaderError, match=r"bad\.parquet: column 'label', row 2: class index 7 is out of range "
                                          r"\[0, 3\)"):
        sds.load_dataset("parquet", data_files=bad, split="train", cache_dir=str(tmp_path / "c2"), features=features)


def test_a_file_column_of_another_type_is_cast_and_a_bad_value_named_by_row(tmp_path):
    from stable_datasets.loaders.columns import LoaderError

    path = _parquet(tmp_path / "f.parquet", x=[1.0, 2.0, 2.5])
    with pytest.raises(LoaderError, match=r"f\.parquet: column 'x', row 3: value 2\.5 cannot be stored as "
                                          r"Value\(dtype='int64'\) \(.*\); pass features= to store the column"):
        sds.load_dataset("parquet", data_files=path, split="train", cache_dir=str(tmp_path / "c"),
                         features={"x": sds.Value("int64")})
    ok = _parquet(tmp_path / "ok.parquet", x=[1.0, 2.0, 3.0])
    ds = sds.load_dataset("parquet", data_files=ok, split="train", cache_dir=str(tmp_path / "c"),
                          features={"x": sds.Value("int64")})
    assert ds["x"] == [1, 2, 3]


def test_a_float_that_would_become_inf_is_refused_by_loaders_as_by_from_dict(tmp_path):
    from stable_datasets.errors import ExampleError
    from stable_datasets.loaders.columns import LoaderError

    path = _parquet(tmp_path / "big.parquet", x=[1.0, 1e300])
    with pytest.raises(LoaderError, match=r"big\.parquet: column 'x', row 2: value 1e\+300 cannot be stored as "
                                          r"Value\(dtype='float32'\) \(it would be stored as inf\)"):
        sds.load_dataset("parquet", data_files=path, split="train", cache_dir=str(tmp_path / "c"),
                         features={"x": sds.Value("float32")})
    with pytest.raises(ExampleError, match=r"example key 1, field 'x': value 1e\+300 does not fit float32"):
        sds.StableDataset.from_dict({"x": [1.0, 1e300]}, features={"x": sds.Value("float32")},
                                    cache_dir=str(tmp_path / "m"))


def test_one_cast_two_wordings_of_the_same_bad_class_name(tmp_path):
    from stable_datasets.errors import ExampleError
    from stable_datasets.loaders.columns import LoaderError

    features = {"label": sds.ClassLabel(names=["cat", "dog"])}
    path = _parquet(tmp_path / "l.parquet", label=["cat", "dog", "cow"])
    with pytest.raises(LoaderError, match=r"l\.parquet: column 'label', row 3: unknown class name 'cow'; "
                                          r"names are \['cat', 'dog'\]$"):
        sds.load_dataset("parquet", data_files=path, split="train", cache_dir=str(tmp_path / "c"), features=features)
    with pytest.raises(ExampleError, match=r"example key 2, field 'label': unknown class name 'cow'; "
                                           r"names are \['cat', 'dog'\]"):
        sds.StableDataset.from_dict({"label": ["cat", "dog", "cow"]}, features=features, cache_dir=str(tmp_path / "m"))


def test_a_csv_whose_type_changes_after_the_first_range_names_file_line_and_column(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files
    from stable_datasets.loaders.columns import LoaderError

    monkeypatch.setattr(csv_files, "RANGE_BYTES", 64)
    monkeypatch.setattr(csv_files, "SAMPLE_BYTES", 64)  # features inferred from the first lines: n is int64
    path = tmp_path / "late.csv"
    path.write_text("n,word\n" + "".join(f"{i},w{i}\n" for i in range(150)) + "1.5,late\n" + "7,w\n")
    with pytest.raises(LoaderError, match=r"late\.csv, line 152: column 'n': value '1\.5' cannot be stored as "
                                          r"int64; pass features="):
        sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c1"))
    assert not list((tmp_path / "c1").rglob("_metadata.json"))
    ds = sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c2"),
                          features={"n": sds.Value("float64"), "word": sds.Value("string")})
    assert ds["n"][150:] == [1.5, 7.0] and ds["word"][151] == "w"


def test_a_range_cut_inside_quotes_is_joined_to_the_next_range(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files

    monkeypatch.setattr(csv_files, "RANGE_BYTES", 40)  # a cut every few lines, many inside a quoted field
    path = tmp_path / "q.csv"
    rows = [(i, f"a{i}\nb,{i}\n\nc") for i in range(60)]
    path.write_text("n,text\n" + "".join(f'{i},"{t}"\n' for i, t in rows))
    data = path.read_bytes()
    builder = sds.load_builder("csv", data_files=str(path))
    cuts = builder._line_cuts(str(path), 20)
    assert any(data[:c].count(b'"') % 2 for c in cuts)  # some cuts do fall inside quotes
    with open(path, "rb") as fh:
        ranges = list(csv_files._whole_record_ranges(fh, cuts, '"'))
    assert b"".join(d for _, d in ranges) == data and all(d.count(b'"') % 2 == 0 for _, d in ranges)
    ds = sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    assert ds.to_dict() == {"n": [i for i, _ in rows], "text": [t for _, t in rows]}


def test_a_pyarrow_block_cut_inside_quotes_is_parsed_again_following_quotes(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files

    path = tmp_path / "blocks.csv"  # > 1 MiB: pyarrow cuts it into blocks at line breaks, some inside quotes
    rows = [(i, "x" * (i % 50) + "\n" + "y" * (i % 7)) for i in range(40_000)]
    path.write_text("n,text\n" + "".join(f'{i},"{t}"\n' for i, t in rows))
    parsed = []
    original = csv_files.CsvLoader._parse

    def recording(self, *args, **kwargs):
        table, careful = original(self, *args, **kwargs)
        parsed.append(careful)
        return table, careful

    monkeypatch.setattr(csv_files.CsvLoader, "_parse", recording)
    ds = sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    assert parsed == [True]  # the fast parse failed; nothing it read was kept
    assert ds["n"] == list(range(40_000)) and ds["text"] == [t for _, t in rows]


def test_written_metadata_is_the_metadata_as_a_dict_in_declared_column_order(tmp_path):
    import json

    from stable_datasets.cache.metadata import CacheMetadata

    path = tmp_path / "m.csv"
    path.write_text("z,a,m\n1,x,2.5\n")
    sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    (written,) = (tmp_path / "c").rglob("_metadata.json")
    data = json.loads(written.read_text())
    assert data == CacheMetadata.read(written.parent).to_dict()
    assert list(data["features"]) == ["z", "a", "m"] and data["shards"][0]["num_rows"] == 1


def test_a_quote_that_never_closes_streams_the_rest_of_the_csv(tmp_path, monkeypatch):
    from stable_datasets.loaders import csv_files

    monkeypatch.setattr(csv_files, "RANGE_BYTES", 64)
    monkeypatch.setattr(csv_files, "WHOLE_FILE_BYTES", 256)  # a range may not grow past this
    path = tmp_path / "stray.csv"  # a quote inside an unquoted field: every count after it is odd
    lines = [f"{i},w{i}" for i in range(200)]
    lines[3] = '3,5ft10"'
    path.write_text("n,word\n" + "\n".join(lines) + "\n")
    with open(path, "rb") as fh:
        ranges = list(csv_files._whole_record_ranges(fh, [0, 40, 80, 120, 400, 800, path.stat().st_size],
                                                     '"', 256))
    assert ranges[-1][1] is None and all(d is not None for _, d in ranges[:-1])
    ds = sds.load_dataset("csv", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    assert ds["n"] == list(range(200)) and ds["word"][3] == '5ft10"' and ds["word"][199] == "w199"
