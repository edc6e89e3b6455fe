"""`megatron-preprocess --engine ray` on a real multi-node cluster whose nodes share no disk (tests/ray_cluster.py:
the head has no CPUs, so every task runs on a worker node, whose view of the driver's folders is an empty tmpfs).

The tasks' parts come back through Ray's object store and the driver writes the output; the input reaches them
as they can read it: a cache on the object store is read on the nodes, a cache on the driver's disk is shipped
as Arrow record batches; the tokenizer travels as its JSON. The output equals the `--engine process` output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stable_datasets.cli import main
from tests.megatron.test_preprocess import ROWS, _jsonl, _same_files, word_level

ray = pytest.importorskip("ray")
pytest.importorskip("moto")
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.cluster]  # one cluster at a time, in one xdist worker


@pytest.fixture
def tokenizer_dir(tmp_path) -> Path:
    """A tokenizer.json in the driver's temporary folder: a worker node sees that folder empty."""
    folder = tmp_path / "tok"
    folder.mkdir()
    word_level().save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    return folder


@pytest.fixture
def task_nodes():
    """The Ray node each tokenize part ran on, as `preprocess` logs them: {part: node id}."""
    from loguru import logger

    found: dict[int, str] = {}

    def note(message) -> None:
        extra = message.record["extra"]
        if "part" in extra and "node" in extra:
            found[extra["part"]] = extra["node"]

    logger.enable("stable_datasets")
    handle = logger.add(note, level="INFO")
    yield found
    logger.remove(handle)
    logger.disable("stable_datasets")


def _worker_nodes() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Resources"].get("CPU", 0) > 0}


def _args(source: str, tokenizer: Path, prefix: Path, *more: str) -> list[str]:
    return ["megatron-preprocess", "--input", source, "--json-keys", "text", "sentences", "--tokenizer",
            str(tokenizer), "--append-eod", "--workers", "3", "--output-prefix", str(prefix), *more]


def test_a_local_input_is_shipped_to_the_nodes_and_gives_the_process_engine_bytes(cluster, tmp_path,
                                                                                   tokenizer_dir, task_nodes):
    """Input, its cache, the tokenizer and the output all on the driver's disk only: the rows go to the nodes as
    record batches, the parts come back through the object store."""
    _jsonl(tmp_path / "in.jsonl", ROWS * 3)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert main(_args(str(tmp_path / "in.jsonl"), tokenizer_dir, tmp_path / "forked", *cache)) == 0
    assert main(_args(str(tmp_path / "in.jsonl"), tokenizer_dir, tmp_path / "ray", *cache, "--engine", "ray")) == 0
    for key in ("text", "sentences"):
        _same_files(f"{tmp_path}/ray_{key}_document", f"{tmp_path}/forked_{key}_document")
    driver = ray.get_runtime_context().get_node_id()
    assert sorted(task_nodes) == [0, 1, 2]
    assert set(task_nodes.values()) <= _worker_nodes() - {driver}  # the head (the driver's node) has no CPUs
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("ray", "."))) == \
        [f"ray_{k}_document.{s}" for k in ("sentences", "text") for s in ("bin", "idx")]


def test_a_cache_on_the_object_store_is_read_on_the_nodes_and_gives_the_process_engine_bytes(cluster, s3_env,
                                                                                            tmp_path, tokenizer_dir,
                                                                                            task_nodes):
    """An `s3://` input read into a cache on the object store (the cache root is `s3://`): each task reads its
    range there, on its own node, and nothing of the input is shipped."""
    s3_env.write("raw/in.jsonl", "".join(json.dumps(r) + "\n" for r in ROWS * 3).encode())
    source = f"s3://{s3_env.bucket}/raw/in.jsonl"
    assert main(_args(source, tokenizer_dir, tmp_path / "forked")) == 0
    assert main(_args(source, tokenizer_dir, tmp_path / "ray", "--engine", "ray")) == 0
    for key in ("text", "sentences"):
        _same_files(f"{tmp_path}/ray_{key}_document", f"{tmp_path}/forked_{key}_document")
    assert sorted(task_nodes) == [0, 1, 2]
    assert set(task_nodes.values()) <= _worker_nodes() - {ray.get_runtime_context().get_node_id()}


def test_a_part_that_fails_on_a_node_is_named_with_the_node_and_nothing_is_left_at_the_output(cluster, tmp_path,
                                                                                             tokenizer_dir, capsys):
    rows = [dict(r) for r in ROWS * 3]
    rows[10]["text"] = None  # in part 1 of 3: rows [8, 16)
    _jsonl(tmp_path / "in.jsonl", rows)
    args = _args(str(tmp_path / "in.jsonl"), tokenizer_dir, tmp_path / "out", "--cache-dir", str(tmp_path / "c"),
                 "--engine", "ray")
    assert main(args) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    nodes = "|".join(_worker_nodes())
    assert re.fullmatch(rf"stable-datasets: tokenize part 1 of 3 \(rows \[8, 16\), node ({nodes})\): "
                                      r"--json-keys text: row 10 has no text \(null\)", error), error
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(("out", "."))]
