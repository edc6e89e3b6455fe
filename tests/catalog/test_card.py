"""The catalog as people read it: docs/catalog.md's table, `stable-datasets catalog`, entries from the builders."""

from __future__ import annotations

import json
from pathlib import Path

from stable_datasets.catalog.card import TABLE_END, TABLE_START, catalog_entries, catalog_markdown, human_bytes
from stable_datasets.cli import main
from stable_datasets.registry import catalog_names, list_builders

PAGE = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"
#: datasets whose row counts no public record gives (their builds are not checked against a count)
NO_PUBLIC_ROW_COUNT = {"face_pointing", "hasy_v2", "cats_dogs", "groove_midi", "mosquito_sound", "picidae",
                       "sonycust", "urban_sound", "vocalset", "voice_gender_detection"}


def test_the_docs_table_is_the_one_the_builders_give():
    text = PAGE.read_text()
    table = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)].strip("\n") + "\n"
    assert table == catalog_markdown(catalog_entries()), \
        "docs/catalog.md is stale: run `python -m stable_datasets.catalog.card docs/catalog.md`"


def test_every_catalog_dataset_is_listed_registered_and_has_rows_license_and_task():
    entries = {e.name: e for e in catalog_entries()}
    assert set(entries) == set(catalog_names()) and set(entries) <= set(list_builders())
    mnist = entries["mnist"]
    assert mnist.splits == {"train": 60_000, "test": 10_000}
    assert mnist.download_bytes == 9912422 + 28881 + 1648877 + 4542 and not mnist.manual
    assert entries["svhn"].extra == "formats"
    assert [e.name for e in entries.values() if not (e.task and e.homepage)] == []
    assert sorted(e.name for e in entries.values() if not e.splits) == sorted(NO_PUBLIC_ROW_COUNT)


def test_the_command_prints_a_table_and_json_lines(capsys):
    assert main(["catalog"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "CLASS", "TASK"]
    assert any(line.startswith("cifar100 ") and "train 50,000, test 10,000" in line for line in lines)
    assert main(["catalog", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {"name": "mnist", "class_name": "MNIST", "package": "images"}.items() <= rows[[r["name"] for r in rows]
                                                                                          .index("mnist")].items()


def test_human_bytes():
    assert [human_bytes(n) for n in (None, 999, 1000, 168513733, 1329278602)] == ["?", "999 B", "1.0 KB", "168.5 MB",
                                                                                   "1.3 GB"]
