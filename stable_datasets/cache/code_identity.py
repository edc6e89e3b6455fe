"""What a piece of user code computes, as hashable JSON: for map functions and builder classes.

A function is identified by its source (or, without source, its bytecode), its defaults and
closure, and the module globals it reads, so a global changed in a notebook cell or under
`exec` changes the identity. Bytecode is rendered without memory addresses, so the identity
is the same in every process.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import pickle
import types
from typing import Any

from stable_datasets.cache.fingerprint import to_jsonable
from stable_datasets.errors import StableDatasetsError

MAX_DEPTH = 3


class UnhashableFunction(StableDatasetsError):
    """A value a function reads can be neither described as JSON nor pickled."""


def code_text(code: types.CodeType) -> str:
    """Bytecode, constants (nested code recursively, not by its address) and names of `code`."""
    consts = [code_text(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return f"{code.co_code.hex()}|{consts}|{code.co_names}"


def code_names(code: types.CodeType) -> set[str]:
    """Global names that `code` and the code nested in it (lambdas, comprehensions) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


def value_identity(value: Any, depth: int = 0) -> Any:
    """A module by name, a function by `function_identity`, a class by name, data by content."""
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, (types.FunctionType, functools.partial)) or (callable(value) and hasattr(value, "__code__")):
        if depth < MAX_DEPTH:
            return function_identity(value, depth + 1)
        return {"function": getattr(value, "__qualname__", "?")}
    if isinstance(value, type):
        return {"class": f"{value.__module__}.{value.__qualname__}"}
    try:
        return to_jsonable(value)
    except TypeError:
        pass
    try:
        return {"pickle_sha256": hashlib.sha256(pickle.dumps(value)).hexdigest()}
    except Exception as exc:
        raise UnhashableFunction(f"{type(value).__name__}: {exc}") from None


def function_identity(fn: Any, depth: int = 0) -> dict[str, Any]:
    """What a function computes: its code, defaults, closure and the globals it reads."""
    if isinstance(fn, functools.partial):
        return {"partial": function_identity(fn.func, depth), "args": [value_identity(a, depth) for a in fn.args],
                "keywords": {k: value_identity(v, depth) for k, v in fn.keywords.items()}}
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: its class source and its state
        cls = type(fn)
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            source = f"{cls.__module__}.{cls.__qualname__}"
        return {"callable": source, "state": value_identity(fn, depth + 1) if depth < MAX_DEPTH else None}
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = None
    identity: dict[str, Any] = {
        "qualname": getattr(fn, "__qualname__", ""),
        "code": source or code_text(code),
        "defaults": [value_identity(v, depth) for v in (fn.__defaults__ or ())],
        "kwdefaults": {k: value_identity(v, depth) for k, v in (fn.__kwdefaults__ or {}).items()},
        "closure": [value_identity(c.cell_contents, depth) for c in (fn.__closure__ or ())],
    }
    fn_globals = getattr(fn, "__globals__", {})
    identity["globals"] = {name: value_identity(fn_globals[name], depth)
                           for name in sorted(code_names(code)) if name in fn_globals}
    return identity


def class_identity(cls: type, skip_module_prefix: str = "stable_datasets.") -> dict[str, Any]:
    """Every method (as `function_identity`, so with the globals it reads) and attribute of a class
    and of its bases, except `object` and the bases from modules starting with `skip_module_prefix`."""
    identity: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(skip_module_prefix):
            continue
        members: dict[str, Any] = {}
        for name, value in sorted(vars(klass).items()):
            if name in ("__dict__", "__weakref__", "__module__", "__doc__", "__annotations__"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            try:
                if isinstance(value, property):
                    members[name] = {"property": [value_identity(f) for f in (value.fget, value.fset, value.fdel) if f]}
                else:
                    members[name] = value_identity(value)
            except UnhashableFunction as exc:
                raise UnhashableFunction(f"{klass.__qualname__}.{name}: {exc}") from None
        identity[klass.__qualname__] = members
    return identity
