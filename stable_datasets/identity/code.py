"""What a piece of user code computes, as hashable JSON: for map functions and builder classes.

A function is identified by its source (or, without source, its bytecode), its defaults and
closure, and everything it reads that the user wrote: module globals, attributes of the user's
own modules it reaches through them (`helper.f`, `pkg.helper.f`), the functions those call in
turn (to any depth, cycles cut), the instance behind a bound method (`self.k`) and the class
behind a classmethod (its attributes and methods). So an edit of any of them, in a fresh
process, changes the identity. Installed packages count by name and version. Bytecode is
rendered without memory addresses, so the identity is the same in every process.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import pickle
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

from stable_datasets.errors import StableDatasetsError
from stable_datasets.identity.fingerprint import to_jsonable

#: how many calls deep a chain of user functions is followed (a cycle is cut wherever it closes)
MAX_DEPTH = 24
_SKIPPED_MEMBERS = ("__dict__", "__weakref__", "__module__", "__doc__", "__annotations__", "__firstlineno__",
                    "__static_attributes__")


class UnhashableFunction(StableDatasetsError):
    """A value a function reads can be neither described as JSON nor pickled."""


def code_text(code: types.CodeType) -> str:
    """Bytecode, constants (nested code recursively, not by its address) and names of `code`."""
    consts = [code_text(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return f"{code.co_code.hex()}|{consts}|{code.co_names}"


def code_names(code: types.CodeType) -> set[str]:
    """Names that `code` and the code nested in it (lambdas, comprehensions) read: globals and attributes."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[Path, ...]:
    import site

    paths = {*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_paths()["stdlib"],
             sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return tuple(Path(p).resolve() for p in paths)


def is_user_module(module: types.ModuleType | None) -> bool:
    """A module the user wrote (a script, a module beside it, a builder script, an editable install, one made
    in memory); not an installed package (site-packages, pure or platform), the standard library or this
    library. The one rule for both sides of user code: the fingerprint hashes such a module's contents (the
    rest count by name and version) and the Ray engine sends it to workers by value (write.engines)."""
    if module is None:
        return False
    name = module.__name__
    if name == "stable_datasets" or name.startswith("stable_datasets.") or name in sys.builtin_module_names:
        return False
    file = getattr(module, "__file__", None)
    if not file:
        return name != "builtins"
    resolved = Path(file).resolve()
    return not any(resolved.is_relative_to(root) for root in _installed_roots())


def _user_class(cls: type) -> bool:
    module = sys.modules.get(cls.__module__)
    return module is None or is_user_module(module)  # no module: made in memory (exec), so the user's


class _Identity:
    """One walk over what a function reads; `active` holds the objects being described, so a cycle
    (a recursive function, a method naming its own class) is cut with a reference by name."""

    def __init__(self) -> None:
        self.active: set[int] = set()

    def value(self, value: Any, depth: int, names: frozenset[str] = frozenset()) -> Any:
        """A module by name (a user module with the attributes in `names` it holds), a function by its
        code and what it reads, a class by its members, data by content."""
        if isinstance(value, types.ModuleType):
            return self.module(value, depth, names)
        if isinstance(value, type):
            return self.klass(value, depth)
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) \
                or (callable(value) and hasattr(value, "__code__")):
            return self.function(value, depth + 1)
        try:
            return to_jsonable(value)
        except TypeError:
            pass
        if _user_class(type(value)):  # an instance of the user's class: its class and its state
            state = getattr(value, "__dict__", None)
            try:
                described = self.value(state, depth) if state is not None else self.pickled(value)
            except UnhashableFunction:
                described = self.pickled(value)
            return {"instance": self.klass(type(value), depth), "state": described}
        return self.pickled(value)

    @staticmethod
    def pickled(value: Any) -> Any:
        try:
            return {"pickle_sha256": hashlib.sha256(pickle.dumps(value)).hexdigest()}
        except Exception as exc:
            raise UnhashableFunction(f"{type(value).__name__}: {exc}") from None

    def guarded(self, obj: Any, ref: Any, describe: Any) -> Any:
        if id(obj) in self.active:
            return ref
        self.active.add(id(obj))
        try:
            return describe()
        finally:
            self.active.discard(id(obj))

    def module(self, module: types.ModuleType, depth: int, names: frozenset[str]) -> Any:
        if not is_user_module(module):
            top = sys.modules.get(module.__name__.partition(".")[0])
            return {"module": module.__name__, "version": str(getattr(top, "__version__", ""))}

        def describe() -> Any:
            attributes = {name: self.value(vars(module)[name], depth, names)
                          for name in sorted(names) if name in vars(module)}
            return {"module": module.__name__, "attributes": attributes}

        return self.guarded(module, {"module": module.__name__}, describe)

    def klass(self, cls: type, depth: int) -> Any:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if not _user_class(cls) or depth >= MAX_DEPTH:
            return {"class": name}
        return self.guarded(cls, {"class": name}, lambda: {"class": name, "members": self.members(cls, depth)})

    def members(self, cls: type, depth: int, skip_module_prefix: str = "") -> dict[str, Any]:
        """Every method and attribute of `cls` and its user bases, by class."""
        identity: dict[str, Any] = {}
        for klass in cls.__mro__:
            if klass is object or (klass.__module__.startswith(skip_module_prefix) if skip_module_prefix
                                   else not _user_class(klass)):
                continue
            members: dict[str, Any] = {}
            for member, value in sorted(vars(klass).items()):
                if member in _SKIPPED_MEMBERS:
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                try:
                    if isinstance(value, property):
                        members[member] = {"property": [self.value(f, depth) for f in (value.fget, value.fset,
                                                                                         value.fdel) if f]}
                    else:
                        members[member] = self.value(value, depth)
                except UnhashableFunction as exc:
                    raise UnhashableFunction(f"{klass.__qualname__}.{member}: {exc}") from None
            identity[klass.__qualname__] = members
        return identity

    def function(self, fn: Any, depth: int) -> Any:
        """What a function computes: its code, defaults, closure and what it reads."""
        if isinstance(fn, functools.partial):
            return {"partial": self.function(fn.func, depth), "args": [self.value(a, depth) for a in fn.args],
                    "keywords": {k: self.value(v, depth) for k, v in sorted(fn.keywords.items())}}
        if isinstance(fn, types.MethodType):  # obj.method or Cls.classmethod: the function and what it is bound to
            return {"method": self.function(fn.__func__, depth), "self": self.value(fn.__self__, depth)}
        code = getattr(fn, "__code__", None)
        if code is None:  # a callable object: its class and its state
            return self.value(fn, depth)
        qualname = getattr(fn, "__qualname__", "")
        if depth > MAX_DEPTH:
            return {"function": qualname, "code": code_text(code)}
        return self.guarded(fn, {"function": qualname, "recursive": True}, lambda: self.code_of(fn, code, depth))

    def code_of(self, fn: Any, code: types.CodeType, depth: int) -> dict[str, Any]:
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = None
        names = frozenset(code_names(code))
        identity: dict[str, Any] = {
            "qualname": getattr(fn, "__qualname__", ""),
            "code": source or code_text(code),
            "defaults": [self.value(v, depth) for v in (getattr(fn, "__defaults__", None) or ())],
            "kwdefaults": {k: self.value(v, depth) for k, v in sorted((getattr(fn, "__kwdefaults__", None)
                                                                       or {}).items())},
            "closure": [self.value(c.cell_contents, depth, names) for c in (getattr(fn, "__closure__", None) or ())
                        if _filled(c)],
        }
        fn_globals = getattr(fn, "__globals__", {})
        identity["globals"] = {name: self.value(fn_globals[name], depth, names)
                               for name in sorted(names) if name in fn_globals}
        return identity


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def value_identity(value: Any, depth: int = 0) -> Any:
    """A module by name, a function by `function_identity`, a user class by its members, data by content."""
    return _Identity().value(value, depth)


def function_identity(fn: Any, depth: int = 0) -> dict[str, Any]:
    """What a function computes: its code, defaults, closure and everything of the user's it reads."""
    return _Identity().function(fn, depth)


def class_identity(cls: type, skip_module_prefix: str = "stable_datasets.") -> dict[str, Any]:
    """Every method (as `function_identity`, so with what it reads) and attribute of a class and of its
    user bases, except `object` and the bases from modules starting with `skip_module_prefix`."""
    walker = _Identity()
    walker.active.add(id(cls))  # a method naming its own class refers to it by name
    return walker.members(cls, 0, skip_module_prefix)
