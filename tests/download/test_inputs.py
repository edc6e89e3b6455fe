"""Input files on object storage and HTTP: packed SFT Parquet, WebDataset tars (.tar.gz too) and
interleaved Parquet read from s3:// (the moto server) and http:// (the local file server)."""

from __future__ import annotations

import glob
import gzip
import io
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stable_datasets.download import inputs
from stable_datasets.errors import StorageError
from stable_datasets.interleaved import InterleavedParquetReader, InterleavedParquetWriter, InterleavedWebdatasetReader
from stable_datasets.sft import PackedSFTDataset, write_packed_parquet
from stable_datasets.sft.dataset import PackedFilesNotFoundError
from stable_datasets.streaming.source import row_source
from tests.fixtures.mint_shards import write_mint_shards
from tests.http_server import FileServer

pytest.importorskip("boto3")


def packs(first: int, count: int) -> list[dict]:
    return [{"input_ids": np.arange(i, i + 6, dtype=np.int32), "loss_mask": np.ones(6, np.int8),
             "seq_start_id": np.array([0, 3], np.int32)} for i in range(first, first + count)]


def upload(s3_env, local, key: str) -> str:
    s3_env.write(key, local.read_bytes())
    return f"s3://{s3_env.bucket}/{key}"


def first_tokens(dataset) -> list[int]:
    return [int(dataset[i]["input_ids"][0]) for i in range(len(dataset))]


def test_packed_sft_reads_s3_files_prefixes_and_globs(s3_env, tmp_path):
    for shard in range(2):
        path = write_packed_parquet(packs(shard * 10, 10), tmp_path / f"p{shard}.parquet", row_group_rows=4)
        upload(s3_env, path, f"packs/p{shard}.parquet")
    s3_env.write("packs/README.txt", b"not a pack")
    one = PackedSFTDataset(f"s3://{s3_env.bucket}/packs/p1.parquet", eos_id=0, max_seq_length=8)
    assert first_tokens(one) == list(range(10, 20))
    for url in (f"s3://{s3_env.bucket}/packs/", f"s3://{s3_env.bucket}/packs", f"s3://{s3_env.bucket}/packs/p*.parquet"):
        every = PackedSFTDataset(url, eos_id=0, max_seq_length=8)
        assert first_tokens(every) == list(range(20)), url
    assert row_source(every).block_bounds().tolist() == [0, 4, 8, 10, 14, 18, 20]  # row groups of the local copies
    with pytest.raises(PackedFilesNotFoundError, match=r"no objects match the pattern s3://.*/packs/q\*"):
        PackedSFTDataset(f"s3://{s3_env.bucket}/packs/q*.parquet", eos_id=0)
    with pytest.raises(PackedFilesNotFoundError, match="no such object, and no .parquet/.pq/.npy objects under it"):
        PackedSFTDataset(f"s3://{s3_env.bucket}/nothing-here.parquet", eos_id=0)


def test_a_changed_object_is_copied_again_and_a_vanished_one_is_an_error(s3_env, tmp_path):
    url = upload(s3_env, write_packed_parquet(packs(0, 5), tmp_path / "a.parquet"), "in/a.parquet")
    assert first_tokens(PackedSFTDataset(url, eos_id=0)) == list(range(5))
    upload(s3_env, write_packed_parquet(packs(100, 7), tmp_path / "b.parquet"), "in/a.parquet")  # replaced
    assert first_tokens(PackedSFTDataset(url, eos_id=0)) == list(range(100, 107))  # never the stale copy
    s3_env.delete("in/a.parquet")
    with pytest.raises(PackedFilesNotFoundError, match=r"s3://.*/in/a.parquet: no such object"):
        PackedSFTDataset(url, eos_id=0)


def test_an_object_that_changes_during_the_copy_is_an_error(s3_env, tmp_path, monkeypatch):
    url = upload(s3_env, write_packed_parquet(packs(0, 5), tmp_path / "a.parquet"), "in/a.parquet")
    replacement = write_packed_parquet(packs(50, 9), tmp_path / "b.parquet").read_bytes()
    from stable_datasets.storage.s3 import S3Store

    real_download = S3Store.download

    def download_then_overwrite(self, key, destination):
        done = real_download(self, key, destination)
        s3_env.write(key, replacement)  # a writer replaces the object while we read it
        return done

    monkeypatch.setattr(S3Store, "download", download_then_overwrite)
    with pytest.raises(StorageError, match=r"s3://.*/in/a.parquet: input changed while it was being read"):
        inputs.fetch_inputs(url)
    monkeypatch.undo()
    copies = [p for p in (s3_env.local / "inputs").rglob("*") if p.is_file()]
    assert not [p for p in copies if p.name == "a.parquet"]  # nothing half-verified is kept
    assert first_tokens(PackedSFTDataset(url, eos_id=0)) == list(range(50, 59))


