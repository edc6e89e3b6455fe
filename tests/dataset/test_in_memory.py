"""In-memory constructors and exports: each constructor publishes a content-fingerprinted cache
through the write path; the exports give the stored values back."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets import StableDataset
from stable_datasets.errors import ExampleError
from stable_datasets.features.image import encode_image_array


def _png(value: int) -> bytes:
    return encode_image_array(np.full((2, 3, 3), value, np.uint8))


def test_from_dict_infers_features_keeps_order_and_round_trips(cache_root):
    ds = StableDataset.from_dict({"zeta": [3, 1, 2], "alpha": ["c", "a", "b"], "mid": [[1.5], [], [2.0, 3.0]]})
    assert ds.column_names == ["zeta", "alpha", "mid"]
    assert ds.features == sds.Features({"zeta": sds.Value("int64"), "alpha": sds.Value("string"),
                                        "mid": sds.Sequence(sds.Value("float64"))})
    assert ds[1] == {"zeta": 1, "alpha": "a", "mid": []}
    assert ds.to_dict() == {"zeta": [3, 1, 2], "alpha": ["c", "a", "b"], "mid": [[1.5], [], [2.0, 3.0]]}
    assert ds.to_list()[2] == {"zeta": 2, "alpha": "b", "mid": [2.0, 3.0]}
    assert ds.to_arrow().schema.names == ["zeta", "alpha", "mid"]
    # the published metadata lists the columns in declared order, so a reopen keeps it
    directory = ds.cache_dirs[0]
    assert list(json.loads((directory / "_metadata.json").read_text())["features"]) == ["zeta", "alpha", "mid"]
    assert sds.open_cache(directory).column_names == ["zeta", "alpha", "mid"]
    assert str(directory).startswith(str(cache_root / "in_memory" / "from_dict"))


def test_same_content_reuses_the_cache_and_changed_content_does_not(cache_root):
    first = StableDataset.from_dict({"x": list(range(100))})
    # the same values in another container (numpy, chunked Arrow) are the same content
    again = StableDataset.from_dict({"x": np.arange(100)})
    chunked = StableDataset.from_dict({"x": pa.chunked_array([list(range(40)), list(range(40, 100))])})
    assert again.cache_dirs == first.cache_dirs and chunked.cache_dirs == first.cache_dirs
    from_arrow = StableDataset.from_arrow(pa.table({"x": pa.chunked_array([list(range(70)), list(range(70, 100))])}))
    assert from_arrow.cache_metadata[0].fingerprint_inputs["content_sha256"] == \
        first.cache_metadata[0].fingerprint_inputs["content_sha256"]  # another constructor: its own folder
    changed = StableDataset.from_dict({"x": [*range(99), 1000]})
    assert changed.cache_dirs != first.cache_dirs and changed["x"][-1] == 1000
    other_features = StableDataset.from_dict({"x": list(range(100))}, features={"x": sds.Value("int32")})
    assert other_features.cache_dirs != first.cache_dirs and other_features.features["x"] == sds.Value("int32")
    builds = list((cache_root / "in_memory" / "from_dict" / "1.0.0").iterdir())
    assert len(builds) == 3  # first (= again), changed, other_features


def test_bad_values_name_the_column_and_row():
    with pytest.raises(ExampleError, match=r"example key 2, field 'small': value 300 does not fit int8|"
                                           r"example key 2, field 'small': value 300 is out of range"):
        StableDataset.from_dict({"small": [1, 2, 300]}, features={"small": sds.Value("int8")})
    with pytest.raises(ExampleError, match=r"example key 1, field 'label': unknown class name 'cow'"):
        StableDataset.from_dict({"label": ["cat", "cow"]}, features={"label": sds.ClassLabel(names=["cat", "dog"])})
    with pytest.raises(ExampleError, match=r"example key 0, field 'label': label 5 is out of range \[0, 2\)"):
        StableDataset.from_dict({"label": [5, 0]}, features={"label": sds.ClassLabel(num_classes=2)})
    with pytest.raises(ExampleError, match=r"example key 1, field 'n': expected a str"):
        StableDataset.from_list([{"n": "a"}, {"n": 2}], features={"n": sds.Value("string")})
    with pytest.raises(ExampleError, match=r"field 'img'"):
        StableDataset.from_dict({"img": [_png(1), b"not an image"]}, features={"img": sds.Image()})
    with pytest.raises(ExampleError, match=r"missing column 'b'"):
        StableDataset.from_dict({"a": [1]}, features={"a": sds.Value("int64"), "b": sds.Value("int64")})
    with pytest.raises(ValueError, match=r"columns have different lengths: \{'a': 2, 'b': 1\}"):
        StableDataset.from_dict({"a": [1, 2], "b": [1]})
    with pytest.raises(ValueError, match="column 'nothing' holds only nulls"):
        StableDataset.from_dict({"nothing": [None, None]})


def test_kinds_of_values_do_not_mix_silently():
    # an int column is not silently stored as text, nor a float column as ints that lose their fraction
    with pytest.raises(ExampleError, match="field 'text'"):
        StableDataset.from_dict({"text": [1, 2]}, features={"text": sds.Value("string")})
    with pytest.raises(ExampleError, match=r"builder 'from_dict', split 'train', example key 0, field 'n': "
                                           r"expected an integer for int32, got float: 1.0"):
        StableDataset.from_dict({"n": [1.0, 2.5]}, features={"n": sds.Value("int32")})
    widened = StableDataset.from_dict({"n": [1, 2]}, features={"n": sds.Value("float32")})
    assert widened["n"] == [1.0, 2.0]
    # Arrow's safe cast lets a float overflow to inf; the bulk path does not
    with pytest.raises(ExampleError, match=r"example key 1, field 'x': value 1e\+300 does not fit float32"):
        StableDataset.from_dict({"x": [1.0, 1e300]}, features={"x": sds.Value("float32")})
    with pytest.raises(ExampleError, match=r"example key 1, field 'x\[1\]': value 1e\+300 does not fit float32"):
        StableDataset.from_dict({"x": [[1.0], [2.0, 1e300]]}, features={"x": sds.Sequence(sds.Value("float32"))})
    with pytest.raises(ExampleError, match=r"example key 1, field 'x': value 70000.0 does not fit float16"):
        StableDataset.from_dict({"x": [1, 70000]}, features={"x": sds.Value("float16")})
    assert StableDataset.from_dict({"x": [1.5, float("inf")]}, features={"x": sds.Value("float32")})["x"] == \
        [1.5, float("inf")]  # an inf that was given stays inf


def test_images_arrays_and_labels_by_name():
    pixels = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    grids = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    features = sds.Features({"image": sds.Image(), "grid": sds.Array2D((2, 3), "float32"),
                             "label": sds.ClassLabel(names=["cat", "dog"])})
    ds = StableDataset.from_dict({"image": [pixels, _png(7), pixels, {"bytes": _png(9), "path": None}],
                                  "grid": grids, "label": ["dog", "cat", "cat", "dog"]}, features=features)
    np.testing.assert_array_equal(ds[0]["image"], pixels)
    assert ds[1]["image"][0, 0].tolist() == [7, 7, 7] and ds[3]["image"][0, 0].tolist() == [9, 9, 9]
    np.testing.assert_array_equal(ds.with_format("numpy")[:]["grid"], grids)
    assert ds["label"] == [1, 0, 0, 1]


def test_pil_images_are_accepted():
    from PIL import Image as PILImage

    image = PILImage.fromarray(np.full((3, 4), 200, np.uint8), mode="L")
    ds = StableDataset.from_list([{"im": image}, {"im": image}], features={"im": sds.Image(mode="L")})
    assert ds[0]["im"].shape == (3, 4) and int(ds[1]["im"][0, 0]) == 200


def test_from_list_collects_keys_in_first_seen_order():
    ds = StableDataset.from_list([{"b": 1}, {"b": 2, "a": "x"}])
    assert ds.column_names == ["b", "a"] and ds.to_list() == [{"b": 1, "a": None}, {"b": 2, "a": "x"}]
    with pytest.raises(TypeError, match="row 1 is a list"):
        StableDataset.from_list([{"a": 1}, [1]])


def test_pandas_round_trip_with_nulls_and_index():
    df = pd.DataFrame({"f": [1.5, np.nan, 3.0], "s": ["a", None, "c"], "i": np.array([1, 2, 3], np.int16)})
    ds = StableDataset.from_pandas(df)
    assert ds.features == sds.Features({"f": sds.Value("float64"), "s": sds.Value("string"), "i": sds.Value("int16")})
    assert ds["f"][1] is None and ds["s"] == ["a", None, "c"]
    back = ds.to_pandas()
    assert list(back.columns) == ["f", "s", "i"] and back["i"].tolist() == [1, 2, 3] and np.isnan(back["f"][1])
    # an index that is not a plain range is kept as a column, as pyarrow (and Hugging Face) keep it
    indexed = StableDataset.from_pandas(df.set_index(pd.Index([10, 30, 20], name="key")))
    assert indexed["key"] == [10, 30, 20]
    assert StableDataset.from_pandas(df.set_index(pd.Index([10, 20, 30])), preserve_index=False).column_names == \
        ["f", "s", "i"]


def test_to_polars():
    polars = pytest.importorskip("polars")
    frame = StableDataset.from_dict({"a": [1, 2], "b": ["x", "y"]}).to_polars()
    assert isinstance(frame, polars.DataFrame) and frame.columns == ["a", "b"] and frame["b"].to_list() == ["x", "y"]


def test_from_arrow_table_batch_reader_and_our_own_schema():
    table = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1))
    assert StableDataset.from_arrow(reader).to_dict() == table.to_pydict()
    assert StableDataset.from_arrow(table.to_batches()[0])["b"] == ["x", "y", "z"]
    labelled = StableDataset.from_dict({"y": ["b", "a"]}, features={"y": sds.ClassLabel(names=["a", "b"])})
    exported = labelled.to_arrow()
    assert StableDataset.from_arrow(exported).features == labelled.features  # the schema carries our features
    with pytest.raises(TypeError, match="from_arrow takes a pyarrow Table"):
        StableDataset.from_arrow({"a": [1]})


def test_to_arrow_follows_selections_and_declared_order():
    ds = StableDataset.from_dict({"c": [0, 1, 2, 3], "a": ["w", "x", "y", "z"], "b": [0.0, 0.1, 0.2, 0.3]})
    view = ds.select([3, 1]).select_columns(["b", "c"])
    table = view.to_arrow()
    assert table.schema.names == ["b", "c"] and table.to_pydict() == {"b": [0.3, 0.1], "c": [3, 1]}
    assert view.to_dict() == {"b": [0.3, 0.1], "c": [3, 1]}
    assert view.to_pandas()["c"].tolist() == [3, 1]


def test_from_generator_fingerprints_code_and_kwargs(cache_root):
    def rows(n, text):
        for i in range(n):
            yield {"i": i, "text": f"{text}{i}"}

    ds = StableDataset.from_generator(rows, gen_kwargs={"n": 3, "text": "t"})
    assert ds.to_list() == [{"i": 0, "text": "t0"}, {"i": 1, "text": "t1"}, {"i": 2, "text": "t2"}]
    # the same build folder (a rebuild would publish a new one): reused, not regenerated
    assert StableDataset.from_generator(rows, gen_kwargs={"n": 3, "text": "t"}).cache_dirs == ds.cache_dirs
    assert len(StableDataset.from_generator(rows, gen_kwargs={"n": 4, "text": "t"})) == 4

    def rows_v2(n, text):  # other code, same arguments: another cache
        for i in range(n):
            yield {"i": i * 10, "text": text}

    assert StableDataset.from_generator(rows_v2, gen_kwargs={"n": 3, "text": "t"})["i"] == [0, 10, 20]
    given = StableDataset.from_generator(rows, gen_kwargs={"n": 2, "text": "u"}, fingerprint="v1",
                                         features={"i": sds.Value("int8"), "text": sds.Value("string")})
    assert given.features["i"] == sds.Value("int8") and given["text"] == ["u0", "u1"]
    assert given.cache_metadata[0].fingerprint_inputs["given"] == "v1"
    with pytest.raises(Exception, match="yielded no examples"):
        StableDataset.from_generator(rows, gen_kwargs={"n": 0, "text": ""})


def test_generator_larger_than_one_batch_and_a_bad_example():
    def rows():
        for i in range(2500):
            yield {"i": i}

    assert StableDataset.from_generator(rows)["i"][-3:] == [2497, 2498, 2499]

    def bad():
        yield {"i": 1}
        yield {"i": "two"}

    with pytest.raises(ExampleError, match=r"example key 1, field 'i'"):
        StableDataset.from_generator(bad, features={"i": sds.Value("int64")})


@pytest.mark.parametrize("storage_format", ["arrow", "lance", "parquet"])
def test_every_storage_format(storage_format):
    ds = StableDataset.from_dict({"a": list(range(50)), "t": [str(i) for i in range(50)]},
                                 storage_format=storage_format)
    assert ds.cache_metadata[0].fingerprint_inputs["storage_format"] == storage_format
    assert ds[49] == {"a": 49, "t": "49"} and ds.select_columns(["t"])[10:12] == {"t": ["10", "11"]}


def test_pickles_by_path_and_opens_in_another_process(tmp_path):
    ds = StableDataset.from_dict({"a": [1, 2, 3]}).select([2, 0]).rename_column("a", "b")
    assert pickle.loads(pickle.dumps(ds)).to_dict() == {"b": [3, 1]}
    path = tmp_path / "ds.pkl"
    path.write_bytes(pickle.dumps(ds))
    code = textwrap.dedent(f"""
        import pickle
        ds = pickle.loads(open({str(path)!r}, "rb").read())
        print(ds.column_names, ds["b"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['b'] [3, 1]"


def test_a_damaged_in_memory_cache_is_rebuilt():
    ds = StableDataset.from_dict({"a": list(range(10))})
    shard = ds.cache_dirs[0] / ds.cache_metadata[0].shards[0].path
    shard.write_bytes(shard.read_bytes()[:-10])  # truncated
    again = StableDataset.from_dict({"a": list(range(10))})
    assert again["a"] == list(range(10))


def test_two_processes_racing_build_once(cache_root, tmp_path):
    code = textwrap.dedent("""
        import sys, numpy as np
        import stable_datasets as sds
        ds = sds.StableDataset.from_dict({"x": np.arange(200_000), "t": [str(i % 97) for i in range(200_000)]})
        print(ds.cache_dirs[0].name, sum(ds["x"]))
    """)
    env = {**__import__("os").environ, "STABLE_DATASETS_CACHE_DIR": str(cache_root)}
    racers = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env) for _ in range(2)]
    outputs = [r.communicate(timeout=240) for r in racers]
    assert [r.returncode for r in racers] == [0, 0], [o[1][-2000:] for o in outputs]
    lines = {o[0].strip() for o in outputs}
    assert len(lines) == 1 and lines.pop().endswith(str(sum(range(200_000))))  # one build, read by both
    builds = [p for p in next((cache_root / "in_memory" / "from_dict" / "1.0.0").iterdir()).iterdir()
              if p.name.startswith("train@")]
    assert len(builds) == 1


