"""`DatasetBuilder.local_input`: a builder keeps object-store data files as URLs in its jobs and each job copies the
ones it reads on its own node, of the version the fingerprint identified (the `sft` builder does, packed or not)."""

from __future__ import annotations

import json

import pytest

import stable_datasets as sds
from stable_datasets.download.inputs import inputs_root
from stable_datasets.errors import InputChangedError
from stable_datasets.sft import PackingConfig

pytest.importorskip("boto3")


def _chats(s3_env, files: int = 3, per_file: int = 20) -> list[str]:
    urls = []
    for f in range(files):
        lines = [json.dumps({"prompt": f"question {f}/{r}", "response": "word " * ((f * 37 + r * 11) % 40 + 1)})
                 for r in range(per_file)]
        s3_env.write(f"chats/chat-{f}.jsonl", ("\n".join(lines) + "\n").encode())
        urls.append(f"s3://{s3_env.bucket}/chats/chat-{f}.jsonl")
    return urls


def test_the_sft_builder_plans_with_urls_and_its_jobs_read_their_own_copies(s3_env, tmp_path):
    urls = _chats(s3_env)
    builder = sds.load_builder("sft", data_files={"train": urls}, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    (generator,) = builder._split_generators(builder._download_manager())
    assert generator.gen_kwargs["files"] == urls  # no download to plan
    assert not inputs_root().is_dir()
    packing = PackingConfig(pack_size=256, seed=3)
    local = tmp_path / "local"
    local.mkdir()
    for f in range(3):
        (local / f"chat-{f}.jsonl").write_bytes(s3_env.read(f"chats/chat-{f}.jsonl"))
    expected = sds.load_dataset("sft", split="train", data_files={"train": sorted(str(p) for p in local.iterdir())},
                                packing=packing, storage_format="parquet", cache_dir=str(tmp_path / "local-cache"))
    packed = sds.load_dataset("sft", split="train", data_files={"train": urls}, packing=packing,
                              storage_format="parquet", num_proc=2, cache_dir=str(tmp_path / "cache"))
    assert len(packed) == len(expected) > 3
    assert packed.to_arrow().equals(expected.to_arrow())
    assert sorted(p.name for p in inputs_root().rglob("*.jsonl")) == [f"chat-{f}.jsonl" for f in range(3)]


def test_local_input_refuses_another_version_and_passes_local_paths_through(s3_env, tmp_path):
    urls = _chats(s3_env, files=1)
    builder = sds.load_builder("sft", data_files={"train": urls}, cache_dir=str(tmp_path / "cache"))
    builder.resolve()
    assert builder.local_input(str(tmp_path / "a.jsonl")) == str(tmp_path / "a.jsonl")
    s3_env.write("chats/chat-0.jsonl", b'{"prompt": "p", "response": "r"}\n')
    with pytest.raises(InputChangedError, match=rf"data file {urls[0]} changed since the build identified it"):
        builder.local_input(urls[0])
