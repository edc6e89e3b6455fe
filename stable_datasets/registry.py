"""Find builders by name: explicit script path or folder, $STABLE_DATASETS_BUILDERS_PATH,
the bundled `builders/` folder, then the `stable_datasets.builders` entry-point group."""

from __future__ import annotations

import difflib
import importlib
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from stable_datasets.builder.builder import DatasetBuilder
from stable_datasets.builder.local_modules import load_builder_module
from stable_datasets.cache.metadata import METADATA_FILE
from stable_datasets.env import env_text
from stable_datasets.errors import BuilderNotFoundError, StableDatasetsError
from stable_datasets.loaders import PACKAGED_LOADERS, folder_loader, loader_class

ENTRY_POINT_GROUP = "stable_datasets.builders"
#: the catalog's packages (stable_datasets.catalog): each module is one dataset, named as `load_dataset` finds it
CATALOG_PACKAGES = ("images", "video", "timeseries")
_loaded: dict[str, type[DatasetBuilder]] = {}  # by module name, which changes with the code


def bundled_builders_dir() -> Path:
    """From a checkout, its ./builders (beside pyproject.toml: a work tree's own, even when another checkout is
    installed in editable mode); else the installed copy (stable_datasets/bundled_builders)."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "builders" / "__init__.py").is_file():
        return checkout / "builders"
    try:
        import stable_datasets.bundled_builders as bundled  # local: a checkout has none (ImportError)

        return Path(next(iter(bundled.__path__)))
    except ImportError:
        return Path(__file__).resolve().parent.parent / "builders"


def search_path() -> list[Path]:
    env = env_text("STABLE_DATASETS_BUILDERS_PATH") or ""
    dirs = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [*dirs, bundled_builders_dir()]


def _script_in_folder(folder: Path) -> Path | None:
    for candidate in (folder / f"{folder.name}.py", folder / "builder.py"):
        if candidate.is_file():
            return candidate
    scripts = [p for p in folder.glob("*.py") if not p.name.startswith("_")]
    return scripts[0] if len(scripts) == 1 else None


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def list_builders() -> list[str]:
    """Every builder name reachable through the search path and entry points."""
    names: set[str] = set()
    for folder in search_path():
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.suffix == ".py" and not entry.name.startswith("_"):
                names.add(entry.stem)
            elif entry.is_dir() and not entry.name.startswith(("_", ".")) and _script_in_folder(entry):
                names.add(entry.name)
    names.update(catalog_names())
    names.update(_entry_points())
    names.update(PACKAGED_LOADERS)
    return sorted(names)


def catalog_names() -> dict[str, str]:
    """The catalog's datasets: name -> module (`cifar100` -> `stable_datasets.images.cifar100`), read from the
    packages' folders without importing them."""
    here = Path(__file__).resolve().parent
    return {path.stem: f"stable_datasets.{package}.{path.stem}" for package in CATALOG_PACKAGES
            for path in sorted((here / package).glob("*.py")) if not path.name.startswith("_")}


def catalog_class(name: str) -> type[DatasetBuilder] | None:
    """The catalog builder called `name`, or None. Imported by name (the catalog sits on the front door's floor and
    imports `load`, so the registry names its modules instead of importing them)."""
    module_name = catalog_names().get(name)
    if module_name is None:
        return None
    module = importlib.import_module(module_name)
    # one class under two names (upstream's aliases, such as SSv2) is one builder
    found = list(dict.fromkeys(obj for obj in vars(module).values() if isinstance(obj, type)
                               and issubclass(obj, DatasetBuilder) and obj.__module__ == module.__name__
                               and obj.builder_name() == name))
    if len(found) != 1:
        raise StableDatasetsError(f"catalog module {module_name} defines {len(found)} builders named {name!r}")
    return found[0]


