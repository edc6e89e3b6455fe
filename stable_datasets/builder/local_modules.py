"""A builder script's folder is a package: the script may import the modules beside it.

`load_builder_module(script)` imports the script as `<package>.<stem>`, where the package is
the script's folder under a name unique to the folder path and the content of the script and
its local modules (two folders with a `helper.py` each, or an edited helper, never share
modules). A folder's `__init__.py` is run as the package's, as Python runs it, and is part of
the fingerprint. Relative imports (`from .helper import f`) work as in any package; plain ones
(`from helper import f`) are redirected to the package when a module of that name sits in the
folder, as if the script were run from there, without touching `sys.path`.

`local_module_files(script)` finds those modules statically (the AST of the script and,
transitively, of each local module), so a helper imported lazily inside a function counts
too, and the fingerprint does not depend on what happened to be imported yet. Installed
packages are never local.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE_PREFIX = "stable_datasets_builder_"
_lock = threading.RLock()


# -- finding local modules --------------------------------------------------------------------------
def _module_file(folder: Path, dotted: str) -> Path | None:
    """folder/a/b.py or folder/a/b/__init__.py for "a.b", when it exists."""
    if not dotted:
        return None
    base = folder.joinpath(*dotted.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


#: CPython 3.11 keeps the AST converter's recursion count per interpreter, not per thread: two `ast.parse`
#: calls running at once in two threads (the viewer's request threads and a build, say) can end one of them
#: with "SystemError: AST constructor recursion depth mismatch". Ours take turns.
_PARSE_LOCK = threading.Lock()


def parse_source(source: bytes | str, filename: str) -> ast.Module:
    """`ast.parse`, one thread at a time; a parse that another library's thread disturbed is tried again."""
    with _PARSE_LOCK:
        for attempt in range(3):
            try:
                return ast.parse(source, filename=filename)
            except SystemError as exc:
                if "recursion depth mismatch" not in str(exc) or attempt == 2:
                    raise
        raise AssertionError("unreachable")


