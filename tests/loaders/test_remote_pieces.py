"""Data files in an object store stay URLs in a loader's jobs: each part copies the files it reads on its own
node (so parts on machines that share no disk find them), of the version the fingerprint identified; the
driver plans from their sizes without reading them (tests/write/test_ray_nodes.py runs this on several nodes)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.download.inputs import inputs_root
from stable_datasets.errors import InputChangedError, StableDatasetsError
from stable_datasets.loaders import base as loaders_base
from stable_datasets.loaders import json_files
from stable_datasets.write import JobRunner
from tests.http_server import FileServer

pytest.importorskip("boto3")

FEATURES = sds.Features({"i": sds.Value("int64"), "text": sds.Value("string")})


def _jsonl(rows: range) -> bytes:
    return "".join(json.dumps({"i": i, "text": f"row {i}"}) + "\n" for i in rows).encode()


def _upload_four(s3_env) -> str:
    for number in range(4):
        s3_env.write(f"jsonl/part-{number}.jsonl", _jsonl(range(number * 25, number * 25 + 25 + number)))
    return f"s3://{s3_env.bucket}/jsonl/*.jsonl"


def _copies() -> list[str]:
    root = inputs_root()
    return sorted(p.name for p in root.rglob("*.jsonl")) if root.is_dir() else []


def test_the_driver_plans_remote_files_by_their_sizes_without_reading_them(s3_env, tmp_path):
    pattern = _upload_four(s3_env)
    builder = sds.load_builder("json", data_files=pattern, features=FEATURES, cache_dir=str(tmp_path / "cache"))
    resolved = builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    jobs = builder._plan_split(generator, 2, JobRunner(), tmp_path / "work").jobs
    urls = [f"s3://{s3_env.bucket}/jsonl/part-{n}.jsonl" for n in range(4)]
    assert [[p[0] for p in job["pieces"]] for job in jobs] == [urls[:2], urls[2:]]  # whole files, by size
    assert _copies() == []  # nothing was downloaded to plan
    sizes = [len(_jsonl(range(n * 25, n * 25 + 25 + n))) for n in range(4)]
    assert [builder.object_versions[u][0] for u in urls] == sizes
    assert resolved.inputs["input_files"]["data_files"]["train"]["bytes"] == sum(sizes)


def test_parts_read_their_own_copies_and_the_rows_equal_a_local_build(s3_env, tmp_path):
    pattern = _upload_four(s3_env)
    local = tmp_path / "local-files"
    local.mkdir()
    for number in range(4):
        (local / f"part-{number}.jsonl").write_bytes(s3_env.read(f"jsonl/part-{number}.jsonl"))
    expected = sds.load_dataset("json", data_files=str(local / "*.jsonl"), split="train",
                                cache_dir=str(tmp_path / "local-cache")).to_arrow()
    ds = sds.load_dataset("json", data_files=pattern, split="train", num_proc=2)
    assert ds.to_arrow().equals(expected)
    assert ds["i"] == [i for n in range(4) for i in range(n * 25, n * 25 + 25 + n)]
    assert _copies() == [f"part-{n}.jsonl" for n in range(4)]  # the parts copied them (forked: same disk)


def test_a_part_refuses_a_file_that_changed_since_the_fingerprint_naming_it(s3_env, tmp_path):
    _upload_four(s3_env)
    url = f"s3://{s3_env.bucket}/jsonl/part-2.jsonl"
    builder = sds.load_builder("json", data_files=url, features=FEATURES, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    s3_env.write("jsonl/part-2.jsonl", _jsonl(range(3)))  # rewritten after the driver identified it
    with pytest.raises(InputChangedError, match=rf"data file {url} changed since the build identified it "
                                                r"\(size and version \[.*\] -> \[.*\]\); nothing was published"):
        builder.local_input(url)
    assert _copies() == []
    builder.resolve()  # a new fingerprint identifies the new version, which is then read
    assert Path(builder.local_input(url)).read_bytes() == _jsonl(range(3))


def test_a_changed_remote_file_fails_the_build_and_nothing_is_published(s3_env, tmp_path, monkeypatch):
    pattern = _upload_four(s3_env)
    builder = sds.load_builder("json", data_files=pattern, features=FEATURES)
    real = builder.resolve

    def resolve_then_change(*args, **kwargs):
        resolved = real(*args, **kwargs)
        s3_env.write("jsonl/part-3.jsonl", _jsonl(range(7)))  # between the fingerprint and the parts' reads
        return resolved

    monkeypatch.setattr(builder, "resolve", resolve_then_change)
    with pytest.raises(InputChangedError, match=r"data file s3://.*/jsonl/part-3.jsonl changed"):
        builder.prepare("train", num_proc=2)
    assert not [k for k in s3_env.objects() if k.endswith("_metadata.json")]


def test_jsonl_on_gs_is_read_by_the_parts_as_on_s3(gcs_env, tmp_path):
    for number in range(3):
        gcs_env.write(f"jsonl/part-{number}.jsonl", _jsonl(range(number * 10, number * 10 + 10)))
    pattern = f"gs://{gcs_env.bucket}/jsonl/*.jsonl"
    builder = sds.load_builder("json", data_files=pattern, features=FEATURES, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    assert [p[0] for p in generator.gen_kwargs["pieces"]] == [f"gs://{gcs_env.bucket}/jsonl/part-{n}.jsonl"
                                                              for n in range(3)]
    assert _copies() == []
    ds = sds.load_dataset("json", data_files=pattern, split="train", features=FEATURES, num_proc=2,
                          cache_dir=str(tmp_path / "cache"))
    assert ds["i"] == list(range(30))
    assert _copies() == [f"part-{n}.jsonl" for n in range(3)]


# -- one large remote file in ranges -------------------------------------------------------------------------------

def _big_jsonl(rows: int) -> bytes:
    return "".join(json.dumps({"i": i, "text": f"row {i} " + "x" * (i % 37)}) + "\n" for i in range(rows)).encode()


def _ranges() -> list[Path]:
    root = inputs_root()
    return sorted(p for p in root.rglob("*") if p.is_file() and p.parent.name.endswith(".ranges")
                  and not p.name.startswith(".")) if root.is_dir() else []


def _whole_copies() -> list[Path]:
    root = inputs_root()
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.parent.name.endswith(".ranges")
                  and not p.name.startswith(".")) if root.is_dir() else []


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of at least 64 KiB (8 MiB by default), so a test file of a few hundred KB is divided."""
    monkeypatch.setattr(loaders_base, "MIN_RANGE_BYTES", 64 << 10)


