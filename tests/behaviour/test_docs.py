"""Every ```python block in docs/ runs as a user would run it.

Each page runs, its blocks in order in one namespace, in a fresh interpreter started in an
empty folder outside the repository (so nothing from `tests/` or the repository's folders can
be imported) with its own cache root. A page names the extras it needs on a line
`<!-- extras: torch, hf -->`; an optional package of any other extra cannot be imported by the
page's code or by stable_datasets while it runs (packages importing their own dependencies are
left alone), so a page that quietly needs an extra it does not name fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
EXTRAS_LINE = re.compile(r"<!--\s*extras:\s*([\w\s,-]*?)\s*-->")
PAGES = sorted(DOCS.glob("*.md"))

#: the top-level module of each optional package -> the extras (pyproject.toml) that install it
EXTRA_MODULES = {"torch": ("torch",), "sklearn": ("data",), "pandas": ("pandas",), "polars": ("polars",),
                 "datasets": ("hf",), "PIL": ("pil",), "ray": ("ray",), "tokenizers": ("sft",),
                 "datafusion": ("pages",), "boto3": ("s3",), "gcsfs": ("gcs",), "fsspec": ("s3", "gcs")}

RUNNER = r"""
import sys, importlib.abc

page, extras, blocks = sys.argv[1], set(sys.argv[2].split(",")) - {""}, sys.argv[3:]
EXTRA_MODULES = %r
GUARD_GLOBALS = globals()


def imported_by_user_or_library():
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if frame.f_globals is GUARD_GLOBALS or "importlib" in name or name.startswith("<frozen"):
            frame = frame.f_back
            continue
        module = frame.f_globals.get("__name__", "")
        return module == "__docs__" or module.split(".")[0] == "stable_datasets"
    return False


class Guard(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in ("tests", "builders", "benchmarks", "examples"):
            raise ModuleNotFoundError(f"{page}: user docs cannot import {name!r} from the repository")
        needs = EXTRA_MODULES.get(top)
        if needs and not extras & set(needs) and imported_by_user_or_library():
            raise ModuleNotFoundError(f"{page} imports {name!r}, which comes with the extra {needs[0]!r}: "
                                      f"name it on the page's <!-- extras: ... --> line")
        return None


sys.meta_path.insert(0, Guard())
namespace = {"__name__": "__docs__"}
for number, code in enumerate(blocks, 1):
    exec(compile(code, f"{page} block {number}", "exec"), namespace)
"""


def page_extras(text: str) -> list[str]:
    found = EXTRAS_LINE.search(text)
    return [e.strip() for e in found.group(1).split(",") if e.strip()] if found else []


def test_there_are_doc_pages():
    assert {p.name for p in PAGES} >= {"quickstart.md", "writing-a-builder.md", "features.md",
                                        "caches-and-fingerprints.md", "storage-formats-and-video.md",
                                        "shared-cache-on-a-cluster.md", "packed-sft.md",
                                        "interleaved.md", "parallel-builds.md", "in-memory-and-hf.md",
                                        "choosing-a-layout.md", "viewer.md"}


def test_named_extras_exist():
    tomllib = pytest.importorskip("tomllib")
    extras = set(tomllib.loads((DOCS.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for page in PAGES:
        assert set(page_extras(page.read_text())) <= extras, page.name
    assert {e for names in EXTRA_MODULES.values() for e in names} <= extras


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_examples_run(page, tmp_path):
    text = page.read_text()
    blocks = BLOCK.findall(text)
    for number, code in enumerate(blocks, 1):
        assert "pytest" not in code and not re.search(r"^\s*(from|import) tests\b", code, re.M), \
            f"{page.name} block {number}: user docs use neither pytest nor the test suite's helpers"
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    env |= {"STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache"), "STABLE_DATASETS_DISABLE_PROGRESS": "1",
            "STABLE_DATASETS_LOCAL_CACHE_DIR": str(tmp_path / "object-store")}
    env.pop("STABLE_DATASETS_BUILDERS_PATH", None)
    done = subprocess.run([sys.executable, "-c", RUNNER % (EXTRA_MODULES,), page.name,
                           ",".join(page_extras(text)), *blocks], cwd=work, env=env, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, f"{page.name} failed:\n{done.stderr[-4000:]}"


def test_the_loaders_page_exists():
    assert (DOCS / "load-your-own-files.md").is_file()
