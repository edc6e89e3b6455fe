"""The house plan of DESIGN.md, checked on the source: the floors below `dataset/` never import it (not even
inside a function), outside `layouts/` no code names a layout, and outside `dataset/` nothing reads a
`StableDataset`'s private state. Each rule fails with the file and line that breaks it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import stable_datasets

PACKAGE = Path(stable_datasets.__file__).resolve().parent
LOWER_FLOOR = ("storage", "cache", "layouts", "write", "features", "arrow", "streaming")
LAYOUT_NAMES = ("arrow_shards", "lance_rows", "lance_video_frames", "parquet_shards")
# cache/upstream.py describes upstream caches with the layouts that read them (the metadata it builds names one)
NAMES_LAYOUTS = {"layouts", "cache/upstream.py"}
PRIVATE_STATE = re.compile(r"\._(backends|indices|media)\b")


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (PACKAGE / package).rglob("*.py"))


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found.extend((node.lineno, name) for name in names)
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
    return found


def test_no_module_below_dataset_imports_it():
    offenders = [f"{path.relative_to(PACKAGE)}:{line} imports {name}"
                 for path in _modules(*LOWER_FLOOR)
                 for line, name in _imported(ast.parse(path.read_text()))
                 if name == "stable_datasets.dataset" or name.startswith("stable_datasets.dataset.")]
    assert offenders == []


def test_only_layouts_name_a_layout():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in NAMES_LAYOUTS or relative in NAMES_LAYOUTS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in LAYOUT_NAMES:
                offenders.append(f"{relative}:{node.lineno} names the layout {node.value!r}")
    assert offenders == []


def test_private_state_of_a_dataset_is_read_only_in_dataset():
    offenders = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
                 for path in sorted(PACKAGE.rglob("*.py")) if path.parent.name != "dataset"
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if PRIVATE_STATE.search(line) and "self._" not in line]
    assert offenders == []


def test_every_exception_class_of_the_package_derives_from_the_base_in_errors():
    import importlib
    import inspect
    import pkgutil

    from stable_datasets.errors import StableDatasetsError

    outside = []
    for info in pkgutil.walk_packages(stable_datasets.__path__, "stable_datasets."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name and issubclass(cls, BaseException) and \
                    not issubclass(cls, StableDatasetsError):
                outside.append(f"{info.name}.{name}")
    assert outside == []
