"""The text that stands for a builder's code in its fingerprint.

In order: a builder script (and the local modules it imports); else the file its methods were
compiled from (and that file's local modules); else, for classes without a source file
(`python -c`, `exec`, notebooks), each method's source or bytecode with the module globals it
reads, so a global changed under `exec` changes the fingerprint too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from loguru import logger

from stable_datasets.builder.local_modules import local_sources_text
from stable_datasets.identity.code import UnhashableFunction, class_identity
from stable_datasets.identity.fingerprint import canonical_json


def _user_classes(cls: type) -> list[type]:
    return [k for k in cls.__mro__ if k is not object and not k.__module__.startswith("stable_datasets.")]


def _code_files(cls: type) -> list[str]:
    """Files the methods of `cls` and its user bases were compiled from, in MRO order, each once."""
    files: list[str] = []
    for klass in _user_classes(cls):
        for value in vars(klass).values():
            function = getattr(value, "__func__", value)
            code = getattr(function, "__code__", None) or getattr(getattr(value, "fget", None), "__code__", None)
            if code is not None and code.co_filename not in files:
                files.append(code.co_filename)
    return files


_REMEMBERED: dict[type, str] | None = None


@contextlib.contextmanager
def remembering_sources() -> Iterator[None]:
    """Within the block, each class's source text is read once: for a caller that asks one builder about
    many configs at once (the inventory behind `ls`/`prune`), not for builds, which must see every edit."""
    global _REMEMBERED
    outer = _REMEMBERED
    _REMEMBERED = {} if outer is None else outer
    try:
        yield
    finally:
        _REMEMBERED = outer


def builder_source_text(cls: type) -> str:
    if _REMEMBERED is not None:
        if cls not in _REMEMBERED:
            _REMEMBERED[cls] = _source_text(cls)
        return _REMEMBERED[cls]
    return _source_text(cls)


def _source_text(cls: type) -> str:
    script = getattr(cls, "_script_path", None)
    if script and os.path.isfile(script):
        return local_sources_text(script)
    files = _code_files(cls)
    if not files and cls.__module__.startswith("stable_datasets."):  # one of our own builder classes
        module = sys.modules.get(cls.__module__)
        files = [module.__file__] if module is not None and module.__file__ else []
        if files and os.path.isfile(files[0]) and getattr(cls, "FINGERPRINT_OWN_MODULE_ONLY", False):
            return Path(files[0]).read_text()
    if files and all(os.path.isfile(f) for f in files):
        return "".join(local_sources_text(Path(f)) for f in files)
    try:
        return "# no source file: methods and the globals they read\n" + canonical_json(class_identity(cls))
    except UnhashableFunction as exc:
        logger.warning("builder {} reads a value that cannot be fingerprinted ({}); its caches will not be reused",
                       cls.__qualname__, exc)
        return f"# unhashable: {uuid.uuid4().hex}"
