"""README's "Use" block runs as pasted into an empty folder, in a venv of the extras it names (issue 37 item 7):
before, it read `data/*.csv`, `pets/` and a `df` nobody had made, and a bucket nobody had."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.behaviour.test_docs import DOCS, RUNNER, hidden_for

README = DOCS.parent / "README.md"


def test_the_use_block_runs_as_pasted(tmp_path):
    text = README.read_text()
    use = re.search(r"## Use\n(.*?)```python\n(.*?)```", text, re.DOTALL)
    assert use is not None, "README has a '## Use' section with a python block"
    extras = tuple(re.search(r"stable-datasets\[([\w,]+)\]", use.group(1)).group(1).split(","))
    assert extras == ("data", "torch", "pandas")
    pytest.importorskip("torch")
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    env |= {"PYTHONPATH": str(DOCS.parent), "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache"),
            "STABLE_DATASETS_DISABLE_PROGRESS": "1"}
    check = ("assert pets['train'].features['label'].names == ['cat', 'dog']\n"
             "assert dd['test'][0] == {'text': 'bye', 'label': 0} and len(ds) == 2\n"
             "assert next(iter(loader))['image'].shape == (64, 8, 8, 3)\n")
    done = subprocess.run([sys.executable, "-c", RUNNER, "README.md", ",".join(extras),
                           json.dumps(hidden_for(extras)), use.group(2), check], cwd=work, env=env,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-4000:]
