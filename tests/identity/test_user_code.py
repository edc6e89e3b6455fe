"""One rule for "is this module the user's code" (identity.code.is_user_module): the fingerprint hashes such a
module's contents (anything else counts by name and version) and the Ray engine ships it to the workers by value
(anything else they import by name). Before the rule was one, the two could disagree (issue 35)."""

from __future__ import annotations

import json
import site
import sys
import sysconfig
from pathlib import Path

import pyarrow.parquet
import pytest

import stable_datasets
from stable_datasets.builder.local_modules import load_builder_module
from stable_datasets.identity.code import _installed_roots, is_user_module
from stable_datasets.write.engines import user_modules

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_roots():
    """The installed folders are read once per process; a test that moves one reads them again, before and after."""
    _installed_roots.cache_clear()
    yield
    _installed_roots.cache_clear()


def _module_file(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text("def f():\n    return 1\n")
    return path


def _import(name: str, monkeypatch):
    monkeypatch.delitem(sys.modules, name, raising=False)
    __import__(name)
    module = sys.modules[name]
    monkeypatch.setitem(sys.modules, name, module)  # dropped again when the test ends
    return module


def test_the_fingerprint_and_the_ray_engine_agree_on_what_is_the_users_code(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    _module_file(tmp_path / "project", "h35c_user_helpers")
    monkeypatch.syspath_prepend(str(tmp_path / "project"))
    user = _import("h35c_user_helpers", monkeypatch)
    # an editable install: a .pth file in a site folder names the source folder (pip's legacy editable form)
    _module_file(tmp_path / "checkout" / "src" / "h35c_editable", "__init__")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "h35c_editable.pth").write_text(str(tmp_path / "checkout" / "src") + "\n")
    site.addsitedir(str(tmp_path / "site"))
    editable = _import("h35c_editable", monkeypatch)
    builder = load_builder_module(REPO / "builders" / "digits.py")
    cases = {  # an object defined in the module judged, and whether the module is the user's
        "stdlib": (json.dumps, False),
        "site-packages": (pyarrow.parquet.read_table, False),
        "our own package": (stable_datasets.load_dataset, False),
        "a builder file under a builders path": (builder.Digits, True),
        "a user module in a folder of its own": (user.f, True),
        "an editable install": (editable.f, True),
    }
    judged = {}
    for case, (obj, _) in cases.items():
        module = sys.modules[obj.__module__]
        judged[case] = (is_user_module(module), module in user_modules(obj))
    assert judged == {case: (expected, expected) for case, (_, expected) in cases.items()}


def test_a_package_in_the_platform_library_folder_is_installed_for_both(tmp_path, monkeypatch, fresh_roots):
    """Where the platform library folder is not the pure one (lib64 on Red Hat-like systems), a package there is
    installed code: the fingerprint counted it by version, and the Ray engine, which did not look there, shipped
    it by value. This machine has one folder for both, so the test moves platlib (sysconfig's answer only)."""
    platlib = tmp_path / "lib64" / "site-packages"
    _module_file(platlib / "h35c_compiled", "__init__")
    paths = {**sysconfig.get_paths(), "platlib": str(platlib)}
    monkeypatch.setattr(sysconfig, "get_paths", lambda *args, **kwargs: dict(paths))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.syspath_prepend(str(platlib))
    compiled = _import("h35c_compiled", monkeypatch)
    assert (is_user_module(compiled), user_modules(compiled.f)) == (False, [])
