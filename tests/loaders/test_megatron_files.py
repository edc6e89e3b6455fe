"""`load_dataset("megatron_indexed", data_files=prefix)`: Megatron-Core's .bin/.idx pairs served as rows of
documents (megatron-core's own builder writes the inputs), in parallel, streamed with resume, from S3 by ranges,
and damaged pairs refused naming the file and the offset."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import InputChangedError
from stable_datasets.megatron import IndexedDataset, IndexedFormatError

#: documents of several sequences, one of none (Megatron-LM's preprocessing writes those for texts without tokens)
DOCUMENTS = [[[1, 2, 3]], [[4], [5, 6]], [], [[7] * 50], [[8, 9], [10]], [[70_000]]]


@pytest.fixture(scope="module")
def megatron():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset
    return indexed_dataset


def write_with_megatron_core(megatron, prefix: str, documents=DOCUMENTS, dtype=np.int32) -> None:
    builder = megatron.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for doc in documents:
        builder.add_document([t for seq in doc for t in seq], [len(seq) for seq in doc])
    builder.finalize(prefix + ".idx")


def joined(doc):
    return [t for seq in doc for t in seq]


def test_megatron_core_files_load_as_rows_of_documents(tmp_path, megatron):
    write_with_megatron_core(megatron, str(tmp_path / "corpus_text_document"))
    ds = sds.load_dataset("megatron_indexed", data_files=str(tmp_path / "corpus_text_document"), split="train")
    assert ds.features["input_ids"].feature.dtype == "int32"
    assert [row["input_ids"] for row in ds.to_list()] == [joined(d) for d in DOCUMENTS]
    parallel = sds.load_dataset("megatron_indexed", data_files=str(tmp_path / "corpus_text_document.idx"),
                                split="train", num_proc=3, download_mode="force_rebuild")
    assert parallel["input_ids"] == [joined(d) for d in DOCUMENTS]


def test_the_reader_has_megatron_cores_api_and_answers(tmp_path, megatron):
    prefix = str(tmp_path / "c")
    write_with_megatron_core(megatron, prefix)
    ours, theirs = IndexedDataset(prefix), megatron.IndexedDataset(prefix)
    assert len(ours) == len(theirs) == 7
    np.testing.assert_array_equal(ours.sequence_lengths, theirs.sequence_lengths)
    np.testing.assert_array_equal(ours.document_indices, theirs.document_indices)
    for i in range(len(ours)):
        np.testing.assert_array_equal(ours[i], theirs[i])
    assert [a.tolist() for a in ours[1:4]] == [a.tolist() for a in theirs[1:4]]
    np.testing.assert_array_equal(ours.get(3, offset=10, length=5), theirs.get(3, offset=10, length=5))
    assert ours.sequence_modes is None


def test_a_stream_resumes_where_it_stopped_and_mixes(tmp_path, megatron):
    write_with_megatron_core(megatron, str(tmp_path / "a"))
    stream = sds.load_dataset("megatron_indexed", data_files=str(tmp_path / "a"), split="train", streaming=True)
    it = iter(stream)
    first = [next(it)["input_ids"] for _ in range(2)]
    state = json.loads(json.dumps(stream.state_dict()))
    again = sds.load_dataset("megatron_indexed", data_files=str(tmp_path / "a"), split="train", streaming=True)
    again.load_state_dict(state)
    assert first + [r["input_ids"] for r in again] == [joined(d) for d in DOCUMENTS]
    other = sds.StableDataset.from_dict({"input_ids": [[100], [101]]}, cache_dir=tmp_path / "other")
    cached = sds.load_dataset("megatron_indexed", data_files=str(tmp_path / "a"), split="train")
    mixed = sds.interleave_datasets([cached.cast_column("input_ids", other.features["input_ids"]), other])
    assert [r["input_ids"] for r in mixed][:4] == [[1, 2, 3], [100], [4, 5, 6], [101]]


def test_an_object_store_pair_is_read_by_ranges(tmp_path, megatron, s3_env, s3_requests):
    prefix = str(tmp_path / "corpus")
    write_with_megatron_core(megatron, prefix)
    for suffix in (".bin", ".idx"):
        s3_env.write(f"tokens/corpus{suffix}", (tmp_path / f"corpus{suffix}").read_bytes())
    url = f"s3://{s3_env.bucket}/tokens/corpus"
    mark = s3_requests.mark()
    remote = IndexedDataset(url)
    assert remote.get(3, offset=10, length=5).tolist() == [7] * 5
    got = [r for r in s3_requests.since(mark) if r.kind == "GET" and r.key.endswith(".bin")]
    assert [r.sent for r in got] == [5 * 4]  # one ranged GET of 5 int32 tokens, not the file
    assert [remote[i].tolist() for i in range(len(remote))] == [s for d in DOCUMENTS for s in d]
    ds = sds.load_dataset("megatron_indexed", data_files=url, split="train", cache_dir=str(tmp_path / "cache"))
    assert ds["input_ids"] == [joined(d) for d in DOCUMENTS]


def test_a_truncated_remote_bin_is_refused_naming_it(tmp_path, megatron, s3_env):
    write_with_megatron_core(megatron, str(tmp_path / "c"))
    s3_env.write("t/c.idx", (tmp_path / "c.idx").read_bytes())
    s3_env.write("t/c.bin", (tmp_path / "c.bin").read_bytes()[:-4])
    with pytest.raises(IndexedFormatError, match=rf"s3://{s3_env.bucket}/t/c\.bin: \d+ bytes, but .* places its 7 "):
        IndexedDataset(f"s3://{s3_env.bucket}/t/c")


@pytest.mark.parametrize("where, message", [
    ("length", r"c\.idx: sequence 1's pointer 12 \(offset \d+\) does not follow"),  # a flipped length byte
    ("pointer", r"c\.idx: sequence 2's pointer \d+ \(offset \d+\) does not follow"),
    ("document", r"c\.idx: document indices must rise from 0 to 7"),
    ("truncated", r"c\.idx: \d+ bytes, but its header \(7 sequences, 7 document indices\) needs \d+"),
])
def test_flipped_or_truncated_index_bytes_are_an_error_naming_file_and_offset(tmp_path, megatron, where, message):
    write_with_megatron_core(megatron, str(tmp_path / "c"))
    data = bytearray((tmp_path / "c.idx").read_bytes())
    header, sequences = 34, 7
    if where == "length":
        data[header] ^= 0x01  # sequence 0: 3 tokens -> 2
    elif where == "pointer":
        data[header + 4 * sequences + 8 * 2] ^= 0x10
    elif where == "document":
        data[header + 12 * sequences + 8 * 3] ^= 0x08
    else:
        data = data[:-5]
    (tmp_path / "c.idx").write_bytes(bytes(data))
    with pytest.raises(IndexedFormatError, match=message):
        IndexedDataset(tmp_path / "c")
    with pytest.raises(IndexedFormatError, match=message):
        sds.load_dataset("megatron_indexed", data_files=str(tmp_path / "c"), split="train")


def test_an_object_changed_while_open_is_an_error_not_a_mix(tmp_path, megatron, s3_env):
    """docs/megatron.md: reads keep the version the pair had when it opened; a replaced `.bin` is refused."""
    write_with_megatron_core(megatron, str(tmp_path / "c"))
    for suffix in (".bin", ".idx"):
        s3_env.write(f"t/c{suffix}", (tmp_path / f"c{suffix}").read_bytes())
    remote = IndexedDataset(f"s3://{s3_env.bucket}/t/c")
    assert remote[0].tolist() == DOCUMENTS[0][0]
    data = bytearray((tmp_path / "c.bin").read_bytes())
    data[:4] = np.array([99], np.int32).tobytes()
    s3_env.write("t/c.bin", bytes(data))  # same size, new content: a new version
    with pytest.raises(InputChangedError, match=rf"s3://{s3_env.bucket}/t/c\.bin changed since"):
        remote[0]
