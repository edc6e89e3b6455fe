"""stable-datasets' loguru messages reach the standard logging module when asked, and obey its levels."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import io, logging, os, sys
    stream = io.StringIO()
    logging.basicConfig(level=logging.INFO, stream=stream, format="%(name)s|%(levelname)s|%(message)s")
    import stable_datasets as sds
    if not os.environ.get("STABLE_DATASETS_LOGGING"):
        sds.use_standard_logging()
    logging.getLogger("stable_datasets").setLevel(logging.WARNING)   # quiet: no progress notes
    sds.StableDataset.from_dict({"x": [1, 2]})
    quiet = stream.getvalue()
    logging.getLogger("stable_datasets").setLevel(logging.INFO)
    sds.StableDataset.from_dict({"x": [1, 2, 3]})
    info = stream.getvalue()
    logging.getLogger("stable_datasets").setLevel(5)  # loguru's TRACE
    sds.StableDataset.from_dict({"x": [1, 2, 3, 4]})
    print(repr(quiet))
    print(repr(stream.getvalue()[len(info):]))
    print(info, end="")
""")


def _run(tmp_path, **env):
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache"), **env},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


def test_logging_levels_decide_and_loguru_stderr_stays_quiet(tmp_path):
    lines, stderr = _run(tmp_path)
    assert lines[0] == "''"  # WARNING level: the INFO notes of the first build were dropped
    info = lines[2:]
    assert [line.split("|")[:2] for line in info] == [["stable_datasets.write.split", "INFO"]] * 2
    # INFO names what was built, without the absolute cache path (before: "... into /root/.cache/...")
    assert [line.split("|")[2] for line in info] == ["building in_memory [from_dict] split 'train'",
                                                      "published 3 rows of in_memory 'train'"]
    asked = eval(lines[1])  # at TRACE, when asked: where it went
    assert f"|building in_memory 'train' into {tmp_path / 'cache'}/in_memory/" in asked
    assert f"|published in_memory 'train' to {tmp_path / 'cache'}/in_memory/" in asked
    assert "stable_datasets" not in stderr  # loguru's own stderr sink no longer prints them


def test_the_environment_switch_does_the_same(tmp_path):
    lines, stderr = _run(tmp_path, STABLE_DATASETS_LOGGING="standard")
    assert lines[0] == "''" and len(lines) == 4 and "stable_datasets" not in stderr


def test_back_to_loguru():
    from loguru import logger

    from stable_datasets.logs import use_standard_logging

    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(m.record["message"]), level="INFO")
    logger.enable("stable_datasets")
    try:
        use_standard_logging()
        use_standard_logging(False)
        logger.patch(lambda r: r.update(name="stable_datasets.test")).info("hello")
        assert messages == ["hello"]
    finally:
        logger.remove(sink)
        logger.disable("stable_datasets")


def test_a_build_says_no_absolute_path_at_loguru_default_level(tmp_path):
    """loguru's own stderr sink (DEBUG by default): the build lines, without the cache's absolute path."""
    script = "import stable_datasets as sds\nsds.StableDataset.from_dict({'x': [1]})\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache")}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line.split(" - ", 1)[1] for line in done.stderr.splitlines()] == [
        "building in_memory [from_dict] split 'train'", "published 1 rows of in_memory 'train'"]
