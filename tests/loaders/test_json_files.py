"""JSON Lines errors name the file, the line and the real problem (not the hint for a column changing type)."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets.loaders.columns import LoaderError


def _load(path):
    return sds.load_dataset("json", data_files=str(path), split="train")


def test_a_duplicate_key_is_named_with_its_line(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_text('{"a": 1}\n{"a": 2, "b": 1, "a": 3}\n')
    with pytest.raises(LoaderError, match=rf"^{path}, line 2: field 'a' appears twice in one record; give each "
                                          r"field of a record once$"):
        _load(path)


def test_a_lone_surrogate_is_named_with_its_line_and_escaped_or_paired_ones_load(tmp_path):
    path = tmp_path / "lone.jsonl"
    path.write_text('{"a": "x"}\n{"a": "\\ud800 alone"}\n')
    with pytest.raises(LoaderError, match=rf"^{path}, line 2: a string holds a lone UTF-16 surrogate escape "
                                          r"\(\\ud800 without its pair\), which is no text; fix or remove that "
                                          r"record$"):
        _load(path)
    fine = tmp_path / "fine.jsonl"
    fine.write_text('{"a": "\\\\ud800"}\n{"a": "\\ud83d\\ude00"}\n')
    assert _load(fine)["a"] == ["\\ud800", "\U0001F600"]