def test_webdataset_tars_and_tar_gz_from_s3_read_like_local_ones(s3_env, tmp_path):
    shards = write_mint_shards(tmp_path / "tars", num_samples=12, samples_per_shard=5, tiff_every=10)
    local = InterleavedWebdatasetReader(shards, materialize_on_read=True).read().table
    for path in map(Path, sorted(map(str, shards))):
        data = path.read_bytes()
        if path.name.endswith("0.tar"):
            s3_env.write(f"web/{path.name}.gz", gzip.compress(data))  # .tar.gz shards too
        else:
            s3_env.write(f"web/{path.name}", data)
    s3_env.write("web/notes.txt", b"skipped: not a tar")
    remote = InterleavedWebdatasetReader(f"s3://{s3_env.bucket}/web/", materialize_on_read=True).read().table
    assert remote.select(["sample_id", "position", "text_content", "binary_content"]).equals(
        local.select(["sample_id", "position", "text_content", "binary_content"]))
    lazy = InterleavedWebdatasetReader(f"s3://{s3_env.bucket}/web/*.tar*")
    assert lazy.read().num_items == 12


def test_interleaved_parquet_from_s3(s3_env, tmp_path):
    shards = write_mint_shards(tmp_path / "tars", num_samples=8, samples_per_shard=8, tiff_every=10)
    with InterleavedParquetWriter(tmp_path / "pq") as writer:
        for batch in InterleavedWebdatasetReader(shards, materialize_on_read=True):
            writer.write(batch)
    local = InterleavedParquetReader(tmp_path / "pq").read().table
    for path in sorted((tmp_path / "pq").glob("*.parquet")):
        upload(s3_env, path, f"pq/{path.name}")
    remote = InterleavedParquetReader(f"s3://{s3_env.bucket}/pq/").read().table
    assert remote.equals(local)


