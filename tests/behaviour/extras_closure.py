"""What a venv holding only stable-datasets and some of its extras could import, worked out from the packages
installed here: the dependency closure of the project's own requirements plus those extras (markers and nested
extras such as `ray[data]` followed through each installed distribution's metadata), as top-level module names.

tests/behaviour/test_docs.py runs each docs page with every other installed distribution hidden, so a page that
needs a package none of the extras it names installs (pillow through an image, moto, torchdata) fails there as it
would in a fresh `pip install 'stable-datasets[extras]'` venv, without installing one per page (torch alone is
gigabytes).
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import sys
from functools import cache
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _inside_a_package(entry: str) -> bool:
    """True for a sys.path entry inside an importable package: a folder a package put there for the copies it
    vendors (ray/thirdparty_files, once ray is imported in this process), which is not where pip installs."""
    folder = Path(entry or ".").resolve()
    return any((parent / "__init__.py").is_file() for parent in folder.parents)


def installed_distributions() -> dict[str, metadata.Distribution]:
    """Canonical name -> the distribution pip installed (a vendored copy's metadata is never it)."""
    return _distributions()


@cache
def _distributions() -> dict[str, metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions(path=[e for e in sys.path if not _inside_a_package(e)]):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_canonical(name), dist)
    return found


def project_extras() -> list[str]:
    """The extras pyproject.toml defines, but the test suite's own (`test`) and the benchmarks' (`bench`)."""
    optional = tomllib.loads(PYPROJECT.read_text())["project"].get("optional-dependencies", {})
    return sorted(e for e in optional if e not in ("test", "bench"))


def _requirements(extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise ValueError(f"no extra(s) {unknown} in pyproject.toml; extras are {sorted(optional)}")
    return [Requirement(r) for r in project["dependencies"]] + [Requirement(r) for e in extras for r in optional[e]]


def distribution_closure(extras: tuple[str, ...]) -> set[str]:
    """The canonical names of the installed distributions a venv of stable-datasets[extras] would hold."""
    installed = _distributions()
    held: set[str] = set()
    pending = [(r, ("",)) for r in _requirements(extras)]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while pending:
        requirement, wanted_extras = pending.pop()
        if requirement.marker is not None and not any(
                requirement.marker.evaluate({"extra": e}) for e in wanted_extras):
            continue
        name = _canonical(requirement.name)
        key = (name, tuple(sorted(requirement.extras)))
        if key in seen or name not in installed:
            continue
        seen.add(key)
        held.add(name)
        own_extras = ("", *sorted(requirement.extras))
        pending.extend((Requirement(r), own_extras) for r in installed[name].requires or [])
    return held


def _top_levels(dist: metadata.Distribution) -> set[str]:
    text = dist.read_text("top_level.txt")
    names = {line.strip() for line in text.splitlines() if line.strip()} if text else set()
    for file in dist.files or []:
        parts = file.parts
        if not parts or parts[0].endswith((".dist-info", ".egg-info", ".data")) or parts[0] in ("..", "__pycache__"):
            continue
        first = parts[0]
        if len(parts) == 1:
            if first.endswith(".py"):
                names.add(first[:-3])
            elif first.endswith((".so", ".pyd")):
                names.add(first.split(".")[0])
        else:
            names.add(first)
    return {n for n in names if n.isidentifier()}


@cache
def hidden_modules(extras: tuple[str, ...]) -> dict[str, str]:
    """Top-level module -> the distribution installing it, for every module installed here that a venv of
    stable-datasets[extras] would not hold (a module some held distribution also provides is not hidden)."""
    held = distribution_closure(extras) | {"stable-datasets"}
    allowed: set[str] = set(sys.stdlib_module_names) | {"stable_datasets"}
    owner: dict[str, str] = {}
    for name, dist in _distributions().items():
        tops = _top_levels(dist)
        if name in held:
            allowed |= tops
        else:
            for top in tops:
                owner.setdefault(top, name)
    return {top: name for top, name in owner.items() if top not in allowed}
