"""The split record of a fingerprint folder: written atomically by a build, read instead of the generators."""

from __future__ import annotations

import json

import stable_datasets as sds
from stable_datasets.builder.split_record import record_split_names, recorded_split_names
from stable_datasets.cache.paths import SPLITS_FILE
from stable_datasets.roots import resolve_root
from tests.conftest import TOY_BUILDER


def test_a_record_reads_back_and_leaves_no_temporary_file(tmp_path):
    root = resolve_root(tmp_path / "root")
    folder = tmp_path / "root" / "toy" / "default" / "1.0.0" / "f"
    assert recorded_split_names(root, folder) is None  # nothing recorded: the generators will say
    record_split_names(root, folder, ["train", "test"])
    record_split_names(root, folder, ["train", "test", "extra"])  # a later build replaces it whole
    assert recorded_split_names(root, folder) == ["train", "test", "extra"]
    assert [p.name for p in folder.iterdir()] == [SPLITS_FILE]


def test_a_build_records_its_splits_where_split_names_finds_them(write_builder):
    builder = sds.load_builder(str(write_builder("toy", TOY_BUILDER)))
    assert builder.split_names() == ["train", "test"]
    assert json.loads((builder.cache_dir() / SPLITS_FILE).read_text()) == ["train", "test"]
    assert recorded_split_names(builder.root, builder.cache_dir()) == ["train", "test"]
