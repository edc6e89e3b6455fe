"""`prepare()` resolves a builder's plan once per call: the fingerprint inputs (which stat every input
file) and the layout are computed once, then handed to everything below (split listing, the per-split
cache check, the write plan), cold or warm."""

from __future__ import annotations

from pathlib import Path

import pytest

import stable_datasets as sds
import stable_datasets.builder.builder as builder_module

LINES_BUILDER = """
import stable_datasets as sds

class Lines(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"line": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator(split, {"paths": paths}) for split, paths in self.resolved_data_files().items()]

    def _generate_examples(self, paths):
        for path in paths:
            with open(path) as f:
                for i, line in enumerate(f):
                    yield f"{path}:{i}", {"line": line.rstrip()}
"""


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of the input-identity function, the layout resolution and the builders' split generators."""
    counts = {"identity": 0, "layout": 0, "generators": 0}

    def counting(name: str, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    entries = builder_module.input_entries

    def identity(*args, **kwargs):  # the fingerprint's identity; the re-check after a build (local_only) is apart
        if not kwargs.get("local_only"):
            counts["identity"] += 1
        return entries(*args, **kwargs)

    monkeypatch.setattr(builder_module, "input_entries", identity)
    monkeypatch.setattr(builder_module, "layout_for", counting("layout", builder_module.layout_for))
    original = builder_module.DatasetBuilder._generators
    monkeypatch.setattr(builder_module.DatasetBuilder, "_generators",
                        lambda self, *a, **k: counts.__setitem__("generators", counts["generators"] + 1)
                        or original(self, *a, **k))
    return counts


def _data_files(tmp_path: Path, suffix: str, header: str = "") -> dict[str, str]:
    files = {}
    for split, rows in (("train", ["a", "b", "c"]), ("test", ["d", "e"])):
        path = tmp_path / f"{split}.{suffix}"
        if not path.exists():  # written once: the warm load must find the same files, untouched
            path.write_text(header + "".join(f"{r}\n" for r in rows))
        files[split] = str(path)
    return files


def _load(tmp_path: Path, kind: str, write_builder) -> sds.DatasetDict:
    if kind == "csv":
        return sds.load_dataset("csv", data_files=_data_files(tmp_path, "csv", "line\n"))
    path = write_builder("lines", LINES_BUILDER)
    return sds.load_dataset(str(path), data_files=_data_files(tmp_path, "txt"))


@pytest.mark.parametrize("kind", ["csv", "script"])
def test_cold_and_warm_load_resolve_the_plan_once(tmp_path, write_builder, counted, kind):
    cold = _load(tmp_path, kind, write_builder)
    assert {s: cold[s]["line"] for s in cold} == {"train": ["a", "b", "c"], "test": ["d", "e"]}
    assert counted == {"identity": 1, "layout": 1, "generators": 1}

    counted.update(identity=0, layout=0, generators=0)
    warm = _load(tmp_path, kind, write_builder)
    assert {s: warm[s]["line"] for s in warm} == {"train": ["a", "b", "c"], "test": ["d", "e"]}
    assert [d.cache_dirs for d in warm.values()] == [d.cache_dirs for d in cold.values()]
    assert counted == {"identity": 1, "layout": 1, "generators": 0}  # the split names come from the record


def test_prepare_with_a_split_list_resolves_once(tmp_path, write_builder, counted):
    builder = sds.load_builder(str(write_builder("lines", LINES_BUILDER)), data_files=_data_files(tmp_path, "txt"))
    dirs = builder.prepare(["test", "train"])
    assert list(dirs) == ["test", "train"]
    assert counted == {"identity": 1, "layout": 1, "generators": 1}
    counted.update(identity=0, layout=0, generators=0)
    assert builder.prepare(["test", "train"]) == dirs
    assert builder.is_prepared("train")
    assert counted == {"identity": 2, "layout": 2, "generators": 0}  # prepare once, is_prepared once
