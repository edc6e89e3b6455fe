"""Every ```python block in docs/ runs as a user would run it.

Each page runs, its blocks in order in one namespace, in a fresh interpreter started in an
empty folder outside the repository (so nothing from `tests/` or the repository's folders can
be imported) with its own cache root. A page names the extras it needs on a line
`<!-- extras: torch, hf -->`. The page runs as in a venv holding only stable-datasets and those
extras: every installed distribution outside their dependency closure (tests/behaviour/extras_closure.py)
cannot be imported, by the page, by stable_datasets or by any package, so a page that quietly needs a
package none of its extras installs (pillow behind an image, moto, torchdata) fails here, naming the
extra that would install it.
"""

from __future__ import annotations

import json
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
                 "datafusion": ("pages",), "boto3": ("s3",), "gcsfs": ("gcs",), "fsspec": ("s3", "gcs"),
                 "moto": ("moto",), "torchdata": ("torchdata",)}

RUNNER = r"""
import json, os, sys, importlib.abc, importlib.machinery, importlib.util

page, extras, hidden, blocks = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]


def from_hidden(top):
    # True when `top` would load from the hidden distribution's own files; a copy a held package vendors
    # on sys.path (ray/thirdparty_files/colorama) loads in that venv too, so it is not hidden
    if top not in hidden:
        return False
    own = hidden[top][2]
    module = sys.modules.get(top)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        spec = importlib.machinery.PathFinder.find_spec(top)
        if spec is None:
            return False
        origin = spec.origin if spec.has_location else next(iter(spec.submodule_search_locations or []), None)
    return origin is None or origin == own or origin.startswith((own + os.sep, own + "."))


class Guard(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in ("tests", "builders", "benchmarks", "examples"):
            raise ModuleNotFoundError(f"{page}: user docs cannot import {name!r} from the repository")
        if from_hidden(top):
            dist, installers, _ = hidden[top]
            hint = f"name {' or '.join(repr(e) for e in installers)} on" if installers else "add an extra for it to"
            raise ModuleNotFoundError(f"{page} needs {name!r} (the package {dist!r}), which none of its extras "
                                      f"[{extras}] installs: {hint} the page's <!-- extras: ... --> line")
        return None


def probe(name, package=None, _find_spec=importlib.util.find_spec):
    # importlib.util.find_spec, how packages probe for optional ones: None for a hidden module, as in that venv
    return None if from_hidden(name.partition(".")[0]) else _find_spec(name, package)


importlib.util.find_spec = probe
sys.meta_path.insert(0, Guard())
namespace = {"__name__": "__docs__"}
for number, code in enumerate(blocks, 1):
    exec(compile(code, f"{page} block {number}", "exec"), namespace)
"""


def hidden_for(extras: tuple[str, ...]) -> dict[str, tuple[str, list[str], str]]:
    """Module -> (its distribution, the extras that would install it, where that distribution puts it) for what
    a venv of these extras lacks."""
    pytest.importorskip("tomllib")
    from tests.behaviour.extras_closure import (
        distribution_closure,
        hidden_modules,
        installed_distributions,
        project_extras,
    )

    installers = {extra: distribution_closure((extra,)) for extra in project_extras()}
    installed = installed_distributions()
    return {module: (dist, sorted(e for e, held in installers.items() if dist in held),
                     str(installed[dist].locate_file(module)))
            for module, dist in hidden_modules(extras).items()}


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
    env["PYTHONPATH"] = str(DOCS.parent)  # this checkout's stable_datasets (the runner refuses its other folders)
    env |= {"STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache"), "STABLE_DATASETS_DISABLE_PROGRESS": "1",
            "STABLE_DATASETS_LOCAL_CACHE_DIR": str(tmp_path / "object-store")}
    env.pop("STABLE_DATASETS_BUILDERS_PATH", None)
    done = subprocess.run([sys.executable, "-c", RUNNER, page.name, ",".join(page_extras(text)),
                           json.dumps(hidden_for(tuple(page_extras(text)))), *blocks], cwd=work, env=env,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, f"{page.name} failed:\n{done.stderr[-4000:]}"


def test_the_loaders_page_exists():
    assert (DOCS / "load-your-own-files.md").is_file()


@pytest.mark.parametrize("code, says", [
    ("import moto", "which none of its extras [] installs: name 'moto' on"),
    ("import torchdata", "which none of its extras [] installs: name 'torchdata' on"),
    ("import stable_datasets as sds\nimport numpy as np\n"
     "sds.Image(decode_to='pil').decode(sds.Image().encode(np.zeros((2, 2, 3), 'uint8'), 'i'))",
     "Image(decode_to='pil') needs Pillow: pip install 'stable-datasets[pil]'")])
def test_a_page_needing_a_package_its_extras_do_not_install_fails_naming_the_extra(tmp_path, code, says):
    """The checker itself: in the venv of no extra, moto, torchdata and pillow (behind decode_to='pil') are absent,
    and the error names the extra that installs each; probing with importlib.util.find_spec says None."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    env |= {"PYTHONPATH": str(DOCS.parent), "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache")}
    probe = "import importlib.util\nassert importlib.util.find_spec('moto') is None\n"
    done = subprocess.run([sys.executable, "-c", RUNNER, "page.md", "", json.dumps(hidden_for(())), probe, code],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and says in done.stderr, done.stderr[-2000:]


def test_a_copy_ray_vendors_is_not_hidden_even_once_ray_ran_in_this_process(tmp_path):
    """ray imports colorama and psutil from its own ray/thirdparty_files, which `import ray` puts on sys.path; a
    venv of the ray extra holds them so. Once a Ray test imported ray in this pytest worker, importlib.metadata
    also finds those copies' metadata, and the checker took them for the installed ones (CI failed so on
    parallel-builds.md); where pip installed a distribution is what it hides."""
    pytest.importorskip("ray")
    import ray  # noqa: F401  (as a Ray test run before this one in the same worker)

    hidden = hidden_for(("ray",))
    site = [v[2] for k, v in hidden.items() if k in ("psutil", "colorama")]
    assert all("thirdparty_files" not in where for where in site), site
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    env |= {"PYTHONPATH": str(DOCS.parent), "RAY_USAGE_STATS_ENABLED": "0"}
    code = "import ray, psutil, colorama\nassert 'thirdparty_files' in psutil.__file__, psutil.__file__\n"
    done = subprocess.run([sys.executable, "-c", RUNNER, "page.md", "ray", json.dumps(hidden), code],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