def test_flipped_bytes_in_an_in_memory_cache_fail_cleanly(tmp_path):
    ds = StableDataset.from_dict({"x": list(range(1000)), "t": [f"row {i}" for i in range(1000)]})
    shard = ds.cache_dirs[0] / ds.cache_metadata[0].shards[0].path
    data = bytearray(shard.read_bytes())
    for offset in range(200, len(data) - 200, 97):
        data[offset] ^= 0xFF
    shard.write_bytes(bytes(data))
    code = textwrap.dedent(f"""
        import stable_datasets as sds
        from stable_datasets.errors import StableDatasetsError
        try:
            ds = sds.open_cache({str(ds.cache_dirs[0])!r})
            ds["t"]
        except StableDatasetsError as exc:
            print("refused:", type(exc).__name__)
        else:
            print("read")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]  # no crash
    assert run.stdout.strip() in ("refused: CacheError", "refused: CorruptCellError")
    # and the constructor, given the same data, rebuilds rather than serving the damaged cache
    again = StableDataset.from_dict({"x": list(range(1000)), "t": [f"row {i}" for i in range(1000)]})
    assert again["t"][999] == "row 999"


def test_dates_and_timestamps_are_stored_as_iso_text_as_the_file_loaders_store_them(tmp_path):
    """Before, a pandas datetime column could not come in at all: 'no feature type for Arrow type
    timestamp[ns]; pass features=', and features={"a": Value("string")} was refused too."""
    import datetime

    df = pd.DataFrame({"when": pd.to_datetime(["2020-01-01 10:00", None]).astype("datetime64[us]"),
                       "day": [datetime.date(2021, 3, 4), None]})
    ds = StableDataset.from_pandas(df, cache_dir=tmp_path)
    assert ds.features == sds.Features({"when": sds.Value("string"), "day": sds.Value("string")})
    assert ds.to_dict() == {"when": ["2020-01-01 10:00:00.000000", None], "day": ["2021-03-04", None]}
    table = pa.table({"t": pa.array([1], pa.timestamp("s", tz="UTC"))})
    assert StableDataset.from_arrow(table, features={"t": sds.Value("string")}, cache_dir=tmp_path)["t"] == \
        ["1970-01-01 00:00:01Z"]
    with pytest.raises(ValueError, match=r"column 'd': no feature type for Arrow type duration\[s\]"):
        StableDataset.from_arrow(pa.table({"d": pa.array([1], pa.duration("s"))}), cache_dir=tmp_path)


def test_a_dataframe_with_a_repeated_column_name_is_refused_naming_it(tmp_path):
    """Before: KeyError: 0, from deep inside the fallback conversion."""
    df = pd.DataFrame([[1, 2, 3]], columns=["a", "b", "a"])
    with pytest.raises(ValueError, match="^column 'a' appears more than once in the DataFrame$"):
        StableDataset.from_pandas(df, cache_dir=tmp_path)


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_exports_come_back_through_every_constructor_with_arrays_images_and_nulls(tmp_path, storage_format):
    """The docs promise from_dict(ds.to_dict(), features=ds.features) gives the same dataset back; an
    Array2D cell is exported in its stored form (flat), which was refused as 'expected shape (2, 2),
    got (4,)', and from_arrow(ds.to_arrow()) refused a Sequence of Array2D the same way; to_pandas
    turned the uint8 cells of a column with a null row into float64 arrays."""
    features = sds.Features({"img": sds.Image(), "arr": sds.Array2D((2, 2), "uint8"),
                             "cl": sds.ClassLabel(names=["a", "b"]),
                             "seq": sds.Sequence(sds.Array2D((1, 2), "float32")), "st": {"v": sds.Image()}})
    ds = StableDataset.from_dict({"img": [np.zeros((2, 2, 3), np.uint8), None],
                                  "arr": [np.eye(2, dtype=np.uint8), None], "cl": ["b", None],
                                  "seq": [[np.ones((1, 2), np.float32)], []],
                                  "st": [{"v": np.zeros((2, 2, 3), np.uint8)}, None]},
                                 features=features, storage_format=storage_format, cache_dir=tmp_path)
    kwargs = {"storage_format": storage_format, "cache_dir": tmp_path}
    assert StableDataset.from_dict(ds.to_dict(), features=ds.features, **kwargs).cache_dirs == ds.cache_dirs
    assert StableDataset.from_list(ds.to_list(), features=ds.features, **kwargs).to_arrow().equals(ds.to_arrow())
    assert StableDataset.from_arrow(ds.to_arrow(), **kwargs).to_arrow().equals(ds.to_arrow())
    cells = ds.to_pandas()["arr"].tolist()
    assert cells[0].dtype == np.uint8 and cells[0].tolist() == [1, 0, 0, 1] and cells[1] is None
    assert ds[0]["arr"].tolist() == [[1, 0], [0, 1]] and ds[1]["arr"] is None
    with pytest.raises(ExampleError, match=r"field 'arr': expected shape \(2, 2\), got \(3,\)"):
        StableDataset.from_dict({"arr": [[1, 2, 3]]}, features={"arr": sds.Array2D((2, 2), "uint8")}, **kwargs)


def test_an_exception_from_the_users_generator_says_after_which_example(tmp_path):
    def rows():
        for i in range(100):
            if i == 37:
                raise OSError("the source went away")
            yield {"i": i}

    with pytest.raises(OSError, match="the source went away") as info:
        StableDataset.from_generator(rows, cache_dir=tmp_path)
    assert info.value.__notes__ == ["raised by from_generator(test_an_exception_from_the_users_generator_says_after_"
                                    "which_example.<locals>.rows) generating split 'train', after example 36"]
    assert not list(tmp_path.rglob("_metadata.json"))


def test_a_column_of_multidimensional_arrays_is_inferred_as_nested_lists_as_in_hugging_face():
    # before: "column 'm': cannot infer a feature from ndarray values (Can only convert
    # 1-dimensional array values ...); pass features=" (HF infers List(List(Value('float32'))))
    grids = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for ds in (StableDataset.from_dict({"m": grids}), StableDataset.from_list([{"m": g} for g in grids])):
        assert ds.features == sds.Features({"m": sds.Sequence(sds.Sequence(sds.Value("float32")))})
        assert ds[1]["m"] == grids[1].tolist()
    ragged = StableDataset.from_dict({"m": [np.zeros((1, 2), np.int16), None, np.ones((2, 1), np.int16)]})
    assert ragged.features["m"] == sds.Sequence(sds.Sequence(sds.Value("int16")))
    assert ragged["m"] == [[[0, 0]], None, [[1], [1]]]
