"""Every bundled builder and generic loader, built from relative paths: `ls` recomputes the fingerprint that
`load_dataset` used, so the cache is `current` right after its build and `prune` keeps it (issue 36, item 14:
`ls` called the bundled `sft` builder's cache `stale` and `prune` removed it)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stable_datasets as sds
from stable_datasets.cli import main
from stable_datasets.sft import PackingConfig
from tests.fixtures.tars import write_tar

CHATS = [{"messages": [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]}
         for i in range(6)]


def _png(value: int) -> bytes:
    return cv2.imencode(".png", np.full((4, 4, 3), value, np.uint8))[1].tobytes()


def _video(path: Path) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 5, (16, 16), True)
    for i in range(3):
        writer.write(np.full((16, 16, 3), 40 * i, np.uint8))
    writer.release()


def _files(kind: str) -> dict:
    """Write the inputs for `kind` under the current folder; the load_dataset arguments, all paths relative."""
    data = Path("data")
    data.mkdir()
    if kind in ("sft", "sft_packed"):
        (data / "chat.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHATS))
        packing = {"packing": PackingConfig(pack_size=64)} if kind == "sft_packed" else {}
        return {"path": "sft", "data_files": "data/chat.jsonl", **packing}
    if kind == "interleaved":
        from tests.fixtures.mint_shards import write_mint_shards

        write_mint_shards(data, num_samples=6, samples_per_shard=3)
        return {"path": "interleaved", "data_files": "data/*.tar"}
    if kind == "csv":
        (data / "a.csv").write_text("x,y\n1,a\n2,b\n")
        return {"path": "csv", "data_files": "data/a.csv"}
    if kind == "json":
        (data / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
        return {"path": "json", "data_files": ["data/a.jsonl"]}
    if kind == "text":
        (data / "a.txt").write_text("one\ntwo\n")
        return {"path": "text", "data_files": {"train": "data/a.txt"}}
    if kind in ("parquet", "arrow"):
        table = pa.table({"x": [1, 2, 3]})
        if kind == "parquet":
            pq.write_table(table, data / "a.parquet")
        else:
            with pa.ipc.new_stream(data / "a.arrow", table.schema) as writer:
                writer.write_table(table)
        return {"path": kind, "data_files": f"data/a.{kind}"}
    if kind == "imagefolder":
        for label, value in (("cat", 10), ("dog", 200)):
            (data / label).mkdir()
            (data / label / "0.png").write_bytes(_png(value))
        return {"path": "imagefolder", "data_dir": "data"}
    if kind == "videofolder":
        (data / "clips").mkdir()
        _video(data / "clips" / "a.mp4")
        return {"path": "videofolder", "data_dir": "data"}
    if kind == "webdataset":
        write_tar(data / "shard-0.tar", {"a.txt": b"hello", "a.cls": b"1", "b.txt": b"world", "b.cls": b"0"})
        return {"path": "webdataset", "data_files": "data/*.tar"}
    if kind == "megatron_indexed":
        from stable_datasets.megatron import write_indexed_dataset

        write_indexed_dataset([[1, 2], [3]], data / "corpus_text_document")
        return {"path": "megatron_indexed", "data_files": "data/corpus_text_document"}
    if kind == "moving_digits":
        return {"path": "moving_digits", "name": "path", "train_videos": 2, "test_videos": 1, "num_frames": 3,
                "canvas": 32}
    return {"path": kind}


@pytest.mark.parametrize("kind", ["digits", "moving_digits", "sft", "sft_packed", "interleaved", "csv", "json",
                                  "text", "parquet", "arrow", "imagefolder", "videofolder", "webdataset",
                                  "megatron_indexed"])
def test_a_cache_built_from_relative_paths_is_current_and_prune_keeps_it(kind, tmp_path, monkeypatch, capsys,
                                                                         cache_root):
    monkeypatch.chdir(tmp_path)
    arguments = _files(kind)
    ds = sds.load_dataset(split="train", **arguments)
    rows = ds.to_list()
    folder = ds.cache_dirs[0].parent
    del ds
    assert main(["--json", "ls"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["name"], e["split"], e["status"]) for e in listed if e["split"] == "train"] == \
        [(listed[0]["name"], "train", "current")]
    assert main(["prune"]) == 0
    assert "removed" not in capsys.readouterr().out
    assert folder.is_symlink() or folder.exists()
    monkeypatch.chdir(cache_root.parent)  # from elsewhere, with absolute paths: the same cache
    absolute = {k: (str(tmp_path / v) if k in ("data_files", "data_dir") and isinstance(v, str) else v)
                for k, v in arguments.items()}
    again = sds.load_dataset(split="train", **absolute)
    assert again.cache_dirs[0].parent == folder and again.to_list() == rows
