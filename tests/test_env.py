"""Settings: every environment variable is read through stable_datasets.env, listed in its table and in
docs/settings.md, and a bad value is an error naming the variable."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import stable_datasets
from stable_datasets.builder.local_modules import parse_source
from stable_datasets.env import VARIABLES, env_choice, env_flag, env_json_object, env_number, env_text
from stable_datasets.errors import ConfigurationError

PACKAGE = Path(stable_datasets.__file__).resolve().parent
SETTINGS_PAGE = PACKAGE.parent / "docs" / "settings.md"
NAME = re.compile(r"\bSTABLE_DATASETS_[A-Z0-9_]*[A-Z0-9]\b")


def test_no_module_but_env_reads_the_environment():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "env.py":
            continue
        for node in ast.walk(parse_source(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" and \
                    node.attr in ("environ", "getenv", "environb"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} reads os.{node.attr}")
    assert offenders == []


def test_every_variable_named_in_the_source_is_in_the_table_and_on_the_settings_page():
    named = {m for path in PACKAGE.rglob("*.py") for m in NAME.findall(path.read_text())}
    page = SETTINGS_PAGE.read_text()
    assert sorted(named - set(VARIABLES)) == []
    assert [name for name in VARIABLES if f"`{name}`" not in page] == []


@pytest.mark.parametrize("value, expected", [("1", True), ("TRUE", True), ("on", True), ("0", False),
                                             ("no", False), ("", False), ("  ", False)])
def test_a_switch_reads_the_usual_spellings(monkeypatch, value, expected):
    monkeypatch.setenv("STABLE_DATASETS_SOFT_LOCK", value)
    assert env_flag("STABLE_DATASETS_SOFT_LOCK") is expected


def test_bad_values_are_errors_naming_the_variable_and_its_value(monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_SOFT_LOCK", "maybe")
    with pytest.raises(ConfigurationError, match=r"^STABLE_DATASETS_SOFT_LOCK='maybe' is not a switch"):
        env_flag("STABLE_DATASETS_SOFT_LOCK")
    monkeypatch.setenv("STABLE_DATASETS_REMOTE_LANCE", "sometimes")
    with pytest.raises(ConfigurationError, match=r"REMOTE_LANCE='sometimes' is not one of \['in_place', 'download'\]"):
        env_choice("STABLE_DATASETS_REMOTE_LANCE", ("in_place", "download"), "in_place")
    monkeypatch.setenv("STABLE_DATASETS_URL_REWRITES", "[1, 2]")
    with pytest.raises(ConfigurationError, match=r"URL_REWRITES must be a JSON object, got list"):
        env_json_object("STABLE_DATASETS_URL_REWRITES")
    monkeypatch.setenv("STABLE_DATASETS_DECODE_THREADS", "0")
    with pytest.raises(ConfigurationError, match=r"DECODE_THREADS='0' is not a number of threads"):
        env_number("STABLE_DATASETS_DECODE_THREADS", 0, int, lambda n: n >= 1, "is not a number of threads >= 1")


def test_unset_or_blank_means_the_default(monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_REMOTE_LANCE", " ")
    monkeypatch.delenv("STABLE_DATASETS_URL_REWRITES", raising=False)
    assert env_text("STABLE_DATASETS_REMOTE_LANCE") is None
    assert env_choice("STABLE_DATASETS_REMOTE_LANCE", ("in_place", "download"), "in_place") == "in_place"
    assert env_json_object("STABLE_DATASETS_URL_REWRITES") == {}
