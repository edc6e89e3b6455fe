"""The house plan of DESIGN.md, checked on the source: the floors below `dataset/` never import it (not even
inside a function), outside `layouts/` no code names a layout, and outside `dataset/` nothing reads a
`StableDataset`'s private state. Each rule fails with the file and line that breaks it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import stable_datasets
from stable_datasets.builder.local_modules import parse_source

PACKAGE = Path(stable_datasets.__file__).resolve().parent
LOWER_FLOOR = ("storage", "cache", "layouts", "write", "features", "arrow", "streaming")
LAYOUT_NAMES = ("arrow_shards", "lance_rows", "lance_video_frames", "parquet_shards")
NAMES_LAYOUTS = {"layouts"}
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
                 for line, name in _imported(parse_source(path.read_text(), str(path)))
                 if name == "stable_datasets.dataset" or name.startswith("stable_datasets.dataset.")]
    assert offenders == []


def test_only_layouts_name_a_layout():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in NAMES_LAYOUTS or relative in NAMES_LAYOUTS:
            continue
        for node in ast.walk(parse_source(path.read_text(), str(path))):
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


def _package_of(module: str, path: Path) -> str:
    """The package a module belongs to: `cache` for stable_datasets.cache.x; a top-level module is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else path.stem


def _imports_outside_type_checking(tree: ast.AST) -> list[tuple[int, str]]:
    hidden = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
              for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stable_datasets."):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.startswith("stable_datasets."))
    return found


def test_no_import_cycle_crosses_packages():
    """Function-local imports count: a cycle held together by them is still a cycle."""
    edges: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        source = relative.parts[0] if len(relative.parts) > 1 else path.stem
        for line, name in _imports_outside_type_checking(parse_source(path.read_text(), str(path))):
            target = name.split(".")[1]
            if target != source:
                edges.setdefault(source, {}).setdefault(target, f"{relative}:{line}")
    cycles = []
    for start in sorted(edges):  # a path back to `start` through other packages
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for target in sorted(edges.get(node, {})):
                if target == start:
                    cycles.append(" -> ".join([*trail, start]) + f" ({edges[node][target]})")
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, [*trail, target]))
    assert cycles == []


def test_importing_the_package_imports_no_heavy_optional_package():
    """The reason most function-local imports stay: torch, Ray, pandas and DataFusion load only when used."""
    import subprocess
    import sys

    code = ("import sys, stable_datasets\n"
            "print(sorted(m for m in ('torch', 'ray', 'pandas', 'datafusion', 'polars', 'datasets') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "[]"


#: function-local imports of the package's own modules: each saves import time (torch, Ray, the viewer's HTTP
#: server load only when used) or breaks an intra-package cycle, and says which in a `# local:` comment.
#: Lower this number as they go, never raise it.
LOCAL_IMPORTS_CEILING = 27


def test_function_local_imports_of_our_own_modules_are_few_and_say_why():
    local, unexplained = set(), []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = parse_source("\n".join(lines), "<lines>")
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for line, name in _imported(function):
                    if name.startswith("stable_datasets.") and f"{path.relative_to(PACKAGE)}:{line}" not in local:
                        local.add(f"{path.relative_to(PACKAGE)}:{line}")
                        if "# local: " not in lines[line - 1]:
                            unexplained.append(f"{path.relative_to(PACKAGE)}:{line}: {lines[line - 1].strip()}")
    assert unexplained == []
    assert len(local) <= LOCAL_IMPORTS_CEILING, sorted(local)


def test_tests_mirror_the_package():
    """A test file is found from the folder names alone: tests/<package>/test_*.py for a package's modules,
    tests/test_<module>.py for the front door's own modules, tests/behaviour/ for the end-to-end suites."""
    tests = Path(__file__).resolve().parents[1]
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    top_modules = {p.stem for p in PACKAGE.glob("*.py")}
    misplaced = []
    for path in sorted(tests.rglob("test_*.py")):
        relative = path.relative_to(tests)
        folder = relative.parts[0] if len(relative.parts) > 1 else None
        if folder in ("stress", "fixtures"):
            continue
        module_words = {m.split("_")[0] for m in top_modules}
        if folder is None and path.stem.removeprefix("test_").split("_")[0] not in module_words:
            misplaced.append(f"{relative}: no module stable_datasets/{path.stem.removeprefix('test_')}.py")
        elif folder is not None and folder != "behaviour" and folder not in packages:
            misplaced.append(f"{relative}: no package stable_datasets/{folder}/")
    assert misplaced == []
