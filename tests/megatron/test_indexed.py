"""Megatron-Core's indexed format: ours writes what Megatron-Core's own IndexedDataset reads token for token, reads
what Megatron-Core's own builder writes, and refuses damaged files naming the file and the offset."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.megatron import IndexedDataset, IndexedFormatError, write_indexed_dataset
from stable_datasets.megatron.indexed import IndexedWriter, fit_tokens, index_bytes


@pytest.fixture(scope="module")
def megatron():
    """Megatron-Core's own reader and writer: the oracle (imported once: it imports much of Megatron-Core)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset
    return indexed_dataset


DOCS = [[5, 1, 2], [], [65_498, 0], [7] * 1000, [3]]


def test_megatron_core_reads_what_we_write(tmp_path, megatron):
    prefix = tmp_path / "ours"
    ours = write_indexed_dataset(DOCS, prefix)
    theirs = megatron.IndexedDataset(str(prefix))
    assert ours.dtype == np.uint16 and theirs.index.dtype == np.uint16  # every id below 65,500
    assert len(theirs) == len(DOCS)
    for i, doc in enumerate(DOCS):
        np.testing.assert_array_equal(theirs[i], np.asarray(doc, dtype=np.uint16))
        np.testing.assert_array_equal(ours[i], theirs[i])
    np.testing.assert_array_equal(theirs.sequence_lengths, [len(d) for d in DOCS])
    np.testing.assert_array_equal(theirs.document_indices, np.arange(len(DOCS) + 1))
    np.testing.assert_array_equal(theirs.get(3, offset=10, length=5), [7] * 5)


def test_we_read_what_megatron_core_writes_byte_for_byte(tmp_path, megatron):
    prefix = str(tmp_path / "theirs")
    builder = megatron.IndexedDatasetBuilder(prefix + ".bin", dtype=np.int32)
    for doc in ([1, 2, 3], [70_000], [4, 5]):
        builder.add_item(__import__("torch").tensor(doc, dtype=torch_int64()))
        builder.end_document()
    builder.finalize(prefix + ".idx")
    ours = IndexedDataset(prefix)
    assert ours.dtype == np.int32 and [ours[i].tolist() for i in range(3)] == [[1, 2, 3], [70_000], [4, 5]]
    write_indexed_dataset([[1, 2, 3], [70_000], [4, 5]], tmp_path / "again")
    assert (tmp_path / "again.idx").read_bytes() == (tmp_path / "theirs.idx").read_bytes()
    assert (tmp_path / "again.bin").read_bytes() == (tmp_path / "theirs.bin").read_bytes()


def torch_int64():
    import torch

    return torch.int64


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**31 - 1), max_size=20), max_size=30))
def test_any_documents_round_trip(tmp_path_factory, docs):
    prefix = tmp_path_factory.mktemp("rt") / "docs"
    ours = write_indexed_dataset(docs, prefix)
    assert [ours[i].tolist() for i in range(len(ours))] == docs
    assert ours.dtype == (np.uint16 if max((max(d) for d in docs if d), default=0) < 65_499 else np.int32)
    assert ours.document_count == len(docs)


def test_a_dataset_column_is_written_a_batch_at_a_time_and_reused(tmp_path):
    import stable_datasets as sds

    ds = sds.StableDataset.from_dict({"input_ids": [[1, 2], [3], [4, 5, 6]], "text": ["a", "b", "c"]},
                                     cache_dir=tmp_path / "cache")
    out = write_indexed_dataset(ds, tmp_path / "tokens", append_eod=0)
    assert [out[i].tolist() for i in range(3)] == [[1, 2, 0], [3, 0], [4, 5, 6, 0]]
    before = (tmp_path / "tokens.bin").stat().st_mtime_ns
    write_indexed_dataset(ds, tmp_path / "tokens", append_eod=0)  # the same inputs: a cache hit, nothing written
    assert (tmp_path / "tokens.bin").stat().st_mtime_ns == before
    wide = write_indexed_dataset(ds, tmp_path / "tokens", append_eod=0, dtype=np.int64)
    assert wide.dtype == np.int64 and wide[2].tolist() == [4, 5, 6, 0]


def test_ids_that_do_not_fit_are_refused_and_nothing_is_left(tmp_path):
    with pytest.raises(ValueError, match=r"document 1: token ids \[0, 70000\] do not fit uint16"):
        write_indexed_dataset([[1], [0, 70_000]], tmp_path / "x", dtype=np.uint16)
    assert list(tmp_path.iterdir()) == []


