"""`load_dataset(..., streaming=True)` on a bucket reads a shard at a time: shards are downloaded as the
stream reaches them, the local shard cache stays within STABLE_DATASETS_LOCAL_CACHE_LIMIT, and a
damaged remote shard is an error (moto on 127.0.0.1)."""

from __future__ import annotations

import random

import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError
from stable_datasets.storage.remote_stream import RemoteShards
from stable_datasets.streaming import StreamingDataset
from tests.resume import ids, stop_and_resume

pytest.importorskip("boto3")
torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402

ROWS = 4000
BLOB = 1000


class Wide(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"idx": sds.Value("int64"), "blob": sds.Value("binary")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {})]

    def _generate_examples(self):
        for i in range(ROWS):
            yield i, {"idx": i, "blob": random.Random(i).randbytes(BLOB)}  # incompressible: Parquet shards of 1 MB


def local_shard_bytes(env) -> int:
    return sum(p.stat().st_size for p in (env.local / "shards").rglob("shard-*") if p.is_file())


def publish(s3_env, storage_format):
    """The split published to the bucket in 4 shards of about 1 MB; the local node starts empty."""
    options = {"max_shard_size": 1_000_000} if storage_format == "arrow" else {"max_shard_size": 1_000_000,
                                                                              "row_group_rows": 250}
    ds = sds.load_dataset(Wide, split="train", storage_format=storage_format, layout_options=options)
    shards = ds.cache_metadata[0].shards
    assert len(shards) >= 4
    del ds
    return shards


@pytest.mark.parametrize("storage_format", ["arrow", "parquet"])
def test_streaming_downloads_shards_as_it_reaches_them_within_the_limit(s3_env, storage_format, monkeypatch,
                                                                        tmp_path):
    shards = publish(s3_env, storage_format)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    s3_env.local = tmp_path / "fresh-node"
    biggest = max(s.num_bytes for s in shards)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_LIMIT", str(int(biggest * 1.5)))
    stream = sds.load_dataset(Wide, split="train", storage_format=storage_format, streaming=True,
                              layout_options={"max_shard_size": 1_000_000, **(
                                  {"row_group_rows": 250} if storage_format == "parquet" else {})})
    assert isinstance(stream, StreamingDataset) and isinstance(stream.dataset.backends[0], RemoteShards)
    assert local_shard_bytes(s3_env) == 0  # opening the stream downloads nothing
    held, seen = [], []
    for row in stream:
        seen.append(row["idx"])
        if len(seen) == 1:  # rows are read 1,024 at a time: the first read reaches into the second shard
            assert stream.dataset.backends[0].downloads == 2 and local_shard_bytes(s3_env) <= int(biggest * 1.5)
        if len(seen) % 500 == 0:
            held.append(local_shard_bytes(s3_env))
    assert seen == list(range(ROWS))
    assert max(held) <= int(biggest * 1.5)  # never the whole split
    assert sum(s.num_bytes for s in shards) > int(biggest * 1.5)
    assert stream.dataset.backends[0].downloads == len(shards)


def test_a_remote_stream_shuffles_and_resumes_through_workers(s3_env, monkeypatch, tmp_path):
    publish(s3_env, "arrow")
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))

    def stream():
        return sds.load_dataset(Wide, split="train", streaming=True, layout_options={"max_shard_size": 1_000_000}
                                ).shuffle(seed=2, window_blocks=2)

    full = ids(StreamingDataLoader(stream(), batch_size=100, num_workers=2))
    assert sorted(full) == list(range(ROWS)) and full != list(range(ROWS))
    head, rest, _ = stop_and_resume(stream, stop_after=7, batch_size=100)
    assert head + rest == full