def load_script(path: str | os.PathLike) -> type[DatasetBuilder]:
    """Import a builder script by path (its folder as a package, see builder/local_modules.py) and return
    the builder class it defines."""
    path = Path(path).resolve()
    module = load_builder_module(path)
    if module.__name__ in _loaded:
        return _loaded[module.__name__]
    classes = [obj for obj in vars(module).values()
               if isinstance(obj, type) and issubclass(obj, DatasetBuilder) and obj.__module__ == module.__name__]
    if not classes:
        raise StableDatasetsError(f"{path} defines no DatasetBuilder subclass")
    if len(classes) > 1:  # prefer the most derived classes; a script may define a base
        leaves = [c for c in classes if not any(o is not c and issubclass(o, c) for o in classes)]
        if len(leaves) != 1:
            raise StableDatasetsError(f"{path} defines several builders {[c.__name__ for c in leaves]}")
        classes = leaves
    cls = classes[0]
    cls._script_path = str(path)
    _loaded[module.__name__] = cls
    return cls


def resolve_builder(path_or_name: str | os.PathLike | type[DatasetBuilder]) -> tuple[type[DatasetBuilder],
                                                                                      dict[str, Any]]:
    """(builder class, config options it needs) for anything `resolve_builder_class` takes, and for a
    folder of data files without a builder script: the loader of its files, reading it as data_dir."""
    if not isinstance(path_or_name, type):
        text = os.fspath(path_or_name)
        candidate = Path(text).expanduser()
        if candidate.is_dir() and (os.sep in text or text.startswith(".")) and _script_in_folder(candidate) is None:
            if _is_cache_folder(candidate):
                raise BuilderNotFoundError(f"{text} is a stable-datasets cache, not a folder of data files: open it "
                                           f"with stable_datasets.open_cache({text!r}) (one split's folder)")
            try:
                return folder_loader(candidate)
            except FileNotFoundError as exc:
                raise BuilderNotFoundError(f"folder {text} holds no builder script ({candidate.name}.py or "
                                           f"builder.py) and no data files: {exc}") from None
        try:
            return resolve_builder_class(path_or_name), {}
        except BuilderNotFoundError:
            # "data", a folder in the working directory: no builder has that name, so it is the folder
            if candidate.is_dir() and not (os.sep in text or text.startswith(".")):
                return resolve_builder(os.path.join(os.curdir, text))
            raise
    return resolve_builder_class(path_or_name), {}


def _is_cache_folder(folder: Path) -> bool:
    """A split's cache folder, or a fingerprint folder of them: its `_metadata.json` files are no data."""
    if (folder / METADATA_FILE).is_file():
        return True
    try:
        with os.scandir(folder) as entries:  # no stat per file of a large data folder
            return any(os.path.isfile(os.path.join(e.path, METADATA_FILE)) for e in entries if e.is_dir())
    except OSError:
        return False


def resolve_builder_class(path_or_name: str | os.PathLike) -> type[DatasetBuilder]:
    """A builder class from a script path, a folder holding a script, or a registered name."""
    if isinstance(path_or_name, type) and issubclass(path_or_name, DatasetBuilder):
        return path_or_name
    text = os.fspath(path_or_name)
    candidate = Path(text).expanduser()
    if candidate.suffix == ".py":
        if not candidate.is_file():
            raise BuilderNotFoundError(f"builder script {text} does not exist")
        return load_script(candidate)
    if candidate.is_dir() and (os.sep in text or text.startswith(".")):
        script = _script_in_folder(candidate)
        if script is None:
            raise BuilderNotFoundError(f"folder {text} holds no builder script ({candidate.name}.py or builder.py)")
        return load_script(script)
    if text in PACKAGED_LOADERS:  # "csv", "json", ... as in Hugging Face: before any builder of that name
        return loader_class(text)
    for folder in search_path():
        script = folder / f"{text}.py"
        if script.is_file():
            return load_script(script)
        if (folder / text).is_dir() and (script := _script_in_folder(folder / text)):
            return load_script(script)
    if (catalog := catalog_class(text)) is not None:
        return catalog
    entry_points = _entry_points()
    if text in entry_points:
        loaded = entry_points[text].load()
        if isinstance(loaded, type) and issubclass(loaded, DatasetBuilder):
            return loaded
        raise StableDatasetsError(f"entry point {text!r} in {ENTRY_POINT_GROUP} is not a DatasetBuilder class")
    close = difflib.get_close_matches(text, list_builders(), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise BuilderNotFoundError(f"no builder named {text!r}{hint} (searched {[str(p) for p in search_path()]} "
                               f"and entry points '{ENTRY_POINT_GROUP}')")
