"""Command line conventions: options before or after the command, quiet `| head`, the same
targets for build/info/verify, exit code 1 (data, one line) vs 2 (usage), no traceback unless
--debug, and a fast offline failure that names the URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from stable_datasets.cli import main
from tests.conftest import TOY_BUILDER

BAD = """
import stable_datasets as sds

class Bad(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"label": sds.ClassLabel(num_classes=2)}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train")]

    def _generate_examples(self):
        yield "k7", {"label": 7}
"""


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli(*argv: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stable_datasets.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, **kwargs)


def test_common_options_before_or_after_the_command(capsys, toy_builder, tmp_path):
    other = tmp_path / "other-root"
    assert run(capsys, "build", str(toy_builder), "--split", "train", "--set", "rows=3", "--cache-dir", str(other),
               "--json")[0] == 0
    for argv in (["ls", "--json", "--cache-dir", str(other)], ["--json", "ls", "--cache-dir", str(other)],
                 ["--cache-dir", str(other), "--json", "ls"], ["--json", "--cache-dir", str(other), "ls", "--json"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0, argv
        assert [(e["name"], e["split"], e["rows"]) for e in json.loads(out)] == [("toy", "train", 3)], argv
    assert json.loads(run(capsys, "ls", "--json")[1]) == []  # the default root is another place


def test_head_closing_the_pipe_is_quiet(cache_root):
    reader = subprocess.Popen([sys.executable, "-m", "stable_datasets.cli", "ls", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    reader.stdout.close()  # like `| head` that has read what it wanted
    _, err = reader.communicate(timeout=120)
    assert (reader.returncode, err.decode()) == (0, "")


def test_verify_and_info_take_what_build_takes(capsys, tmp_path):
    folder = tmp_path / "toy"  # a folder holding toy.py, as `build` takes it
    folder.mkdir()
    script = folder / "toy.py"
    script.write_text(TOY_BUILDER)
    assert run(capsys, "build", str(folder), "--set", "rows=4")[0] == 0
    for target in (str(folder), str(script)):
        code, out, err = run(capsys, "verify", target)
        assert (code, err) == (0, ""), target
        assert sorted(line.split("/")[-1] for line in out.splitlines()) == ["test", "train"]
        code, out, _ = run(capsys, "--json", "info", target)
        assert code == 0 and sorted(item["split"] for item in json.loads(out)) == ["test", "train"]
    code, out, _ = run(capsys, "verify", str(next(tmp_path.rglob("_metadata.json")).parent.parent))
    assert code == 0 and len(out.splitlines()) == 2  # a folder of caches


@pytest.mark.parametrize("argv, message", [
    (["build", "{toy}", "--num-proc", "-3"], "argument --num-proc: expected a positive integer, got '-3'"),
    (["build", "{toy}", "--num-proc", "two"], "argument --num-proc: expected a positive integer, got 'two'"),
    (["build", "{toy}", "--set", "seed"], "argument --set: expected KEY=VALUE, got 'seed'"),
    (["prune", "--max-staging-age", "-1"], "argument --max-staging-age: expected a number of hours >= 0, got '-1'"),
    (["prune", "--max-staging-age", "nan"], "expected a number of hours >= 0, got 'nan'"),
    (["build", "moving_digits", "--config", "typo"],
     "builder 'moving_digits' has no config 'typo'; configs are ['bytes', 'frames', 'path']"),
    (["info", "moving_digits", "--config", "typo"], "builder 'moving_digits' has no config 'typo'"),
    (["build", "{toy}", "--set", "no_such_field=1"], "no_such_field"),
    (["build", "no_such_builder"], "no builder named 'no_such_builder'"),
    (["ls", "--bogus"], "unrecognized arguments: --bogus"),
    (["build", "{toy}", "--split", "nope"], "builder 'toy' has no split 'nope'; splits are ['test', 'train']"),
    (["build", "{toy}", "--split", "train+nope"], "error: builder 'toy' has no split 'nope'"),
    (["build", "{toy}", "--split", "train[:x]"], "cannot parse split 'train[:x]'"),
])
def test_bad_values_are_usage_errors_and_build_nothing(capsys, toy_builder, cache_root, argv, message):
    argv = [a.replace("{toy}", str(toy_builder)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    _, err = capsys.readouterr()
    assert code == 2, err
    assert message in err and "Traceback" not in err and "UsageError" not in err
    assert not list(cache_root.rglob("_metadata.json"))


def test_data_problems_exit_1_with_one_line_and_tracebacks_only_with_debug(write_builder, cache_root):
    bad = str(write_builder("bad", BAD))
    env = {"STABLE_DATASETS_CACHE_DIR": str(cache_root), "LOGURU_LEVEL": "WARNING"}
    out = cli("build", bad, env=env)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == ("stable-datasets: builder 'bad', split 'train', example key 'k7', "
                                                   "field 'label': label 7 is out of range [0, 2)")
    assert "Traceback" not in out.stderr
    debug = cli("build", bad, "--debug", env=env)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ExampleError" in debug.stderr
    missing = cli("verify", "digits", env=env)
    assert (missing.returncode, missing.stderr.strip()) == (1, "stable-datasets: no cache found for 'digits' under "
                                                               f"{cache_root}")


def test_offline_build_fails_fast_naming_the_url(cache_root):
    rewrites = {"https://storage.googleapis.com/": "http://no-such-host.invalid/",
                "https://ossci-datasets.s3.amazonaws.com/": "http://no-such-host.invalid/mirror/"}
    env = {"STABLE_DATASETS_CACHE_DIR": str(cache_root), "STABLE_DATASETS_URL_REWRITES": json.dumps(rewrites),
           "LOGURU_LEVEL": "WARNING"}
    out = cli("build", "mnist", env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("stable-datasets: could not download https://storage.googleapis.com/cvdf-datasets/mnist/")
    assert "http://no-such-host.invalid/cvdf-datasets/mnist/" in last and "cannot reach no-such-host.invalid" in last
    assert "gave up after" not in last  # an unresolvable host is not retried
