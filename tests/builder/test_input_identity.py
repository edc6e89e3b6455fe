"""Inputs are checked again after the build read them: a file written to meanwhile publishes nothing."""

from __future__ import annotations

import json
import os

import pytest

import stable_datasets as sds
from stable_datasets.errors import InputChangedError

# Reads a JSON Lines file; at line EDIT_AT it rewrites the file (same size, other records), as a writer racing
# with the build would: the rows after that come from the new version.
EDITING_BUILDER = """
import json, os
import stable_datasets as sds
from stable_datasets.builder.data_files import normalize_data_files

class Chat(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"text": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        splits = normalize_data_files(self.config.data_files, "chat")
        return [sds.SplitGenerator(s, {"paths": p}) for s, p in splits.items()]

    def _generate_examples(self, paths):
        edit_at = int(os.environ.get("EDIT_AT", "-1"))
        for path in paths:
            for number in range(10):
                with open(path) as fh:
                    line = fh.read().splitlines()[number]
                if number == edit_at:
                    with open(path, "w") as fh:
                        fh.write(os.environ["EDIT_TO"])
                yield f"{path}:{number}", json.loads(line)
"""


def _records(start: int) -> str:
    return "".join(json.dumps({"text": f"record {i}"}) + "\n" for i in range(start, start + 10))


@pytest.mark.parametrize("mode", ["sha256", "stat"])
def test_an_input_edited_while_the_build_reads_it_fails_naming_it_and_publishes_nothing(
        write_builder, tmp_path, monkeypatch, cache_root, mode):
    script = str(write_builder("chat", EDITING_BUILDER))
    data = tmp_path / "chat.jsonl"
    data.write_text(_records(0))
    old = data.stat()
    monkeypatch.setenv("EDIT_AT", "4")
    monkeypatch.setenv("EDIT_TO", _records(50))  # same size: only the content (and ctime) changes
    with pytest.raises(InputChangedError, match=rf"^builder 'chat': data file {data} changed \(size and "
                                               rf"{'content' if mode == 'sha256' else 'mtime'} .* while the build "
                                               r"read it; nothing was published\. Run again once the file is no "
                                               r"longer being written$"):
        sds.load_dataset(script, split="train", data_files=str(data), input_identity=mode)
    assert not [p for p in cache_root.rglob("_metadata.json")]
    monkeypatch.delenv("EDIT_AT")
    data.write_text(_records(0))  # the old file is back: its rows are built whole, not the half-edited ones
    os.utime(data, ns=(old.st_atime_ns, old.st_mtime_ns))
    ds = sds.load_dataset(script, split="train", data_files=str(data), input_identity=mode)
    assert ds["text"] == [f"record {i}" for i in range(10)]


def test_files_identity_still_imports_from_where_the_docs_named_it_first():
    """Builder scripts written when the docs named builder.input_identity keep building (it moved to identity/)."""
    from stable_datasets.builder.input_identity import files_identity as before
    from stable_datasets.identity.inputs import files_identity

    assert before is files_identity
