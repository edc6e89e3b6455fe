"""A map's result is never stale: each case edits code the function reaches, runs a fresh process, and
checks that the rows are the new ones (and that an unchanged rerun reuses the cache)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from stable_datasets.identity.code import UnhashableFunction, function_identity

MAIN = """
import json, sys
import stable_datasets as sds
import helper
ds = sds.StableDataset.from_dict({{"x": [1, 2, 3]}})
out = ds.map({function})
print(json.dumps({{"y": out["y"], "dir": str(out.cache_dirs[0])}}))
"""

# name -> (helper module before, helper module after, the map function as written in the script)
CASES = {
    "module attribute helper.f": (
        "def f(x):\n    return x + 1\n",
        "def f(x):\n    return x + 100\n",
        "lambda row: {'y': helper.f(row['x'])}"),
    "bound method reading self.k": (
        "class Scale:\n    def __init__(self):\n        self.k = K\n"
        "    def __call__(self, row):\n        return {'y': row['x'] * self.k}\n"
        "    def apply(self, row):\n        return {'y': row['x'] * self.k}\nK = 2\n",
        "class Scale:\n    def __init__(self):\n        self.k = K\n"
        "    def __call__(self, row):\n        return {'y': row['x'] * self.k}\n"
        "    def apply(self, row):\n        return {'y': row['x'] * self.k}\nK = 3\n",
        "helper.Scale().apply"),
    "classmethod reading a class attribute": (
        "class Shift:\n    K = 10\n    @classmethod\n"
        "    def apply(cls, row):\n        return {'y': row['x'] + cls.K}\n",
        "class Shift:\n    K = 20\n    @classmethod\n"
        "    def apply(cls, row):\n        return {'y': row['x'] + cls.K}\n",
        "helper.Shift.apply"),
    "a call chain four deep": (
        "def a(x):\n    return b(x)\ndef b(x):\n    return c(x)\ndef c(x):\n    return d(x)\n"
        "def d(x):\n    return x * 7\n",
        "def a(x):\n    return b(x)\ndef b(x):\n    return c(x)\ndef c(x):\n    return d(x)\n"
        "def d(x):\n    return x * 8\n",
        "lambda row: {'y': helper.a(row['x'])}"),
    "a callable object": (
        "class Scale:\n    def __call__(self, row):\n        return {'y': row['x'] * 2}\n",
        "class Scale:\n    def __call__(self, row):\n        return {'y': row['x'] * 5}\n",
        "helper.Scale()"),
    "functools.partial of a module function": (
        "def add(row, n):\n    return {'y': row['x'] + n}\n",
        "def add(row, n):\n    return {'y': row['x'] - n}\n",
        "__import__('functools').partial(helper.add, n=1)"),
    "a default argument from the module": (
        "import numpy as np\nTABLE = np.array([0, 10, 20, 30])\n"
        "def look(row, table=TABLE):\n    return {'y': int(table[row['x']])}\n",
        "import numpy as np\nTABLE = np.array([0, 11, 21, 31])\n"
        "def look(row, table=TABLE):\n    return {'y': int(table[row['x']])}\n",
        "helper.look"),
    "a closure over an array": (
        "import numpy as np\ndef make():\n    table = np.arange(4) * 2\n"
        "    return lambda row: {'y': int(table[row['x']])}\n",
        "import numpy as np\ndef make():\n    table = np.arange(4) * 3\n"
        "    return lambda row: {'y': int(table[row['x']])}\n",
        "helper.make()"),
    "a submodule attribute pkg.helper.f through a package": (
        "from pkg import inner\ndef f(x):\n    return inner.g(x)\n",
        "from pkg import inner\ndef f(x):\n    return inner.g(x)\n",
        "lambda row: {'y': helper.f(row['x'])}"),
}
EXPECTED = {
    "module attribute helper.f": ([2, 3, 4], [101, 102, 103]),
    "bound method reading self.k": ([2, 4, 6], [3, 6, 9]),
    "classmethod reading a class attribute": ([11, 12, 13], [21, 22, 23]),
    "a call chain four deep": ([7, 14, 21], [8, 16, 24]),
    "a callable object": ([2, 4, 6], [5, 10, 15]),
    "functools.partial of a module function": ([2, 3, 4], [0, 1, 2]),
    "a default argument from the module": ([10, 20, 30], [11, 21, 31]),
    "a closure over an array": ([2, 4, 6], [3, 6, 9]),
    "a submodule attribute pkg.helper.f through a package": ([-1, -2, -3], [-2, -4, -6]),
}
INNER = ("def g(x):\n    return -x\n", "def g(x):\n    return -2 * x\n")


def _run(project: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(project), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "main.py"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", list(CASES))
def test_an_edit_of_code_the_function_reaches_gives_new_rows(case, tmp_path):
    before, after, function = CASES[case]
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "inner.py").write_text(INNER[0])
    (project / "helper.py").write_text(before)
    (project / "main.py").write_text(textwrap.dedent(MAIN.format(function=function)))
    first = _run(project)
    assert first["y"] == EXPECTED[case][0]
    assert _run(project) == first  # nothing changed: the same cache is reused
    if before == after:  # the change is one module further
        (project / "pkg" / "inner.py").write_text(INNER[1])
    else:
        (project / "helper.py").write_text(after)
    second = _run(project)
    assert second["y"] == EXPECTED[case][1]
    assert second["dir"] != first["dir"]


def test_identity_is_the_same_for_the_same_code_and_data():
    table = np.arange(5)

    def f(row, k=3):
        return {"y": table[row["x"]] * k}

    assert function_identity(f) == function_identity(f)
    other = np.arange(5) + 1

    def g(row, k=3):
        return {"y": other[row["x"]] * k}

    assert function_identity(f)["closure"] != function_identity(g)["closure"]


def test_a_recursive_function_is_identified():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    identity = function_identity(fact)
    assert identity["closure"] == [{"function": fact.__qualname__, "recursive": True}]


def test_partial_keywords_are_part_of_the_identity():
    def add(row, n):
        return row + n

    assert function_identity(functools.partial(add, n=1)) != function_identity(functools.partial(add, n=2))


def test_a_lock_cannot_be_hashed():
    lock = threading.Lock()

    def f(row):
        with lock:
            return row

    with pytest.raises(UnhashableFunction, match="lock"):
        function_identity(f)