def test_inputs_over_http_are_downloaded_once_and_a_404_names_the_url(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "local"))
    buffer = io.BytesIO()
    pq.write_table(pa.table({"input_ids": [[1, 2, 3]], "loss_mask": [[1, 1, 1]], "seq_start_id": [[0]]}), buffer)
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:gz") as archive:
        for name, data in (("doc1.json", b'{"texts": ["hello", null], "images": [null, "x.png"]}'),
                           ("doc1.x.png", b"\x89PNG not really")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    with FileServer() as server:
        server.files["/p.parquet"] = buffer.getvalue()
        server.files["/s.tar.gz"] = tar.getvalue()
        server.validators["/p.parquet"] = {"ETag": '"v1"'}
        dataset = PackedSFTDataset(f"{server.url}/p.parquet", eos_id=0)
        assert dataset[0]["input_ids"].tolist() == [1, 2, 3]
        PackedSFTDataset(f"{server.url}/p.parquet", eos_id=0)
        assert server.hits("/p.parquet") == 1  # the second open reuses the copy (its ETag is unchanged)
        table = InterleavedWebdatasetReader(f"{server.url}/s.tar.gz").read().table
        (tmp_path / "s.tar.gz").write_bytes(tar.getvalue())
        local = InterleavedWebdatasetReader(tmp_path / "s.tar.gz").read().table
        assert table.column("sample_id").to_pylist()[0] == "doc1"
        assert table.drop_columns(["source_ref"]).equals(local.drop_columns(["source_ref"]))
        with pytest.raises(PackedFilesNotFoundError, match=r"http://127.0.0.1:\d+/gone.parquet: no such input"):
            PackedSFTDataset(f"{server.url}/gone.parquet", eos_id=0)


def test_csv_data_files_on_s3_single_and_glob_load_like_local_ones_and_a_changed_object_rebuilds(s3_env, tmp_path):
    import stable_datasets as sds

    s3_env.write("csv/train-0.csv", b"a,b\n1,x\n2,y\n")
    s3_env.write("csv/train-1.csv", b"a,b\n3,z\n")
    s3_env.write("csv/other.txt", b"not matched")
    one = sds.load_dataset("csv", data_files=f"s3://{s3_env.bucket}/csv/train-0.csv", split="train",
                           cache_dir=tmp_path / "cache")
    assert one.to_dict() == {"a": [1, 2], "b": ["x", "y"]}
    both = sds.load_dataset("csv", data_files=f"s3://{s3_env.bucket}/csv/train-*.csv", split="train",
                            cache_dir=tmp_path / "cache")
    assert both.to_dict() == {"a": [1, 2, 3], "b": ["x", "y", "z"]}
    s3_env.write("csv/train-1.csv", b"a,b\n4,w\n")  # a new ETag: a new fingerprint, never the stale rows
    again = sds.load_dataset("csv", data_files=f"s3://{s3_env.bucket}/csv/train-*.csv", split="train",
                             cache_dir=tmp_path / "cache")
    assert again.to_dict() == {"a": [1, 2, 4], "b": ["x", "y", "w"]}
    with pytest.raises(FileNotFoundError, match=rf"s3://{s3_env.bucket}/csv/nope.csv: no such object"):
        sds.load_dataset("csv", data_files=f"s3://{s3_env.bucket}/csv/nope.csv", split="train",
                         cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="matches no file"):
        sds.load_dataset("csv", data_files=f"s3://{s3_env.bucket}/csv/nope-*.csv", split="train",
                         cache_dir=tmp_path / "cache")


def test_builder_downloads_from_s3_are_verified_copies(s3_env, tmp_path):
    import hashlib

    from stable_datasets.download.manager import DownloadManager, RemoteFile
    from stable_datasets.errors import ChecksumError

    data = b"label,value\n0,1\n"
    s3_env.write("raw/table.csv", data)
    url = f"s3://{s3_env.bucket}/raw/table.csv"
    manager = DownloadManager(tmp_path / "downloads")
    path = manager.download(RemoteFile(url, sha256=hashlib.sha256(data).hexdigest()))
    assert Path(path).read_bytes() == data and manager.downloaded_files == [path]
    with pytest.raises(ChecksumError, match=rf"{url}: expected sha256 {'0' * 64}"):
        manager.download(RemoteFile(url, sha256="0" * 64))
    s3_env.write("raw/table.csv", data + b"1,2\n")  # changed: copied again
    assert Path(manager.download(url)).read_bytes() == data + b"1,2\n"


def test_object_globs_match_as_local_globs_do(s3_env, tmp_path):
    """`*` and `?` stay inside one folder, `**/` crosses zero or more, hidden names need a leading dot:
    what glob.glob(recursive=True) gives for the same tree on a local disk."""
    names = ["raw/a.csv", "raw/c.csv", "raw/sub/b.csv", "raw/sub/deep/d.csv", "raw/.hidden.csv", "raw/ab.csv"]
    for name in names:
        s3_env.write(name, b"x\n1\n")
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x\n1\n")
    bucket = f"s3://{s3_env.bucket}/"
    for pattern in ("raw/*.csv", "raw/?.csv", "raw/**/*.csv", "raw/**", "raw/*/*.csv", "raw/[ab].csv", "raw/.*.csv",
                    "raw/sub/**/d.csv", "r*/*.csv"):
        local = sorted(str(Path(p).relative_to(tmp_path)) for p in glob.glob(str(tmp_path / pattern), recursive=True)
                       if Path(p).is_file())
        remote = [url.removeprefix(bucket) for url in inputs.expand_object_pattern(bucket + pattern)]
        assert remote == local, pattern
    assert [url.removeprefix(bucket) for url in inputs.expand_object_pattern(bucket + "raw/*.csv")] == \
        ["raw/a.csv", "raw/ab.csv", "raw/c.csv"]


def test_data_files_on_s3_use_the_storage_options_given_to_load_dataset(s3_env, tmp_path, monkeypatch):
    import stable_datasets as sds
    from stable_datasets.storage.resolve import forget_stores

    s3_env.write("opts/a.csv", b"x,y\n1,2\n")
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    forget_stores()
    options = {"endpoint_url": s3_env.endpoint, "key": "testing", "secret": "testing"}
    for data_files in (f"s3://{s3_env.bucket}/opts/a.csv", f"s3://{s3_env.bucket}/opts/*.csv"):
        ds = sds.load_dataset("csv", data_files=data_files, split="train", cache_dir=tmp_path / "cache",
                              storage_options=options)
        assert ds.to_dict() == {"x": [1], "y": [2]}, data_files


def test_the_interleaved_builder_reads_s3_tars_with_the_storage_options_given_to_load_dataset(s3_env, tmp_path,
                                                                                              monkeypatch):
    import stable_datasets as sds
    from stable_datasets.storage.resolve import forget_stores

    shards = write_mint_shards(tmp_path / "tars", num_samples=6, samples_per_shard=3, tiff_every=10)
    local = sds.load_dataset("interleaved", split="train", data_files=str(shards[0].parent / "*.tar"),
                             cache_dir=tmp_path / "local-cache")
    for path in shards:
        upload(s3_env, Path(path), f"mint/{Path(path).name}")
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    forget_stores()
    options = {"endpoint_url": s3_env.endpoint, "key": "testing", "secret": "testing"}
    remote = sds.load_dataset("interleaved", split="train", data_files=f"s3://{s3_env.bucket}/mint/*.tar",
                              cache_dir=tmp_path / "cache", storage_options=options)
    assert len(remote) == 6 and remote.to_arrow().equals(local.to_arrow())


def test_webdataset_rows_from_s3_name_their_shard_by_its_url(s3_env, tmp_path):
    import stable_datasets as sds

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for i in range(2):
            member = tarfile.TarInfo(f"s{i}.txt")
            member.size = len(f"hello {i}")
            tar.addfile(member, io.BytesIO(f"hello {i}".encode()))
    s3_env.write("wds/shard-0.tar.gz", buffer.getvalue())
    url = f"s3://{s3_env.bucket}/wds/shard-0.tar.gz"
    ds = sds.load_dataset("webdataset", data_files=f"s3://{s3_env.bucket}/wds/*.tar.gz", split="train",
                          cache_dir=tmp_path / "cache")
    assert ds.to_dict() == {"__key__": ["s0", "s1"], "__url__": [url, url], "txt": ["hello 0", "hello 1"]}


def test_an_object_key_that_would_leave_the_local_inputs_folder_is_refused_naming_it(s3_env, tmp_path):
    """A bucket someone else writes to may hold keys with '..' or '//' (S3 keys are any text): copying one must not
    write outside $STABLE_DATASETS_LOCAL_CACHE_DIR/inputs, nor land on another key's copy."""
    s3_env.write("raw/a.parquet", b"a")
    escape = "raw/" + "../" * 12 + f"{tmp_path.relative_to('/')}/escaped.parquet"
    s3_env.write(escape, b"evil")
    from stable_datasets.storage.resolve import open_store

    store = open_store(inputs.ObjectURL.parse(f"s3://{s3_env.bucket}"))
    with pytest.raises(StorageError, match=rf"^s3://{s3_env.bucket}/raw/\.\./.*escaped\.parquet: the object's key "
                                           r"has an empty, '\.' or '\.\.' name, so it has no local copy; rename the "
                                           r"object"):
        inputs._fetch_object(store, store.head(escape))
    assert [p.name for p in inputs.fetch_inputs(f"s3://{s3_env.bucket}/raw/", (".parquet",))] == ["a.parquet"]
    assert not (tmp_path / "escaped.parquet").exists()
    s3_env.write("raw//a.parquet", b"other")  # would share raw/a.parquet's local copy
    with pytest.raises(StorageError, match=rf"^s3://{s3_env.bucket}/raw//a\.parquet: the object's key has an empty"):
        inputs.fetch_inputs(f"s3://{s3_env.bucket}/raw/**", (".parquet",))


def test_a_prefix_names_the_objects_directly_under_it_as_a_local_folder_does(s3_env, tmp_path):
    """A local folder given to a reader is read without its subfolders; a prefix is too."""
    for name in ("packs/p0.parquet", "packs/old/p9.parquet"):
        s3_env.write(name, b"x")
    copies = inputs.fetch_inputs(f"s3://{s3_env.bucket}/packs/", (".parquet",))
    assert [p.relative_to(inputs.inputs_root()).as_posix() for p in copies] == [f"s3/{s3_env.bucket}/packs/p0.parquet"]
    nested = inputs.fetch_inputs(f"s3://{s3_env.bucket}/packs/**/*.parquet", (".parquet",))  # a glob says so
    assert [p.name for p in nested] == ["p9.parquet", "p0.parquet"]


def test_opening_the_same_s3_files_again_never_stops_a_running_stream(s3_env, tmp_path, cache_root):
    """A second open on the node (another rank, an eval loop) found the copies current and touched them: their new
    modification time tripped the first stream's change check mid-epoch. Reuse marks the access time only."""
    import json
    import os

    import stable_datasets as sds

    rows = {f: [{"idx": f * 100 + i, "text": f"file {f} row {i}"} for i in range(30)] for f in range(24)}
    for f, records in rows.items():
        s3_env.write(f"again/part-{f:02d}.jsonl", "".join(json.dumps(r) + "\n" for r in records).encode())
    url = f"s3://{s3_env.bucket}/again/part-*.jsonl"
    opened = sds.load_dataset("json", data_files=url, split="train", streaming=True)
    first = iter(opened)
    served = [next(first)["idx"] for _ in range(5)]
    copies = sorted(p for p in inputs.inputs_root().rglob("part-*.jsonl"))
    modified = {p: p.stat().st_mtime_ns for p in copies}
    second = sds.load_dataset("json", data_files=url, split="train", streaming=True)  # the same files again
    assert [r["idx"] for r in second] == [r["idx"] for f in range(24) for r in rows[f]]
    served += [r["idx"] for r in first]
    assert served == [r["idx"] for f in range(24) for r in rows[f]]
    assert [r["idx"] for r in opened] == served  # its next epoch too
    assert copies and {p: p.stat().st_mtime_ns for p in copies} == modified  # reuse marks the access time only
    assert all(os.path.isfile(p) for p in copies)