def _imported_files(path: Path, root: Path) -> set[Path]:
    """Local files that the module at `path` imports (plain names resolve from `root`, relative from its folder)."""
    try:
        tree = parse_source(path.read_bytes(), str(path))
    except (SyntaxError, ValueError):
        return set()  # importing it will report the error with its line
    package_dir = path.parent  # what `from . import x` refers to, for a module and for an __init__.py alike
    found: set[Path] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [(root, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_dir
                for _ in range(node.level - 1):
                    base = base.parent
            else:
                base = root
            module = node.module or ""
            names = [(base, module)] + [(base, f"{module}.{a.name}".lstrip(".")) for a in node.names]
        else:
            continue
        for base, dotted in names:
            parts = dotted.split(".")
            for i in range(1, len(parts) + 1):  # a.b.c imports a, a.b and a.b.c
                file = _module_file(base, ".".join(parts[:i]))
                if file is not None and file.resolve().is_relative_to(root):
                    found.add(file.resolve())
    return found


def local_module_files(script: str | os.PathLike) -> list[Path]:
    """The files of the local modules `script` imports, directly or through each other, sorted."""
    script = Path(script).resolve()
    root = script.parent
    seen: set[Path] = set()
    todo = [script]
    init = root / "__init__.py"
    if init.is_file():  # the folder's package runs it before the script (see load_builder_module)
        seen.add(init)
        todo.append(init)
    while todo:
        for file in _imported_files(todo.pop(), root):
            if file not in seen and file != script:
                seen.add(file)
                todo.append(file)
    return sorted(seen)


def local_sources_text(script: str | os.PathLike) -> str:
    """The script's source followed by each local module's, labelled by its path relative to the folder."""
    script = Path(script).resolve()
    parts = [script.read_text(encoding="utf-8")]
    for file in local_module_files(script):
        parts.append(f"\n# --- local module {file.relative_to(script.parent).as_posix()} ---\n")
        parts.append(file.read_text(encoding="utf-8"))
    return "".join(parts)


def content_digest(script: Path) -> str:
    """sha256 over the script and its local modules: what decides whether a loaded copy is current."""
    digest = hashlib.sha256()
    for file in [script, *local_module_files(script)]:
        digest.update(str(file.relative_to(script.parent)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


# -- importing ------------------------------------------------------------------------------------
class _LocalLoader(importlib.machinery.SourceFileLoader):
    """Loads a module of a builder package with the import hook that maps plain local names to the package."""

    def exec_module(self, module: ModuleType) -> None:
        package = module.__name__.split(".")[0]
        module.__dict__["__builtins__"] = _package_builtins(package)
        super().exec_module(module)


class _PackageFinder:
    """Finds the submodules of builder packages (and only those) with `_LocalLoader`."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PACKAGE_PREFIX) or "." not in fullname:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=_LocalLoader(fullname, spec.origin),
                                                      submodule_search_locations=spec.submodule_search_locations)


_builtins_by_package: dict[str, dict[str, Any]] = {}


def _package_builtins(package: str) -> dict[str, Any]:
    """Builtins whose `__import__` sends `import helper` to `<package>.helper` when helper is local."""
    if package in _builtins_by_package:
        return _builtins_by_package[package]
    folder = Path(sys.modules[package].__path__[0])
    real_import = builtins.__import__

    def local_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and name and _module_file(folder, name.split(".")[0]) is not None:
            module = real_import(name, {"__package__": package, "__name__": package + ".__init__"}, locals,
                                 fromlist, 1)
            return module
        return real_import(name, globals, locals, fromlist, level)

    table = dict(vars(builtins))
    table["__import__"] = local_import
    _builtins_by_package[package] = table
    return table


def _ensure_finder() -> None:
    if not any(finder is _PackageFinder for finder in sys.meta_path):
        sys.meta_path.insert(0, _PackageFinder)


def load_builder_module(script: str | os.PathLike) -> ModuleType:
    """Import `script` as a module of its folder's package (see the module docstring)."""
    script = Path(script).resolve()
    folder = script.parent
    folder_key = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    package = f"{PACKAGE_PREFIX}{folder_key}_{content_digest(script)[:12]}"
    module_name = f"{package}.{script.stem}"
    with _lock:
        if module_name in sys.modules:
            return sys.modules[module_name]
        _ensure_finder()
        try:
            if package not in sys.modules:
                _new_package(package, folder)  # runs the folder's __init__.py, which may import the script
            if module_name in sys.modules:
                return sys.modules[module_name]
            loader = _LocalLoader(module_name, str(script))
            spec = importlib.util.spec_from_file_location(module_name, script, loader=loader)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import builder script {script}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except BaseException:
            for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
                sys.modules.pop(name, None)
            _builtins_by_package.pop(package, None)
            raise
        setattr(sys.modules[package], script.stem, module)
        return module


def _new_package(package: str, folder: Path) -> None:
    """The package of a builder folder in sys.modules: its `__init__.py` run as Python runs a
    package's, or an empty package when there is none."""
    init = folder / "__init__.py"
    if not init.is_file():
        pkg = ModuleType(package, f"builder folder {folder}")
        pkg.__path__ = [str(folder)]
        pkg.__package__ = package
        pkg.__file__ = None
        sys.modules[package] = pkg
        return
    spec = importlib.util.spec_from_file_location(package, init, loader=_LocalLoader(package, str(init)),
                                                  submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {init}")
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[package] = pkg
    spec.loader.exec_module(pkg)


def local_modules(builder_cls: type) -> list[ModuleType]:
    """The builder's own module and every local module it imports, imported now (for pickling by value).

    Empty for a class that does not come from a builder package (defined in an installed
    module, a notebook or with exec).
    """
    module = sys.modules.get(builder_cls.__module__)
    if module is None or not builder_cls.__module__.startswith(PACKAGE_PREFIX) or not module.__file__:
        return []
    package = builder_cls.__module__.split(".")[0]
    script = Path(module.__file__)
    modules = [module]
    for file in local_module_files(script):
        relative = file.relative_to(script.parent).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        modules.append(importlib.import_module(".".join((package, *parts))))
    return modules