def test_blocks_of_ids_are_fitted_to_the_dtype_and_read_only_blocks_are_written_as_they_are(tmp_path):
    """`add_block` as the Ray engine's driver calls it, with arrays Ray hands back read-only (zero-copy)."""
    with pytest.raises(ValueError, match=r"token ids \[3, 70000\] do not fit uint16"):
        fit_tokens(np.array([3, 70_000]), np.uint16)
    assert fit_tokens(np.array([3, 65_535]), np.uint16).dtype == np.uint16
    block = np.array([5, 6, 7, 8], np.uint16)
    block.flags.writeable = False
    writer = IndexedWriter(tmp_path / "x", np.uint16)
    writer.add_block(block, np.array([2, 2]), np.array([1, 0, 1]))
    writer.add_block(np.array([9], np.int64), np.array([1]))
    writer.commit()
    out = IndexedDataset(tmp_path / "x")
    assert [out[i].tolist() for i in range(3)] == [[5, 6], [7, 8], [9]]
    assert out.document_indices.tolist() == [0, 1, 1, 2, 3]
    assert (tmp_path / "x.bin").read_bytes() == np.array([5, 6, 7, 8, 9], np.uint16).tobytes()


@pytest.mark.parametrize("damage, message", [
    (lambda idx, bin_: (idx[:-3], bin_), r"x\.idx: \d+ bytes, but its header"),
    (lambda idx, bin_: (idx, bin_[:-2]), r"x\.bin: \d+ bytes, but .*x\.idx places its 3 sequences in 12"),
    (lambda idx, bin_: (b"XXIDIDX\x00\x00" + idx[9:], bin_), r"not a Megatron indexed dataset index"),
    (lambda idx, bin_: (idx[:9] + b"\x02" + idx[10:], bin_), r"index version 2 at offset 9"),
    (lambda idx, bin_: (idx[:17] + b"\x09" + idx[18:], bin_), r"unknown dtype code 9 at offset 17"),
])
def test_damaged_files_are_refused_naming_file_and_offset(tmp_path, damage, message):
    write_indexed_dataset([[1, 2], [3, 4, 5], [6]], tmp_path / "x", dtype=np.int16)
    idx, bin_ = damage((tmp_path / "x.idx").read_bytes(), (tmp_path / "x.bin").read_bytes())
    (tmp_path / "x.idx").write_bytes(idx)
    (tmp_path / "x.bin").write_bytes(bin_)
    with pytest.raises(IndexedFormatError, match=message):
        IndexedDataset(tmp_path / "x")


def test_a_pointer_past_the_sequence_before_is_refused(tmp_path):
    data = bytearray(index_bytes(np.array([2, 2]), np.array([0, 1, 2]), np.int16))
    second_pointer = 34 + 2 * 4 + 8  # the fixed header, two lengths, the first pointer
    data[second_pointer:second_pointer + 8] = (6).to_bytes(8, "little")  # 4 -> 6
    (tmp_path / "p.idx").write_bytes(bytes(data))
    (tmp_path / "p.bin").write_bytes(b"\x00" * 8)
    with pytest.raises(IndexedFormatError, match=r"sequence 1's pointer 6 \(offset 50\) does not follow"):
        IndexedDataset(tmp_path / "p")


def test_flipped_bytes_in_a_subprocess_never_crash(tmp_path):
    """Any byte of the index flipped: either our clear error, or the same tokens (a byte that carries nothing)."""
    write_indexed_dataset([[1, 2], [3, 4, 5], [6]], tmp_path / "x", dtype=np.int16)
    code = ("import json, sys; from stable_datasets.megatron import IndexedDataset, IndexedFormatError\n"
            "from pathlib import Path\n"
            "p = Path(sys.argv[1]); good = p.with_suffix('.idx').read_bytes(); out = []\n"
            "for i in range(len(good)):\n"
            "    data = bytearray(good); data[i] ^= 0xFF; p.with_suffix('.idx').write_bytes(bytes(data))\n"
            "    try:\n"
            "        ds = IndexedDataset(p); out.append([ds[j].tolist() for j in range(len(ds))])\n"
            "    except IndexedFormatError:\n"
            "        out.append('refused')\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = json.loads(done.stdout)
    assert set(map(str, outcomes)) <= {"refused", str([[1, 2], [3, 4, 5], [6]])}
    assert outcomes.count("refused") >= len(outcomes) - 8  # only the header's unused bytes may change nothing


def test_a_pickled_reader_carries_its_path_and_maps_the_files_itself(tmp_path):
    """docs/megatron.md: a pickled IndexedDataset (a DataLoader worker's copy) is its path, not its mapped bytes."""
    import pickle

    write_indexed_dataset([[1, 2, 3], [4, 5]], tmp_path / "p")
    ds = IndexedDataset(tmp_path / "p")
    data = pickle.dumps(ds)
    assert len(data) < 400 and str(tmp_path / "p").encode() in data
    again = pickle.loads(data)
    assert [again[i].tolist() for i in range(2)] == [[1, 2, 3], [4, 5]] and again.dtype == np.uint16
