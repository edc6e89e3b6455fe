"""A deeply nested JSON value is an error naming the file and line, never a crash (SIGSEGV) or a bare
RecursionError; the bound is STABLE_DATASETS_MAX_JSON_DEPTH."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import stable_datasets as sds
from stable_datasets.errors import ConfigurationError
from stable_datasets.loaders.columns import LoaderError

LOAD = "import sys, stable_datasets as sds; sds.load_dataset('json', data_files=sys.argv[1], split='train')"


def _deep(levels: int) -> str:
    return '{"a": ' + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "}"


def _jsonl(path, deep_line: str):
    path.write_text('{"a": [[1]]}\n{"a": [[2]]}\n' + deep_line + "\n")
    return path


def test_twenty_thousand_levels_are_an_error_not_a_segfault(tmp_path):
    path = _jsonl(tmp_path / "deep.jsonl", _deep(20_000))
    run = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert run.stderr.strip().splitlines()[-1] == (
        f"stable_datasets.loaders.columns.LoaderError: {path}, line 3: JSON nested deeper than 500 levels; flatten "
        "the record, or raise STABLE_DATASETS_MAX_JSON_DEPTH if it is meant to be that deep")


@pytest.mark.parametrize("levels", [1_000, 5_000])
def test_a_deep_line_names_the_file_and_line(tmp_path, levels):
    path = _jsonl(tmp_path / "deep.jsonl", _deep(levels))
    with pytest.raises(LoaderError, match=rf"^{path}, line 3: JSON nested deeper than 500 levels; "):
        sds.load_dataset("json", data_files=str(path), split="train")


def test_a_deep_json_document_names_its_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('[\n{"a": 1},\n{"a": ' + "[" * 3000 + "]" * 3000 + "}\n]\n")
    with pytest.raises(LoaderError, match=rf"^{path}, line 3: JSON nested deeper than 500 levels; "):
        sds.load_dataset("json", data_files=str(path), split="train")


def test_brackets_inside_strings_do_not_count_and_the_bound_is_configurable(tmp_path, monkeypatch):
    text = "[{" * 2000 + '\\"' + "[" * 10
    path = tmp_path / "strings.jsonl"
    path.write_text(json.dumps({"t": text}) + "\n" + json.dumps({"t": "x"}) + "\n")
    assert sds.load_dataset("json", data_files=str(path), split="train")["t"] == [text, "x"]
    monkeypatch.setenv("STABLE_DATASETS_MAX_JSON_DEPTH", "3")
    ok = _jsonl(tmp_path / "three.jsonl", '{"a": [[3]]}')
    assert sds.load_dataset("json", data_files=str(ok), split="train")["a"] == [[[1]], [[2]], [[3]]]
    four = _jsonl(tmp_path / "four.jsonl", '{"a": [[[4]]]}')
    with pytest.raises(LoaderError, match=rf"^{four}, line 3: JSON nested deeper than 3 levels; "):
        sds.load_dataset("json", data_files=str(four), split="train")
    monkeypatch.setenv("STABLE_DATASETS_MAX_JSON_DEPTH", "deep")
    with pytest.raises(ConfigurationError, match=r"^STABLE_DATASETS_MAX_JSON_DEPTH='deep' must be a whole number"):
        sds.load_dataset("json", data_files=str(four), split="train")
