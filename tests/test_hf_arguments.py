"""Hugging Face's Hub-only `load_dataset` arguments and Hub names (issue 25 item 8)."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets.errors import BuilderNotFoundError


@pytest.fixture
def csv_file(tmp_path, cache_root):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,x\n2,y\n")
    return str(path)


@pytest.mark.parametrize("kwargs", [{"keep_in_memory": False}, {"keep_in_memory": None}, {"token": None},
                                    {"token": False}, {"revision": None}, {"trust_remote_code": True},
                                    {"trust_remote_code": False}, {"download_config": None}, {"save_infos": False}])
def test_defaults_of_hub_arguments_are_accepted(csv_file, kwargs):
    ds = sds.load_dataset("csv", data_files=csv_file, split="train", **kwargs)
    assert ds["a"] == [1, 2]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keep_in_memory": True}, "keep_in_memory=True is a Hugging Face argument not supported here: caches here are "
                               "memory-mapped"),
    ({"token": "hf_abc"}, "token='hf_abc' is a Hugging Face argument not supported here: it authenticates to the "
                          "Hugging Face Hub, which this library does not read; give credentials for object stores or "
                          "HTTP in storage_options="),
    ({"use_auth_token": True}, "use_auth_token=True is a Hugging Face argument"),
    ({"revision": "main"}, "revision='main' is a Hugging Face argument not supported here: it pins a Hugging Face Hub "
                           "repository"),
    ({"save_infos": True}, "save_infos=True"),
])
def test_other_values_are_refused_in_one_line(csv_file, kwargs, message):
    with pytest.raises(ValueError) as info:
        sds.load_dataset("csv", data_files=csv_file, split="train", **kwargs)
    assert str(info.value).startswith(f"load_dataset: {message}") and "\n" not in str(info.value)
    assert "CsvConfig" not in str(info.value)


@pytest.mark.parametrize("name", ["imdb", "stanfordnlp/imdb"])
def test_a_hub_name_gets_a_hint_to_from_hf(cache_root, name):
    with pytest.raises(BuilderNotFoundError, match=rf"no builder named '{name}'.*if '{name}' is a Hugging Face Hub "
                                                   rf"dataset, .*sds.StableDataset.from_hf\(datasets.load_dataset\("
                                                   rf"'{name}', split='train'\)\)"):
        sds.load_dataset(name, split="train")


def test_a_missing_local_path_gets_no_hub_hint(tmp_path, cache_root):
    with pytest.raises(BuilderNotFoundError) as info:
        sds.load_dataset(str(tmp_path / "missing.py"), split="train")
    assert "Hugging Face Hub" not in str(info.value)
