"""A built wheel (not the checkout) must find the bundled builders from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_wheel_ships_builders_and_finds_them_anywhere(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    wheel = next(tmp_path.glob("stable_datasets-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "site")
    assert "stable_datasets/bundled_builders/digits.py" in names
    assert "stable_datasets/py.typed" in names  # PEP 561: type checkers use our hints
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "stable_datasets").rglob("*.py")}
    assert modules <= set(names), f"modules missing from the wheel: {sorted(modules - set(names))}"
    assert not any(n.startswith("builders/") for n in names)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import stable_datasets as sds, stable_datasets.registry as r, stable_datasets.sft,"
            "stable_datasets.interleaved;"
            "print(sds.list_builders()); print(r.resolve_builder_class('digits')._script_path)")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "PYTHONSAFEPATH": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert out.returncode == 0, out.stderr
    listed, script = out.stdout.strip().splitlines()
    assert "'digits'" in listed and "'mnist'" in listed and "'cifar10'" in listed
    assert script.startswith(str(tmp_path / "site" / "stable_datasets" / "bundled_builders"))