def test_one_large_remote_file_is_planned_in_line_aligned_ranges_without_reading_it(s3_env, tmp_path, small_ranges):
    data = _big_jsonl(6000)  # ~300 KB
    s3_env.write("big/one.jsonl", data)
    url = f"s3://{s3_env.bucket}/big/one.jsonl"
    builder = sds.load_builder("json", data_files=url, features=FEATURES, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    jobs = builder._plan_split(generator, 4, JobRunner(), tmp_path / "work").jobs
    pieces = [p for job in jobs for p in job["pieces"]]
    assert len(jobs) == 4 and [len(job["pieces"]) for job in jobs] == [1, 1, 1, 1]
    assert [p[0] for p in pieces] == [url] * 4
    bounds = [pieces[0][1]] + [p[2] for p in pieces]
    assert bounds[0] == 0 and bounds[-1] == len(data)
    assert all(a[2] == b[1] for a, b in itertools.pairwise(pieces))  # contiguous
    assert all(data[lo - 1:lo] == b"\n" for lo in bounds[1:-1])  # each range starts a line
    assert all(abs((hi - lo) - len(data) / 4) < 200 for _, lo, hi in pieces)  # about equal
    assert _copies() == [] and _ranges() == []  # planned from small ranged reads: nothing copied


def test_parts_fetch_only_their_ranges_and_the_rows_equal_a_one_part_build(s3_env, tmp_path, small_ranges):
    data = _big_jsonl(6000)
    s3_env.write("big/one.jsonl", data)
    local = tmp_path / "one.jsonl"
    local.write_bytes(data)
    expected = sds.load_dataset("json", data_files=str(local), split="train", features=FEATURES,
                                cache_dir=str(tmp_path / "local-cache"))
    ds = sds.load_dataset("json", data_files=f"s3://{s3_env.bucket}/big/one.jsonl", split="train",
                          features=FEATURES, num_proc=3)
    assert ds.to_arrow().equals(expected.to_arrow())
    assert ds["i"] == list(range(6000))
    ranges = _ranges()
    assert len(ranges) == 3 and sum(p.stat().st_size for p in ranges) == len(data)  # each byte fetched once
    assert b"".join(p.read_bytes() for p in sorted(ranges, key=lambda p: int(p.name.split("-")[0]))) == data
    assert _whole_copies() == []  # no part (and not the driver) copied the whole file


def test_a_bad_line_in_a_later_range_is_named_by_the_url_and_its_line_in_the_file(s3_env, tmp_path, small_ranges):
    lines = _big_jsonl(6000).splitlines(keepends=True)
    lines[5000] = b'{"i": 5000, "text": oops}\n'  # in the last of 3 ranges
    data = b"".join(lines)
    s3_env.write("big/bad.jsonl", data)
    local = tmp_path / "bad.jsonl"
    local.write_bytes(data)
    url = f"s3://{s3_env.bucket}/big/bad.jsonl"
    with pytest.raises(StableDatasetsError) as whole:
        sds.load_dataset("json", data_files=str(local), split="train", features=FEATURES,
                         cache_dir=str(tmp_path / "local-cache"))
    with pytest.raises(StableDatasetsError) as ranged:
        sds.load_dataset("json", data_files=url, split="train", features=FEATURES, num_proc=3)
    assert f"{local}, line 5001" in str(whole.value)
    assert str(ranged.value) == str(whole.value).replace(str(local), url)
    assert not [k for k in s3_env.objects() if k.endswith("_metadata.json")]


def test_a_file_changed_between_plan_and_range_read_fails_naming_it(s3_env, tmp_path, small_ranges, monkeypatch):
    s3_env.write("big/one.jsonl", _big_jsonl(6000))
    url = f"s3://{s3_env.bucket}/big/one.jsonl"
    builder = sds.load_builder("json", data_files=url, features=FEATURES)
    real = builder._plan_split

    def plan_then_change(*args, **kwargs):
        planned = real(*args, **kwargs)
        s3_env.write("big/one.jsonl", _big_jsonl(6001))  # after the plan, before the parts read their ranges
        return planned

    monkeypatch.setattr(builder, "_plan_split", plan_then_change)
    with pytest.raises(InputChangedError, match=rf"data file {url} changed since the build identified it"):
        builder.prepare("train", num_proc=2)
    assert not [k for k in s3_env.objects() if k.endswith("_metadata.json")]


def test_ranges_follow_the_parallelism_with_a_floor(s3_env, tmp_path):
    data = _big_jsonl(6000)  # ~300 KB: under the default floor of 8 MiB, one range whatever num_proc says
    s3_env.write("big/one.jsonl", data)
    url = f"s3://{s3_env.bucket}/big/one.jsonl"
    builder = sds.load_builder("json", data_files=url, features=FEATURES, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    assert builder._plan_split(generator, 64, JobRunner(), tmp_path / "w").jobs == [{"pieces": [[url, None, None]]}]
    loaders_base.MIN_RANGE_BYTES, floor = 80 << 10, loaders_base.MIN_RANGE_BYTES
    try:
        jobs = builder._plan_split(generator, 64, JobRunner(), tmp_path / "w").jobs
    finally:
        loaders_base.MIN_RANGE_BYTES = floor
    assert len(jobs) == len(data) // (80 << 10) == 3  # 64 asked, 3 ranges of >= 80 KiB


def test_text_lines_of_a_remote_file_in_ranges_equal_a_local_build(s3_env, tmp_path, small_ranges):
    data = "".join(f"line {i} " + "y" * (i % 50) + ("\r\n" if i % 3 else "\n") for i in range(8000)).encode()
    s3_env.write("big/one.txt", data)
    local = tmp_path / "one.txt"
    local.write_bytes(data)
    expected = sds.load_dataset("text", data_files=str(local), split="train", cache_dir=str(tmp_path / "lc"))
    ds = sds.load_dataset("text", data_files=f"s3://{s3_env.bucket}/big/one.txt", split="train", num_proc=3,
                          features=sds.Features({"text": sds.Value("string")}))
    assert ds["text"] == expected["text"] and len(ds) == 8000
    assert len(_ranges()) == 3 and _whole_copies() == []


def test_parquet_row_groups_of_a_remote_file_are_read_by_ranged_gets(s3_env, tmp_path, small_ranges):
    pq = pytest.importorskip("pyarrow.parquet")
    import numpy as np
    import pyarrow as pa

    table = pa.table({"i": np.arange(40_000, dtype=np.int64),
                      "text": [f"row {i} " + "z" * (i % 29) for i in range(40_000)]})
    local = tmp_path / "one.parquet"
    pq.write_table(table, local, row_group_size=5000, compression="none")  # 8 row groups, ~1.5 MB
    s3_env.write("big/one.parquet", local.read_bytes())
    url = f"s3://{s3_env.bucket}/big/one.parquet"
    features = sds.Features({"i": sds.Value("int64"), "text": sds.Value("string")})
    builder = sds.load_builder("parquet", data_files=url, features=features, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    jobs = builder._plan_split(generator, 4, JobRunner(), tmp_path / "work").jobs
    assert [p[1:] for job in jobs for p in job["pieces"]] == [[0, 2], [2, 4], [4, 6], [6, 8]]
    ds = sds.load_dataset("parquet", data_files=url, split="train", features=features, num_proc=4)
    assert ds.to_arrow().equals(table)
    inferred = sds.load_dataset("parquet", data_files=url, split="train", num_proc=4)  # the schema from the footer
    assert inferred.features == features and inferred.to_arrow().equals(table)
    assert _whole_copies() == []


# -- http(s) data files travel like object-store ones ---------------------------------------------------------------

@pytest.fixture
def served():
    with FileServer() as server:
        yield server


def _http_files() -> list[Path]:
    root = inputs_root() / "http"
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")) if root.is_dir() else []


def test_an_http_file_with_validators_is_planned_from_a_head_and_read_in_ranges_by_the_parts(served, tmp_path,
                                                                                            small_ranges):
    data = _big_jsonl(6000)
    served.files["/big.jsonl"] = data
    served.validators["/big.jsonl"] = {"ETag": '"v1"'}
    url = f"{served.url}/big.jsonl"
    local = tmp_path / "big.jsonl"
    local.write_bytes(data)
    expected = sds.load_dataset("json", data_files=str(local), split="train", features=FEATURES,
                                cache_dir=str(tmp_path / "local-cache"))
    builder = sds.load_builder("json", data_files=url, features=FEATURES)
    resolved = builder.resolve()
    assert resolved.inputs["input_files"]["data_files"]["train"]["bytes"] == len(data)
    assert builder.object_versions[url] == [len(data), {"ETag": '"v1"'}]  # from the HEAD
    (generator,) = builder._split_generators(builder._download_manager())
    assert generator.gen_kwargs["pieces"] == [[url, None, None]]  # not downloaded by the driver
    ds = sds.load_dataset("json", data_files=url, split="train", features=FEATURES, num_proc=3)
    assert ds.to_arrow().equals(expected.to_arrow())
    ranges = [r for _, r in served.requests]
    assert None not in ranges  # no GET of the whole file: only ranges (the cuts' windows, the parts' ranges)
    copies = _http_files()
    assert all(p.parent.name == "big.jsonl.ranges" for p in copies) and len(copies) == 3
    assert sum(p.stat().st_size for p in copies) == len(data)


def test_an_http_file_changed_on_the_server_after_the_plan_fails_naming_it(served, tmp_path, small_ranges,
                                                                           monkeypatch):
    served.files["/big.jsonl"] = _big_jsonl(6000)
    served.validators["/big.jsonl"] = {"ETag": '"v1"'}
    url = f"{served.url}/big.jsonl"
    builder = sds.load_builder("json", data_files=url, features=FEATURES)
    real = builder._plan_split

    def plan_then_change(*args, **kwargs):
        planned = real(*args, **kwargs)
        served.files["/big.jsonl"] = _big_jsonl(6001)
        served.validators["/big.jsonl"] = {"ETag": '"v2"'}
        return planned

    monkeypatch.setattr(builder, "_plan_split", plan_then_change)
    with pytest.raises(InputChangedError, match=rf"data file {url} changed since the build identified it"):
        builder.prepare("train", num_proc=2)
    assert not list((tmp_path / "cache").rglob("_metadata.json"))


def test_a_small_http_file_is_fetched_whole_by_its_part_and_checked(served, tmp_path, monkeypatch):
    served.files["/small.jsonl"] = _jsonl(range(30))
    served.validators["/small.jsonl"] = {"Last-Modified": "Wed, 21 Oct 2026 07:28:00 GMT"}
    url = f"{served.url}/small.jsonl"
    builder = sds.load_builder("json", data_files=url, features=FEATURES)
    builder.resolve()
    assert _http_files() == []  # the driver planned from the HEAD
    assert Path(builder.local_input(url)).read_bytes() == _jsonl(range(30))
    served.validators["/small.jsonl"] = {"Last-Modified": "Thu, 22 Oct 2026 07:28:00 GMT"}
    served.files["/small.jsonl"] = _jsonl(range(31))
    with pytest.raises(InputChangedError, match=rf"data file {url} changed since the build identified it"):
        builder.local_input(url)
    ds = sds.load_dataset("json", data_files=url, split="train", features=FEATURES, num_proc=2)
    assert ds["i"] == list(range(31))  # a new fingerprint identifies the new version


def test_features_of_a_remote_jsonl_are_inferred_from_a_copy_of_its_start(s3_env, tmp_path, small_ranges,
                                                                          monkeypatch):
    monkeypatch.setattr(json_files, "SAMPLE_BYTES", 4096)
    data = _big_jsonl(6000)
    s3_env.write("big/one.jsonl", data)
    url = f"s3://{s3_env.bucket}/big/one.jsonl"
    builder = sds.load_builder("json", data_files=url, cache_dir=str(tmp_path / "cache"))
    assert builder.info.features == FEATURES
    (sample,) = _ranges()  # the driver copied the first 4 KiB and the rest of that line, nothing else
    end = data.index(b"\n", 4096) + 1
    assert sample.name == f"0-{end}" and sample.read_bytes() == data[:end]
    ds = sds.load_dataset("json", data_files=url, split="train", num_proc=3)
    assert ds["i"] == list(range(6000)) and ds.features == FEATURES


def test_a_part_of_a_remote_parquet_file_reads_its_row_groups_not_the_file(s3_env, tmp_path, small_ranges,
                                                                          monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    import numpy as np
    import pyarrow as pa

    from stable_datasets.download import inputs

    table = pa.table({"i": np.arange(40_000, dtype=np.int64), "f": np.arange(40_000, dtype=np.float64)})
    local = tmp_path / "one.parquet"
    pq.write_table(table, local, row_group_size=5000, compression="none")  # 8 row groups of 80 KB
    s3_env.write("big/one.parquet", local.read_bytes())
    url = f"s3://{s3_env.bucket}/big/one.parquet"
    features = sds.Features({"i": sds.Value("int64"), "f": sds.Value("float64")})
    builder = sds.load_builder("parquet", data_files=url, features=features, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    jobs = builder._plan_split(generator, 4, JobRunner(), tmp_path / "work").jobs
    asked: list[int] = []
    real = inputs.object_range

    def counted(url, start, stop, *args, **kwargs):
        data = real(url, start, stop, *args, **kwargs)
        asked.append(len(data))
        return data

    monkeypatch.setattr(inputs, "object_range", counted)
    batches = list(builder._generate_examples(**jobs[2]))  # row groups 4 and 5, in this process
    assert pa.Table.from_batches(batches).column("i").to_pylist() == list(range(20_000, 30_000))
    size = local.stat().st_size
    assert size / 4 <= sum(asked) < size / 2  # its two row groups (and the footer), not the file


def test_one_large_jsonl_on_gs_is_read_in_ranges_as_on_s3(gcs_env, tmp_path, small_ranges):
    data = _big_jsonl(6000)
    gcs_env.write("big/one.jsonl", data)
    ds = sds.load_dataset("json", data_files=f"gs://{gcs_env.bucket}/big/one.jsonl", split="train",
                          features=FEATURES, num_proc=3, cache_dir=str(tmp_path / "cache"))
    assert ds["i"] == list(range(6000))
    ranges = _ranges()
    assert len(ranges) == 3 and sum(p.stat().st_size for p in ranges) == len(data) and _whole_copies() == []


LABELS = sds.Features({"i": sds.Value("int64"), "labels": sds.Sequence(sds.ClassLabel(names=["a", "b"]))})


def _labelled(rows: int) -> bytes:
    return "".join(json.dumps({"i": i, "labels": ["a", "b"][:i % 3]}) + "\n" for i in range(rows)).encode()


def test_keyed_rows_of_ranges_have_distinct_keys_and_equal_a_one_part_build(s3_env, tmp_path, small_ranges):
    """Features that are not Arrow casts alone (a list of class labels) go through keyed examples: the keys were
    `<file>:<row in the piece>`, so two ranges of one local file both had `a.jsonl:0` (a duplicate-key error)."""
    data = _labelled(20_000)
    local = tmp_path / "a.jsonl"
    local.write_bytes(data)
    one = sds.load_dataset("json", data_files=str(local), split="train", features=LABELS,
                           cache_dir=str(tmp_path / "one"))
    split_locally = sds.load_dataset("json", data_files=str(local), split="train", features=LABELS, num_proc=3,
                                     cache_dir=str(tmp_path / "three"))
    s3_env.write("big/a.jsonl", data)
    remote = sds.load_dataset("json", data_files=f"s3://{s3_env.bucket}/big/a.jsonl", split="train",
                              features=LABELS, num_proc=3)
    assert split_locally.to_arrow().equals(one.to_arrow()) and remote.to_arrow().equals(one.to_arrow())
    assert remote[4] == {"i": 4, "labels": [0]} and len(_ranges()) == 3
    builder = sds.load_builder("json", data_files=str(local), features=LABELS, cache_dir=str(tmp_path / "k"))
    pieces = builder.piece_ranges(str(local), 2)
    keys = [[key for key, _ in builder._generate_examples([piece])][:2] for piece in pieces]
    assert keys == [[f"{local}@0:0", f"{local}@0:1"], [f"{local}@{pieces[1][1]}:0", f"{local}@{pieces[1][1]}:1"]]


def test_a_local_file_is_cut_with_the_same_floor(tmp_path, monkeypatch):
    local = tmp_path / "one.jsonl"
    local.write_bytes(_big_jsonl(6000))  # ~300 KB
    builder = sds.load_builder("json", data_files=str(local), features=FEATURES, cache_dir=str(tmp_path / "c"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    assert len(builder._plan_split(generator, 64, JobRunner(), tmp_path / "w").jobs) == 1  # not 64 parts of 5 KB
    monkeypatch.setattr(loaders_base, "MIN_RANGE_BYTES", 80 << 10)
    jobs = builder._plan_split(generator, 64, JobRunner(), tmp_path / "w").jobs
    assert [len(job["pieces"]) for job in jobs] == [1, 1, 1]


def test_a_compressed_remote_file_is_read_whole_not_cut(s3_env, tmp_path, small_ranges):
    import gzip

    data = _big_jsonl(6000)
    s3_env.write("big/one.jsonl.gz", gzip.compress(data))
    s3_env.write("big/two.jsonl.gz", gzip.compress(data))  # a second one: the first is sampled for features
    url = f"s3://{s3_env.bucket}/big/one.jsonl.gz"
    builder = sds.load_builder("json", data_files=url, features=FEATURES, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    assert builder._plan_split(generator, 4, JobRunner(), tmp_path / "w").jobs == [{"pieces": [[url, None, None]]}]
    ds = sds.load_dataset("json", data_files=f"s3://{s3_env.bucket}/big/*.jsonl.gz", split="train", num_proc=2)
    assert ds["i"] == list(range(6000)) * 2 and ds.features == FEATURES  # inferred from the decompressed file
