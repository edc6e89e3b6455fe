"""Data files in an object store stay URLs in a loader's jobs: each part copies the files it reads on its own
node (so parts on machines that share no disk find them), of the version the fingerprint identified; the
driver plans from their sizes without reading them (tests/write/test_ray_nodes.py runs this on several nodes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.download.inputs import inputs_root
from stable_datasets.errors import InputChangedError
from stable_datasets.write import JobRunner

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
