"""The cold-build path of the tabular loaders: what it skips must not change what it checks."""

from __future__ import annotations

import hashlib
import os

import stable_datasets as sds
from stable_datasets.cache import hashing
from stable_datasets.loaders.csv_files import CsvLoader


def test_file_hasher_digest_matches_the_file_written_in_steps(tmp_path):
    path = tmp_path / "shard.bin"
    chunk = os.urandom(hashing._WRITEBACK_STEP // 3 + 17)
    with open(path, "wb") as fh:
        hasher = hashing.FileHasher(path)
        written = 0
        for _ in range(10):  # past the writeback step several times, not on its boundary
            fh.write(chunk)
            fh.flush()
            written += len(chunk)
            hasher.advance(written)
        fh.write(b"tail")
    assert hasher.finish() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_features_are_inferred_once_per_build_and_again_when_the_file_changes(tmp_path, monkeypatch):
    data = tmp_path / "a.csv"
    data.write_text("x,y\n1,a\n2,b\n")
    calls = []
    original = CsvLoader.infer_features

    def counting(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(CsvLoader, "infer_features", counting)
    ds = sds.load_dataset("csv", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.to_dict() == {"x": [1, 2], "y": ["a", "b"]}
    assert len(calls) == 1
    data.write_text("x,y\n1.5,a\n2,b\n3,c\n")  # another size: the first file is not the one inferred from
    ds = sds.load_dataset("csv", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.to_dict() == {"x": [1.5, 2.0, 3.0], "y": ["a", "b", "c"]}
    assert len(calls) == 2
