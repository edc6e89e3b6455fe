"""Instruction/answer conversations from Python's own documentation: real text, offline.

Two sources ship with every Python: the docstrings of standard-library modules ("What does
`json.dumps` do?" -> its docstring) and `pydoc_data.topics` (the language reference topics
that `help()` shows). Docstrings change between Python versions, so the version is part of
the fingerprint. Every 20th conversation (by a stable hash of its key) goes to "test".
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
import textwrap
import warnings

import stable_datasets as sds
from stable_datasets.sft import ChatSFTBuilder

MODULES = ("json", "os.path", "collections", "itertools", "functools", "re", "math", "statistics", "textwrap",
           "string", "datetime", "pathlib", "shutil", "csv", "heapq", "bisect", "random", "hashlib", "base64",
           "fractions", "decimal", "operator", "typing", "dataclasses", "enum", "argparse", "logging", "zlib",
           "gzip", "tarfile", "zipfile", "socket", "subprocess", "threading", "queue", "contextlib", "abc",
           "copy", "pprint", "difflib", "unicodedata", "struct", "array", "time", "calendar", "uuid", "secrets")
TOPICS = "pydoc_data.topics"


def _clean(text: str, limit: int = 4000) -> str:
    text = textwrap.dedent(text).strip()
    return text if len(text) <= limit else text[:limit].rsplit("\n", 1)[0]


def _docstring_pairs(modules):
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in sorted(dir(module)):
            if name.startswith("_"):
                continue
            with warnings.catch_warnings():  # reading deprecated aliases (typing.re, ...) warns
                warnings.simplefilter("ignore", DeprecationWarning)
                obj = getattr(module, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
                continue
            if getattr(obj, "__module__", module_name) not in (module_name, module.__name__, None):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                doc = inspect.getdoc(obj)
            if not doc or len(doc) < 40:
                continue
            kind = "class" if inspect.isclass(obj) else "function"
            yield f"doc:{module_name}.{name}", {"messages": [
                {"role": "user", "content": f"What does the {kind} `{module_name}.{name}` do in Python?"},
                {"role": "assistant", "content": _clean(doc)}]}


def _topic_pairs():
    from pydoc_data.topics import topics

    for topic in sorted(topics):
        text = _clean(topics[topic])
        if len(text) >= 80:
            yield f"topic:{topic}", {"messages": [
                {"role": "system", "content": "You answer questions about the Python language."},
                {"role": "user", "content": f"Explain the Python topic '{topic}'."},
                {"role": "assistant", "content": text}]}


def _in_test(key: str) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 20 == 0


class PythonDocsSft(ChatSFTBuilder):
    VERSION = sds.Version("1.0.0")

    def _description(self) -> str:
        return "Conversations about Python built from stdlib docstrings and pydoc_data.topics."

    def _fingerprint_extra(self):
        return {"python": list(sys.version_info[:2])}

    def _split_generators(self, dl_manager):
        # one source per module (and the topics last): the list num_proc divides among workers
        sources = [*MODULES, TOPICS]
        return [sds.SplitGenerator("train", {"split": "train", "sources": sources}),
                sds.SplitGenerator("test", {"split": "test", "sources": sources})]

    def _conversations(self, split, sources):
        modules = [s for s in sources if s != TOPICS]
        for source in (_docstring_pairs(modules), _topic_pairs() if TOPICS in sources else ()):
            for key, record in source:
                if _in_test(key) == (split == "test"):
                    yield key, record