def test_a_changed_remote_shard_is_an_error_when_the_stream_reaches_it(s3_env, monkeypatch, tmp_path):
    shards = publish(s3_env, "arrow")
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    stream = sds.load_dataset(Wide, split="train", streaming=True, layout_options={"max_shard_size": 1_000_000})
    source = stream.dataset.backends[0]
    key = f"{source.split.key(source.metadata.attempt)}/{shards[-1].path}"
    data = bytearray(s3_env.read(key))
    data[len(data) // 2] ^= 0xFF
    s3_env.write(key, bytes(data))
    served = []
    with pytest.raises(CacheError, match=rf"{shards[-1].path}: shard changed since it was published"):
        for row in stream:
            served.append(row["idx"])
    last_start = sum(s.num_rows for s in shards[:-1])
    assert 0 < len(served) < last_start and served == list(range(len(served)))  # good rows, then the error


@pytest.mark.parametrize("storage_format", ["arrow", "parquet"])
def test_a_partial_split_streams_only_the_shards_covering_it(s3_env, monkeypatch, tmp_path, storage_format):
    shards = publish(s3_env, storage_format)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    s3_env.local = tmp_path / "fresh-node"
    options = {"max_shard_size": 1_000_000, **({"row_group_rows": 250} if storage_format == "parquet" else {})}
    stream = sds.load_dataset(Wide, split="train[30%:60%]", storage_format=storage_format, streaming=True,
                              layout_options=options)
    assert isinstance(stream.dataset.backends[0], RemoteShards) and len(stream) == 1200
    assert [row["idx"] for row in stream] == list(range(1200, 2400))
    starts = [sum(s.num_rows for s in shards[:k]) for k in range(len(shards) + 1)]
    covering = [k for k in range(len(shards)) if starts[k] < 2400 and starts[k + 1] > 1200]
    assert stream.dataset.backends[0].downloads == len(covering) < len(shards)
    assert local_shard_bytes(s3_env) == sum(shards[k].num_bytes for k in covering)
    shuffled = [row["idx"] for row in stream.shuffle(seed=5)]
    assert sorted(shuffled) == list(range(1200, 2400)) and shuffled != list(range(1200, 2400))
    again = sds.load_dataset(Wide, split="train[30%:60%]", storage_format=storage_format, streaming=True,
                             layout_options=options).shuffle(seed=5)
    assert [row["idx"] for row in again] == shuffled  # seeded: the same order on every node


@pytest.fixture
def served_bytes(monkeypatch):
    """(object key, bytes) of every GET the moto server answers in this test (ranged GETs count their range)."""
    from moto.s3 import responses

    served = []
    original = responses.S3Response.get_object

    def counting(self):
        status, headers, body = original(self)
        size = len(body) if body is not None else 0
        if self.headers.get("Range"):
            first, last = self.headers["Range"].split("=", 1)[1].split("-")
            size = min(int(last) + 1 if last else size, size) - int(first)
        served.append((self.path, size))
        return status, headers, body

    monkeypatch.setattr(responses.S3Response, "get_object", counting)
    return served


def publish_lance(s3_env, monkeypatch, tmp_path):
    """The split published as Lance in 4 fragments (data files) of 1,000 rows; then a fresh local node."""
    ds = sds.load_dataset(Wide, split="train", storage_format="lance", layout_options=LANCE_OPTIONS)
    metadata = ds.cache_metadata[0]
    files = {s.path: s for s in metadata.shards}
    data_files = [files[f"data.lance/data/{name}"] for name in metadata.extra["fragment_files"]]
    assert [f.num_rows for f in data_files] == [1000] * 4
    del ds
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    s3_env.local = tmp_path / "fresh-node"
    return data_files


LANCE_OPTIONS = {"max_rows_per_file": 1000}


@pytest.mark.parametrize("split", ["train[25%:50%]", "train[30%:60%]", "train"])
def test_a_remote_lance_stream_downloads_each_data_file_it_reaches_whole(s3_env, monkeypatch, tmp_path,
                                                                          served_bytes, split):
    data_files = publish_lance(s3_env, monkeypatch, tmp_path)
    served_bytes.clear()
    stream = sds.load_dataset(Wide, split=split, storage_format="lance", streaming=True, layout_options=LANCE_OPTIONS)
    assert isinstance(stream.dataset.backends[0], RemoteShards)
    assert not [key for key, _ in served_bytes if "/data.lance/" in key]  # opening the stream reads no Lance file
    rows = [(row["idx"], row["blob"]) for row in stream]
    expected = {"train": range(ROWS), "train[25%:50%]": range(1000, 2000), "train[30%:60%]": range(1200, 2400)}[split]
    assert [i for i, _ in rows] == list(expected)
    assert all(blob == random.Random(i).randbytes(BLOB) for i, blob in rows)
    data = [(key.rsplit("/", 1)[-1], size) for key, size in served_bytes if "/data.lance/data/" in key]
    reached = [f for k, f in enumerate(data_files) if k * 1000 < expected.stop and (k + 1) * 1000 > expected.start]
    # one GET per data file the rows reach, each the whole file; no ranged reads
    assert sorted(data) == sorted((f.path.rsplit("/", 1)[-1], f.num_bytes) for f in reached)
    assert stream.dataset.backends[0].downloads == len(reached)
    manifests = [key for key, _ in served_bytes if "/data.lance/" in key and "/data.lance/data/" not in key]
    assert 1 <= len(manifests) <= 3  # the dataset's own small files, once


def test_a_remote_lance_stream_keeps_the_order_of_the_local_cache_and_resumes(s3_env, monkeypatch, tmp_path):
    """Blocks, shards (fragments) and so every order are those of the same Lance cache opened locally."""
    publish_lance(s3_env, monkeypatch, tmp_path)
    local = sds.load_dataset(Wide, split="train", storage_format="lance", layout_options=LANCE_OPTIONS,
                             cache_dir=tmp_path / "local-cache")

    def remote():
        return sds.load_dataset(Wide, split="train", storage_format="lance", streaming=True,
                                layout_options=LANCE_OPTIONS)

    for shuffle in ({"seed": 3}, {"seed": 3, "window_blocks": 2, "window_shards": 2}):
        expected = [row["idx"] for row in local.to_iterable().shuffle(**shuffle)]
        assert sorted(expected) == list(range(ROWS)) and expected != list(range(ROWS))
        assert [row["idx"] for row in remote().shuffle(**shuffle)] == expected
        ranks = [[row["idx"] for row in StreamingDataset(remote().dataset, rank=r, world_size=2).shuffle(**shuffle)]
                 for r in range(2)]
        assert ranks[0] == expected[0::2] and ranks[1] == expected[1::2]  # the ranks stripe the same order

    def stream():
        return remote().shuffle(seed=2, window_blocks=2, window_shards=2)

    full = ids(StreamingDataLoader(stream(), batch_size=100, num_workers=2))
    assert sorted(full) == list(range(ROWS)) and full != list(range(ROWS))
    head, rest, _ = stop_and_resume(stream, stop_after=7, batch_size=100)
    assert head + rest == full


def test_a_changed_remote_lance_data_file_is_an_error_when_the_stream_reaches_it(s3_env, monkeypatch, tmp_path):
    data_files = publish_lance(s3_env, monkeypatch, tmp_path)
    stream = sds.load_dataset(Wide, split="train", storage_format="lance", streaming=True,
                              layout_options=LANCE_OPTIONS)
    source = stream.dataset.backends[0]
    key = f"{source.split.key(source.metadata.attempt)}/{data_files[2].path}"
    data = bytearray(s3_env.read(key))
    data[len(data) // 3] ^= 0xFF  # a flipped byte in a blob: the file keeps its size
    s3_env.write(key, bytes(data))
    served = []
    with pytest.raises(CacheError, match=rf"{data_files[2].path}: shard changed since it was published"):
        for row in stream:
            served.append(row["idx"])
    assert served == list(range(len(served))) and 1000 <= len(served) < 2000  # good rows, then the error
    s3_env.delete(key)
    with pytest.raises(CacheError, match=rf"{data_files[2].path}: shard listed in _metadata.json is missing"):
        list(stream)  # the stream open before keeps reading the attempt it resolved
    rebuilt = sds.load_dataset(Wide, split="train[50%:]", storage_format="lance", streaming=True,
                               layout_options=LANCE_OPTIONS)  # load_dataset builds a cache with missing objects again
    assert rebuilt.dataset.backends[0].metadata.attempt != source.metadata.attempt
    assert [row["idx"] for row in rebuilt] == list(range(ROWS // 2, ROWS))


def test_a_shuffled_remote_stream_with_shard_windows_stays_within_the_cache_limit(s3_env, monkeypatch, tmp_path):
    """window_shards=1: shards in a seeded order, blocks shuffled inside each, so every shard is downloaded once
    and the local cache holds about one; without it the windows mix shards and a small cache re-downloads."""
    shards = publish(s3_env, "arrow")
    biggest = max(s.num_bytes for s in shards)
    limit = int(biggest * 1.5)
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_LIMIT", str(limit))
    monkeypatch.setattr("stable_datasets.layouts.sharded.STREAM_BLOCK_ROWS", 250)  # 4 blocks per shard

    def stream(node, **shuffle):
        monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / node))
        s3_env.local = tmp_path / node
        return sds.load_dataset(Wide, split="train", streaming=True, layout_options={"max_shard_size": 1_000_000}
                                ).shuffle(seed=4, window_blocks=2, **shuffle)

    bounded = stream("bounded", window_shards=1)
    held, seen = [], []
    for row in bounded:
        seen.append(row["idx"])
        if len(seen) % 250 == 0:
            held.append(local_shard_bytes(s3_env))
    assert sorted(seen) == list(range(ROWS)) and seen != list(range(ROWS))
    assert bounded.dataset.backends[0].downloads == len(shards) and max(held) <= limit
    assert seen == [row["idx"] for row in stream("again", window_shards=1)]  # seeded: the same on every node
    unbounded = stream("unbounded")
    assert sorted(row["idx"] for row in unbounded) == list(range(ROWS))
    assert unbounded.dataset.backends[0].downloads > len(shards)  # what the shard window saves

    def workers_stream():
        return stream("workers", window_shards=2)

    full = ids(StreamingDataLoader(workers_stream(), batch_size=100, num_workers=2))
    assert sorted(full) == list(range(ROWS))
    head, rest, _ = stop_and_resume(workers_stream, stop_after=7, batch_size=100)
    assert head + rest == full


def test_a_remote_lance_cache_written_before_fragment_files_streams_in_place(s3_env, monkeypatch, tmp_path):
    import json

    publish_lance(s3_env, monkeypatch, tmp_path)
    key = next(k for k in s3_env.objects() if k.endswith("/train/_metadata.json"))
    metadata = json.loads(s3_env.read(key))
    del metadata["extra"]["fragment_files"]
    s3_env.write(key, json.dumps(metadata).encode())
    stream = sds.load_dataset(Wide, split="train[10%:30%]", storage_format="lance", streaming=True,
                              layout_options=LANCE_OPTIONS)
    assert not isinstance(stream.dataset.backends[0], RemoteShards)  # Lance reads it in place, with ranged GETs
    assert [row["idx"] for row in stream] == list(range(400, 1200))
    assert not list((tmp_path / "fresh-node").rglob("*.lance"))


def test_a_big_data_file_is_downloaded_in_parallel_ranges_and_a_replaced_object_is_an_error(
        s3_env, monkeypatch, tmp_path, served_bytes):
    from stable_datasets.errors import StorageError
    from stable_datasets.storage import s3

    data_files = publish_lance(s3_env, monkeypatch, tmp_path)
    part = 300_000
    monkeypatch.setattr(s3, "PART_BYTES", part)
    served_bytes.clear()
    stream = sds.load_dataset(Wide, split="train[:25%]", storage_format="lance", streaming=True,
                              layout_options=LANCE_OPTIONS)
    assert [row["idx"] for row in stream] == list(range(1000))
    name = data_files[0].path.rsplit("/", 1)[-1]
    ranges = sorted(size for key, size in served_bytes if key.endswith(name))
    size = data_files[0].num_bytes
    assert size > 3 * part and sum(ranges) == size and len(ranges) == -(-size // part)

    store = stream.dataset.backends[0].split.store
    key = f"{stream.dataset.backends[0].split.key(stream.dataset.backends[0].metadata.attempt)}/{data_files[1].path}"
    original = store.client.get_object

    def replaced_after_the_first_range(**kwargs):
        answer = original(**kwargs)
        if kwargs.get("Range", "").startswith("bytes=0-"):
            s3_env.write(key, b"x" * size)  # another writer replaces the object mid-download
        return answer

    monkeypatch.setattr(store.client, "get_object", replaced_after_the_first_range)
    with pytest.raises(StorageError, match=r"the object changed while it was downloaded"):
        store.download(key, tmp_path / "copy")
    assert not list(tmp_path.glob("*copy*")) and not list(tmp_path.glob(".copy*"))


def test_a_remote_stream_pickles_for_spawned_workers_and_reads_the_same_rows(s3_env, monkeypatch, tmp_path):
    """DataLoader workers started with "spawn" or "forkserver" (macOS's default, Python 3.14's on Linux) receive
    the stream pickled; its store is set up again in the worker from its URL and storage options."""
    import pickle

    publish(s3_env, "arrow")
    stream = sds.load_dataset(Wide, split="train[:10%]", streaming=True, layout_options={"max_shard_size": 1_000_000})
    copy = pickle.loads(pickle.dumps(stream))
    assert [row["idx"] for row in copy] == list(range(400))
    # one client per process and bucket
    assert copy.dataset.backends[0].split.store is stream.dataset.backends[0].split.store
