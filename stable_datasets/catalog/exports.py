"""The catalog packages' exports, imported when first used: `from stable_datasets.images import CIFAR100` imports
one module, not the whole catalog (and not the readers other datasets need)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lazy_exports(package: str, classes: dict[str, str]) -> tuple[list[str], Callable[[str], Any],
                                                                  Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` for a package exporting `classes` (class name -> module in the
    package); names whose module is not in the package folder are left out."""
    folder = Path(sys.modules[package].__file__ or "").parent
    present = {name: module for name, module in classes.items() if (folder / f"{module}.py").is_file()}

    def __getattr__(name: str) -> Any:
        module = present.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(present)

    return sorted(present), __getattr__, __dir__
