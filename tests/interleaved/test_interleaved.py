from __future__ import annotations

import io
import json
import tarfile
from urllib.parse import quote

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import stable_datasets as sds
from stable_datasets.interleaved import (
    INTERLEAVED_SCHEMA,
    InterleavedBatch,
    InterleavedParquetReader,
    InterleavedParquetWriter,
    InterleavedReadError,
    InterleavedWebdatasetReader,
    InterleavedWebdatasetWriter,
    MaterializeError,
    SchemaError,
    align_table,
    build_source_ref,
    escape_key,
    materialize,
    parse_source_ref,
    reconcile_schema,
    resolve_schema,
    split_member,
    unescape_key,
)
from tests.fixtures.mint_shards import write_mint_shards
from tests.fixtures.tars import write_tar


@pytest.fixture
def shards(tmp_path):
    return write_mint_shards(tmp_path / "tars", num_samples=24, samples_per_shard=10, tiff_every=10)




def _images(batch):
    t = batch.table
    return t.filter(pc.equal(t.column("modality"), "image"))


# -- schema, keys, batch -----------------------------------------------------------------------
def test_schema_and_keys():
    assert INTERLEAVED_SCHEMA.names == ["sample_id", "position", "modality", "content_type", "text_content",
                                        "binary_content", "source_ref", "materialize_error"]
    assert INTERLEAVED_SCHEMA.field("position").type == pa.int32()
    assert INTERLEAVED_SCHEMA.field("binary_content").type == pa.large_binary()
    for sample_id in ["a/b:c.d", "plain", "x.y.z", "100%", "ünïcode ☃", ""]:
        key = escape_key(sample_id)
        assert "/" not in key and key == quote(sample_id, safe="")  # NeMo Curator's keys, dots kept
        assert unescape_key(key) == sample_id
    assert escape_key("a/b:c.d") == "a%2Fb%3Ac.d"
    assert split_member("plain.3.png") == ("plain", "3.png")
    assert parse_source_ref(build_source_ref("p.tar", "m.png", 512, 10, 2)) == {
        "path": "p.tar", "member": "m.png", "byte_offset": 512, "byte_size": 10, "frame_index": 2}


def test_reconcile_align_resolve(caplog):
    a = pa.schema([("position", pa.int64()), ("score", pa.int32()), ("tag", pa.dictionary(pa.int8(), pa.string()))])
    b = pa.schema([("score", pa.int64()), ("note", pa.string())])
    merged = reconcile_schema([a, b])
    assert merged.field("position").type == pa.int32()
    assert merged.field("score").type == pa.int64() and merged.field("tag").type == pa.string()
    with pytest.raises(SchemaError, match="column 'score' has incompatible types int64 and string"):
        reconcile_schema([b, pa.schema([("score", pa.string())])])
    table = pa.table({"sample_id": ["s", "s"], "position": pa.array([-1, 0], pa.int64()),
                      "modality": ["metadata", "text"],
                      "tag": pa.array(["x", "y"]).dictionary_encode()})
    aligned = align_table(table, merged)
    assert aligned.schema.field("position").type == pa.int32()
    assert aligned.column("tag").type == pa.string() and aligned.column("note").null_count == 2
    narrow = pa.schema([*INTERLEAVED_SCHEMA, pa.field("big", pa.int32())])
    assert align_table(table.append_column("big", pa.array([1, 2], pa.int64())), narrow).column("big").type == \
        pa.int32()  # passthrough columns cast with checked casts, as NeMo Curator's align_table
    with pytest.raises(SchemaError, match="column 'big' cannot be cast from int64 to int32"):
        align_table(table.append_column("big", pa.array([1, 2**40], pa.int64())), narrow)
    from loguru import logger

    logger.enable("stable_datasets")
    messages = []
    handle = logger.add(messages.append, level="WARNING")
    try:
        resolved = resolve_schema(pa.schema([("x", pa.int8())]), schema_overrides={"x": pa.int64()})
    finally:
        logger.remove(handle)
        logger.disable("stable_datasets")
    assert resolved.field("x").type == pa.int8() and "schema_overrides ignored" in "".join(map(str, messages))
    assert resolve_schema(schema_overrides={"score": pa.float64()}).field("score").type == pa.float64()
    with pytest.raises(SchemaError, match="reserved columns"):
        resolve_schema(schema_overrides={"position": pa.int64()})


def test_batch_validate_and_samples():
    table = pa.table({"sample_id": ["b", "a", "b", "a"], "position": pa.array([0, -1, -1, 0], pa.int32()),
                      "modality": ["text", "metadata", "metadata", "image"],
                      "source_ref": [None] * 4})
    batch = InterleavedBatch(align_table(table, INTERLEAVED_SCHEMA)).validate()
    assert batch.num_items == 2 and batch.count("text") == 1 and batch.count() == 4
    assert [s.column("sample_id")[0].as_py() for s in batch] == ["b", "a"]
    assert [s.column("position").to_pylist() for s in batch] == [[-1, 0], [-1, 0]]
    bad = table.set_column(2, "modality", pa.array(["text", "metadata", "metadata", "video"]))
    with pytest.raises(SchemaError, match=r"unknown modalities \['video'\]"):
        InterleavedBatch(bad).validate()
    dup = table.set_column(1, "position", pa.array([0, -1, -1, -1], pa.int32()))
    with pytest.raises(SchemaError, match="metadata rows have position -1"):
        InterleavedBatch(dup).validate()


# -- webdataset reader -------------------------------------------------------------------------
def test_reader_places_items_and_keeps_metadata(shards):
    batch = InterleavedWebdatasetReader(shards).read().validate()
    assert batch.num_items == 24
    first = next(iter(batch))
    rows = first.to_pylist()
    record = json.loads(rows[0]["text_content"])
    assert rows[0]["modality"] == "metadata" and rows[0]["position"] == -1
    assert rows[0]["url"] == record["url"] and json.loads(rows[0]["tags"]) == record["tags"]  # non-strings as JSON
    for row in rows[1:]:
        if row["modality"] == "text":
            assert row["text_content"] == record["texts"][row["position"]]
        else:
            assert record["images"][row["position"]] is not None
    assert sum(1 for r in rows if r["modality"] == "text") == sum(1 for t in record["texts"] if t is not None)


def test_lazy_refs_point_at_the_bytes_and_materialize_matches(shards):
    lazy = _images(InterleavedWebdatasetReader(shards).read())
    eager = _images(InterleavedWebdatasetReader(shards, materialize_on_read=True).read())
    assert lazy.column("binary_content").null_count == lazy.num_rows
    assert eager.column("materialize_error").null_count == eager.num_rows
    tiffs = 0
    for ref, data in zip(lazy.column("source_ref").to_pylist(), eager.column("binary_content").to_pylist()):
        ref = parse_source_ref(ref)
        with open(ref["path"], "rb") as fh:
            fh.seek(ref["byte_offset"])
            whole = fh.read(ref["byte_size"])
        if "frame_index" not in ref:
            assert whole == data
            continue
        tiffs += 1  # a frame ref materializes as that frame alone
        alone = _frames(data)
        assert len(alone) == 1 and np.array_equal(alone[0], _frames(whole)[ref["frame_index"]])
    assert tiffs > 3


def test_mint_pdf_documents_take_one_tiff_frame_per_token(shards):
    batch = InterleavedWebdatasetReader(shards).read()
    tiff = batch.table.filter(pc.equal(batch.table.column("content_type"), "image/tiff"))
    first = tiff.filter(pc.equal(tiff.column("sample_id"), "doc000000"))
    record = json.loads(batch.table.column("text_content")[0].as_py())
    tokens = [t for t in record["images"] if t is not None]
    assert tokens[0] == "page_0_image_0" and first.num_rows == len(tokens)
    refs = [parse_source_ref(r) for r in first.column("source_ref").to_pylist()]
    assert [(r["member"], r["frame_index"]) for r in refs] == [("doc000000.tiff", k) for k in range(len(tokens))]
    assert sorted(set(tiff.column("sample_id").to_pylist())) == ["doc000000", "doc000010", "doc000020"]


def test_tokens_resolve_to_members_or_the_default(tmp_path):
    png = b"\x89PNG\r\n\x1a\nfake"
    path = write_tar(tmp_path / "t.tar", [
        ("s1.json", json.dumps({"texts": ["a", None, None], "images": [None, "s1.1.png", "pic.png"],
                                "alt": ["first", "second"], "sid": "custom"}).encode()),
        ("s1.1.png", png), ("s1.pic.png", png + b"2"),
        ("s2.json", json.dumps({"texts": [None, "b"], "images": ["whatever", None], "sid": "other"}).encode()),
        ("s2.jpg", b"\xff\xd8only"),
    ])
    reader = InterleavedWebdatasetReader(path, materialize_on_read=True, per_image_fields=("alt",))
    batch = reader.read()
    images = _images(batch).to_pylist()
    assert [(r["sample_id"], r["position"], r["binary_content"]) for r in images] == [
        ("s1", 1, png), ("s1", 2, png + b"2"), ("s2", 0, b"\xff\xd8only")]
    assert [r["alt"] for r in images] == ["first", "second", None]
    custom = InterleavedWebdatasetReader(path, sample_id_field="sid").read()
    assert "custom" in custom.table.column("sample_id").to_pylist()
    only = InterleavedWebdatasetReader(path, fields=["sid"]).read()
    assert "alt" not in only.table.column_names


def _sample_ids_in_one_batch_each(batches) -> int:
    """Checks no sample is split over two batches; returns how many samples there are."""
    seen: set[str] = set()
    for batch in batches:
        ids = set(batch.table.column("sample_id").to_pylist())
        assert not ids & seen, f"samples {sorted(ids & seen)} appear in two batches"
        seen |= ids
    return len(seen)


def test_max_batch_bytes_never_splits_a_sample(shards):
    batches = list(InterleavedWebdatasetReader(shards, max_batch_bytes=4000, materialize_on_read=True))
    assert len(batches) > 3
    assert _sample_ids_in_one_batch_each(batches) == 24
    assert all(batch.source_files for batch in batches)


def test_unsafe_oversized_and_truncated_tars(tmp_path):
    evil = write_tar(tmp_path / "evil.tar", [("../escape.json", b"{}"), ("/abs.json", b"{}"),
                                        ("ok.json", json.dumps({"texts": ["x"]}).encode())])
    reader = InterleavedWebdatasetReader(evil)
    assert reader.read().num_items == 1
    assert sorted(m.split(":", 1)[1] for m in reader.unsafe_members) == ["../escape.json", "/abs.json"]
    assert not (tmp_path.parent / "escape.json").exists()
    big = write_tar(tmp_path / "big.tar", [("b.json", b"{}"), ("b.png", b"x" * 5000)])
    with pytest.raises(InterleavedReadError, match=r"member 'b.png' is 5000 bytes, over the 1000-byte limit"):
        InterleavedWebdatasetReader(big, max_member_bytes=1000).read()
    data = (tmp_path / "big.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[:1500])  # inside b.png's header
    with pytest.raises(InterleavedReadError, match=r"cut.tar: truncated or corrupt tar at byte 1024"):
        InterleavedWebdatasetReader(tmp_path / "cut.tar").read()
    (tmp_path / "cut2.tar").write_bytes(data[:3000])  # inside b.png's data
    with pytest.raises(InterleavedReadError, match=r"cut2.tar: truncated tar, member 'b.png' at byte 1536"):
        InterleavedWebdatasetReader(tmp_path / "cut2.tar").read()
    no_id = write_tar(tmp_path / "noid.tar", [("q.json", b"{}")])
    with pytest.raises(InterleavedReadError, match="noid.tar:q.json: no 'sid' field"):
        InterleavedWebdatasetReader(no_id, sample_id_field="sid").read()


# -- parquet, writers, round trips -------------------------------------------------------------
def test_round_trip_tar_parquet_tar(shards, tmp_path):
    original = InterleavedWebdatasetReader(shards, materialize_on_read=True).read()
    with InterleavedParquetWriter(tmp_path / "pq") as writer:
        for batch in InterleavedWebdatasetReader(shards):  # lazy rows: the writer materializes them
            writer.write(batch)
    curated = InterleavedParquetReader(tmp_path / "pq").read()
    assert curated.num_items == 24 and _images(curated).column("binary_content").null_count == 0
    with InterleavedWebdatasetWriter(tmp_path / "tars2", samples_per_shard=7) as writer:
        writer.write(curated)
    assert len(writer.files_written) == 4
    again = InterleavedWebdatasetReader(tmp_path / "tars2", materialize_on_read=True).read()

    def docs(batch):
        out = {}
        for sample in batch:
            rows = sample.to_pylist()
            out[rows[0]["sample_id"]] = ([(r["position"], r["modality"], r["text_content"] if r["modality"] == "text"
                                           else r["binary_content"]) for r in rows[1:]],
                                         {k: v for k, v in rows[0].items() if k in ("url", "score", "tags")})
        return out

    assert docs(again) == docs(original)


def test_tar_keys_round_trip_awkward_sample_ids(tmp_path):
    table = pa.table({"sample_id": ["a/b:c.d", "a/b:c.d", "x.y"], "position": pa.array([-1, 0, 0], pa.int32()),
                      "modality": ["metadata", "text", "text"], "text_content": ['{"k": 1}', "hello", "world"]})
    with InterleavedWebdatasetWriter(tmp_path / "out") as writer:
        writer.write(InterleavedBatch(align_table(table, INTERLEAVED_SCHEMA)))
    with tarfile.open(writer.files_written[0]) as tar:
        names = tar.getnames()
    assert "a%2Fb%3Ac.d.json" in names
    back = InterleavedWebdatasetReader(tmp_path / "out").read()
    assert sorted(set(back.table.column("sample_id").to_pylist())) == ["a/b:c.d", "x.y"]


def test_writer_modes_and_unknown_modalities(shards, tmp_path):
    batch = InterleavedWebdatasetReader(shards[:1]).read()
    with InterleavedParquetWriter(tmp_path / "out") as w:
        w.write(batch)
    with pytest.raises(FileExistsError, match="mode='error'"):
        InterleavedParquetWriter(tmp_path / "out")
    with InterleavedParquetWriter(tmp_path / "out", mode="append") as w:
        w.write(batch)
    assert sorted(p.name for p in (tmp_path / "out").glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    with InterleavedParquetWriter(tmp_path / "out", mode="ignore") as w:
        w.write(batch)
    assert len(list((tmp_path / "out").glob("*.parquet"))) == 2
    with InterleavedParquetWriter(tmp_path / "out", mode="overwrite") as w:
        w.write(batch)
    assert len(list((tmp_path / "out").glob("*.parquet"))) == 1
    odd = batch.table.set_column(2, "modality", pa.array(["audio"] * batch.num_rows))
    with pytest.raises(ValueError, match=r"unknown modalities \['audio'\]"):
        InterleavedWebdatasetWriter(tmp_path / "x").write(InterleavedBatch(odd))


@pytest.mark.parametrize(("policy", "kept_images", "kept_samples"), [("warn", 3, 2), ("drop_row", 2, 2),
                                                                     ("drop_sample", 1, 1)])
def test_materialize_error_policies(tmp_path, policy, kept_images, kept_samples):
    good = write_tar(tmp_path / "g.tar", [("x.json", b"{}"), ("x.png", b"PNGDATA")])
    ref = build_source_ref(str(good), "x.png", 512 + 512 + 512, 7)  # json header+data, png header
    missing = build_source_ref(str(tmp_path / "gone.tar"), "x.png", 0, 7)
    table = align_table(pa.table({
        "sample_id": ["s1", "s1", "s1", "s2"], "position": pa.array([-1, 0, 1, 0], pa.int32()),
        "modality": ["metadata", "image", "image", "image"], "source_ref": [None, ref, missing, ref]}),
        INTERLEAVED_SCHEMA)
    with pytest.raises(MaterializeError, match="could not materialize 1 image rows; first: sample 's1' position 1"):
        InterleavedParquetWriter(tmp_path / "strict").write(table)
    with InterleavedParquetWriter(tmp_path / policy, on_materialize_error=policy) as w:
        w.write(table)
    written = pq.read_table(w.files_written[0])
    images = written.filter(pc.equal(written.column("modality"), "image"))
    assert images.num_rows == kept_images
    assert len(set(written.column("sample_id").to_pylist())) == kept_samples
    assert b"PNGDATA" in images.column("binary_content").to_pylist()


def test_parquet_reader_projection_nulls_and_byte_batches(shards, tmp_path):
    with InterleavedParquetWriter(tmp_path / "pq") as w:
        for batch in InterleavedWebdatasetReader(shards):
            w.write(batch)
    extra = pa.table({"sample_id": ["z", "z"], "position": pa.array([-1, 0], pa.int32()),
                      "modality": ["metadata", "text"], "text_content": ["{}", "zzz"], "only_here": ["yes", None]})
    pq.write_table(align_table(extra, pa.schema([*INTERLEAVED_SCHEMA, pa.field("only_here", pa.string())])),
                   tmp_path / "pq" / "part-09999.parquet")
    everything = InterleavedParquetReader(tmp_path / "pq").read()
    assert everything.table.column("only_here").null_count == everything.num_rows - 1
    projected = InterleavedParquetReader(tmp_path / "pq", fields=["score"]).read()
    assert "url" not in projected.table.column_names and "score" in projected.table.column_names
    batches = list(InterleavedParquetReader(tmp_path / "pq", max_batch_bytes=20_000))
    assert len(batches) > 2
    assert _sample_ids_in_one_batch_each(batches) == 25
    assert all(str(f).endswith(".parquet") for batch in batches for f in batch.source_files)


@pytest.mark.parametrize("storage_format", ["arrow", "parquet"])
def test_interleaved_builder_serves_documents(shards, tmp_path, storage_format):
    ds = sds.load_dataset("interleaved", split="train", data_files=str(shards[0].parent / "*.tar"),
                          storage_format=storage_format)
    assert len(ds) == 24
    doc = ds[0]
    assert doc["sample_id"] == "doc000000" and len(doc["texts"]) == len(doc["images"])
    kinds = [(t is not None, i is not None) for t, i in zip(doc["texts"], doc["images"])]
    assert all(a != b for a, b in kinds)  # every slot holds exactly one item
    frames = [i for i in doc["images"] if i is not None]
    assert all(f.shape == (32, 32, 3) and f.dtype == np.uint8 for f in frames)
    assert len(frames) == sum(1 for t in doc["texts"] if t is None)
    assert json.loads(doc["metadata"])["url"] == "https://example.org/doc000000"
    with InterleavedParquetWriter(tmp_path / "pq") as w:
        for batch in InterleavedWebdatasetReader(shards):
            w.write(batch)
    from_parquet = sds.load_dataset("interleaved", split="train", data_files=str(tmp_path / "pq" / "*.parquet"))
    assert from_parquet[5]["texts"] == ds[5]["texts"]


def test_materialize_mixes_local_and_fsspec_paths(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    local = write_tar(tmp_path / "local.tar", [("a.json", b"{}"), ("a.png", b"LOCALPNG")])
    with fsspec.open("memory://bucket/remote.bin", "wb") as fh:
        fh.write(b"xxxxREMOTEPNGyyyy")
    table = align_table(pa.table({
        "sample_id": ["a", "a", "b"], "position": pa.array([-1, 0, 0], pa.int32()),
        "modality": ["metadata", "image", "image"],
        "source_ref": [None, build_source_ref(str(local), "a.png", 1536, 8),
                       build_source_ref("memory://bucket/remote.bin", None, 4, 9)]}), INTERLEAVED_SCHEMA)
    with InterleavedParquetWriter(tmp_path / "out") as writer:
        writer.write(table)
    written = pq.read_table(writer.files_written[0])
    assert _images(InterleavedBatch(written)).column("binary_content").to_pylist() == [b"LOCALPNG", b"REMOTEPNG"]


@pytest.mark.parametrize("tar_format", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_tar_index_agrees_with_tarfile(tmp_path, tar_format):
    from stable_datasets.interleaved.tar_format import TarFormatError, iter_tar

    path = tmp_path / "t.tar"
    long_name = "deep/" * 30 + "member.json" if tar_format != tarfile.USTAR_FORMAT else "folder/" * 12 + "m.json"
    with tarfile.open(path, "w", format=tar_format) as tar:
        for name, data in [("a.json", b"{}"), (long_name, b"x" * 700), ("dir/ünï.png", b"\x89PNG" * 100)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        directory = tarfile.TarInfo("just-a-dir")
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
    data = path.read_bytes()
    ours = [(m.name, m.offset_data, m.size) for m in iter_tar(path, memoryview(data))]
    with tarfile.open(path) as tar:
        theirs = [(m.name, m.offset_data, m.size) for m in tar if m.isfile()]
    assert ours == theirs
    broken = bytearray(data)
    broken[10] ^= 0xFF  # inside the first header's name
    with pytest.raises(TarFormatError, match="bad header checksum"):
        list(iter_tar(path, memoryview(bytes(broken))))


def test_tar_writer_output_reads_back_with_tarfile(tmp_path):
    from stable_datasets.interleaved.tar_format import TarWriter

    long_name = "k" * 150 + ".json"
    members = [("short.json", b"{}"), (long_name, b"x" * 513), ("empty.png", b"")]
    writer = TarWriter(open(tmp_path / "w.tar", "wb"))  # noqa: SIM115
    for name, data in members:
        writer.add(name, data)
    writer.close()
    with tarfile.open(tmp_path / "w.tar") as tar:
        assert [(m.name, tar.extractfile(m).read()) for m in tar] == members


# -- NeMo Curator compatibility: their inputs and expected values --------------------------------
# (tests/stages/interleaved/test_multimodal_reader.py and test_multimodal_writer.py in NVIDIA-NeMo/Curator)
def _multi_frame_tiff(n_frames, width=64, height=48):
    """Frames of distinct solid colours and sizes (width + i, height + i), as Curator's tests build them."""
    frames = [np.full((height + i, width + i, 3), ((160 + 50 * i) % 256, (80 + 30 * i) % 256, (40 * i) % 256),
                      np.uint8) for i in range(n_frames)]
    return cv2.imencodemulti(".tiff", frames)[1].tobytes()


def _frames(data):
    ok, frames = cv2.imdecodemulti(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    assert ok
    return frames


def _doc_tar(path, payload, json_name="sample.json", **members):
    return write_tar(path, [(json_name, json.dumps(payload).encode()), *members.items()])


def _rows(batch, modality):
    t = batch.table
    return t.filter(pc.equal(t.column("modality"), modality)).to_pylist()


def test_curator_tiff_tokens_select_frames_one_row_each(tmp_path):
    tiff = _multi_frame_tiff(3)
    payload = {"pdf_name": "doc.pdf", "texts": ["text_0", None, None], "images": [None, "page_1_img", "page_2_img"]}
    path = write_tar(tmp_path / "tiff-frames.tar",
                     [("sample.json", json.dumps(payload).encode()), ("doc.pdf.tiff", tiff)])
    reader = InterleavedWebdatasetReader(path, sample_id_field="pdf_name", image_extensions=(".tiff",),
                                         materialize_on_read=True)
    images = _rows(reader.read(), "image")
    assert [(r["position"], parse_source_ref(r["source_ref"])["frame_index"]) for r in images] == [(1, 0), (2, 1)]
    whole = _frames(tiff)
    for k, row in enumerate(images):
        alone = _frames(row["binary_content"])
        assert len(alone) == 1 and len(row["binary_content"]) < len(tiff) and row["materialize_error"] is None
        assert alone[0].shape == (48 + k, 64 + k, 3) and np.array_equal(alone[0], whole[k])
    # lazily read, then materialized by a writer: the same single frames
    with InterleavedParquetWriter(tmp_path / "pq") as writer:
        writer.write(InterleavedWebdatasetReader(path, sample_id_field="pdf_name").read())
    written = _rows(InterleavedParquetReader(tmp_path / "pq").read(), "image")
    assert [r["binary_content"] for r in written] == [r["binary_content"] for r in images]


def test_curator_tiff_frame_index_with_fake_bytes_and_out_of_range(tmp_path):
    payload = {"pdf_name": "doc.pdf", "texts": ["text1", "text2", "text3"],
               "images": [None, "page_0_image_15", "page_1_image_22"]}
    path = write_tar(tmp_path / "sub.tar",
                     [("sample.json", json.dumps(payload).encode()), ("doc.pdf.tiff", b"TIFF_DATA")])
    batch = InterleavedWebdatasetReader(path, sample_id_field="pdf_name", image_extensions=(".tiff",)).read()
    refs = [parse_source_ref(r["source_ref"]) for r in _rows(batch, "image")]
    assert [(r["member"], r["frame_index"]) for r in refs] == [("doc.pdf.tiff", 0), ("doc.pdf.tiff", 1)]
    assert [r["position"] for r in _rows(batch, "image")] == [1, 2]
    assert [r["position"] for r in _rows(batch, "text")] == [0, 1, 2]
    one = _multi_frame_tiff(1)
    payload = {"pdf_name": "doc.pdf", "texts": [None, None], "images": ["frame_0", "frame_1_oob"]}
    path = write_tar(tmp_path / "oob.tar", [("sample.json", json.dumps(payload).encode()), ("doc.pdf.tiff", one)])
    good, bad = _rows(InterleavedWebdatasetReader(path, sample_id_field="pdf_name", image_extensions=(".tiff",),
                                                  materialize_on_read=True).read(), "image")
    assert good["materialize_error"] is None and len(_frames(good["binary_content"])) == 1
    assert bad["binary_content"] == one  # the whole file is kept, with the reason
    assert "cannot extract frame 1 from" in bad["materialize_error"] and "no such frame" in bad["materialize_error"]


def test_curator_tokens_name_any_member_and_dotted_json_extensions(tmp_path):
    payload = {"doc_id": "doc-custom", "source_doc": "custom.pdf", "captions": ["a", "b"],
               "frames": ["custom-image.jpg"], "primary_image": "custom-image.jpg", "p_hash": "abc123"}
    path = write_tar(tmp_path / "alt-shard-00000.tar", [("sample-xyz.meta.json", json.dumps(payload).encode()),
                                                   ("custom-image.jpg", b"custom-image-bytes")])
    for extensions in [(".meta.json",), (".json",), ("json",)]:
        batch = InterleavedWebdatasetReader(path, sample_id_field="doc_id", texts_field="captions",
                                            images_field="frames", image_member_field="primary_image",
                                            json_extensions=extensions, materialize_on_read=True,
                                            fields=("p_hash",)).read()
        assert set(batch.table.column("sample_id").to_pylist()) == {"doc-custom"}, extensions
        assert [r["text_content"] for r in _rows(batch, "text")] == ["a", "b"]
        (image,) = _rows(batch, "image")
        assert image["binary_content"] == b"custom-image-bytes" and image["p_hash"] is None
        assert _rows(batch, "metadata")[0]["p_hash"] == "abc123"
    key_from_name = InterleavedWebdatasetReader(path, json_extensions=(".meta.json",)).read()
    assert key_from_name.table.column("sample_id")[0].as_py() == "sample-xyz"
    a, b = _multi_frame_tiff(2, width=30, height=20), _multi_frame_tiff(3, width=50, height=40)
    payload = {"pdf_name": "doc.pdf", "texts": [None, None, None, None],
               "images": ["a.tiff", "a.tiff", "b.tiff", "b.tiff"]}
    path = write_tar(tmp_path / "multi-tiff.tar", [("sample.json", json.dumps(payload).encode()), ("a.tiff", a),
                                              ("b.tiff", b)])
    batch = InterleavedWebdatasetReader(path, sample_id_field="pdf_name", image_extensions=(".tiff",)).read()
    refs = [parse_source_ref(r["source_ref"]) for r in _rows(batch, "image")]
    assert [(r["member"], r["frame_index"]) for r in refs] == [("a.tiff", 0), ("a.tiff", 1), ("b.tiff", 0),
                                                                ("b.tiff", 1)]
    payload = {"doc_id": "doc-ct", "captions": ["hello"], "frames": ["token.png"], "primary_image": "fallback.jpg"}
    path = write_tar(tmp_path / "ct.tar", [("sample.meta.json", json.dumps(payload).encode()), ("token.png", b"png"),
                                      ("fallback.jpg", b"jpg")])
    batch = InterleavedWebdatasetReader(path, sample_id_field="doc_id", texts_field="captions", images_field="frames",
                                        image_member_field="primary_image", json_extensions=(".meta.json",)).read()
    assert _rows(batch, "image")[0]["content_type"] == "image/png"


def test_no_documents_in_a_tar_is_said(tmp_path, warnings_logged):
    path = write_tar(tmp_path / "t.tar", [("a.meta", b"{}"), ("a.jpg", b"x")])
    assert InterleavedWebdatasetReader(path).read().num_rows == 0
    assert any("no document" in m and "a.meta" not in m and ".json" in m for m in warnings_logged)


def test_curator_per_item_fields_follow_the_kth_non_none_item(tmp_path, warnings_logged):
    payload = {"pdf_name": "doc.pdf", "texts": ["hello", None, "world"], "images": [None, "img_token", None],
               "text_scores": [0.95, 0.42], "image_metadata": [{"height": 100, "width": 200}],
               "url": "https://example.com"}
    path = _doc_tar(tmp_path / "per.tar", payload, **{"image.jpg": b"abc"})
    batch = InterleavedWebdatasetReader(path, per_text_fields=("text_scores",),
                                        per_image_fields=("image_metadata",)).read()
    assert [(r["text_content"], r["text_scores"]) for r in _rows(batch, "text")] == [("hello", 0.95),
                                                                                     ("world", 0.42)]
    assert [r["image_metadata"] for r in _rows(batch, "image")] == ['{"height": 100, "width": 200}']
    meta = _rows(batch, "metadata")[0]
    assert meta["url"] == "https://example.com" and meta["text_scores"] is None and meta["image_metadata"] is None
    payload["text_scores"] = [0.95]  # one short: the second text gets null, and it is said
    batch = InterleavedWebdatasetReader(_doc_tar(tmp_path / "short.tar", payload),
                                        per_text_fields=("text_scores",)).read()
    assert [r["text_scores"] for r in _rows(batch, "text")] == [0.95, None]
    assert any("'text_scores' has 1 values" in m for m in warnings_logged)
    payload["image_metadata"] = "not-a-list"
    with pytest.raises(InterleavedReadError, match="field 'image_metadata' must be a list, got str"):
        InterleavedWebdatasetReader(_doc_tar(tmp_path / "bad.tar", payload),
                                    per_image_fields=("image_metadata",)).read()


def test_curator_passthrough_keeps_json_types(tmp_path):
    payload = {"doc_id": "doc-all", "source_doc": "all.pdf", "captions": ["hello"], "frames": ["image.jpg"],
               "primary_image": "image.jpg", "p_hash": "phash-1", "score": 0.91, "aux": {"page": 3}}
    path = _doc_tar(tmp_path / "all.tar", payload, "sample.meta.json", **{"image.jpg": b"abc"})
    batch = InterleavedWebdatasetReader(path, sample_id_field="doc_id", texts_field="captions",
                                        images_field="frames", image_member_field="primary_image",
                                        json_extensions=(".meta.json",)).read()
    meta = _rows(batch, "metadata")[0]
    assert meta["p_hash"] == "phash-1" and meta["score"] == 0.91 and meta["aux"] == '{"page": 3}'
    assert batch.table.schema.field("score").type == pa.float64()
    assert "captions" not in batch.table.column_names and "frames" not in batch.table.column_names


def _curator_rows(*rows):
    """Rows the way Curator's make_row builds them: every reserved column, plus extra columns."""
    base = dict.fromkeys([*INTERLEAVED_SCHEMA.names, *(k for r in rows for k in r)])
    return InterleavedBatch(pa.Table.from_pylist([{**base, **r} for r in rows]))


def _written_json(writer):
    with tarfile.open(writer.files_written[0]) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}


def test_curator_writer_keeps_per_row_fields_ids_and_numbers(tmp_path):
    png = b"\x89PNG\r\n"
    batch = _curator_rows(
        {"sample_id": "s1", "position": -1, "modality": "metadata", "url": "http://example.com", "score": 0.91},
        {"sample_id": "s1", "position": 0, "modality": "text", "text_content": "intro text"},
        *[{"sample_id": "s1", "position": p, "modality": "image", "content_type": "image/png", "binary_content": png,
           "image_alt_text": alt} for p, alt in [(1, "a cat on a chair"), (2, None), (3, "a dog in a park")]])
    with InterleavedWebdatasetWriter(tmp_path / "img", materialize_on_write=False) as writer:
        writer.write(batch)
    members = _written_json(writer)
    payload = json.loads(members["s1.json"])
    assert payload["image_alt_text"] == ["a cat on a chair", None, "a dog in a park"]
    assert payload["url"] == "http://example.com" and payload["score"] == 0.91 and payload["sample_id"] == "s1"
    assert payload["images"] == [None, "s1.1.png", "s1.2.png", "s1.3.png"] and members["s1.2.png"] == png
    back = InterleavedWebdatasetReader(writer.files_written, sample_id_field="sample_id",
                                       per_image_fields=("image_alt_text",)).read()
    assert [r["image_alt_text"] for r in _rows(back, "image")] == ["a cat on a chair", None, "a dog in a park"]
    assert _rows(back, "metadata")[0]["score"] == 0.91

    batch = _curator_rows(
        {"sample_id": "s1", "position": -1, "modality": "metadata"},
        *[{"sample_id": "s1", "position": p, "modality": "text", "text_content": t, "text_confidence": c}
          for p, t, c in [(0, "first paragraph", 0.95), (1, "second paragraph", None), (2, "third paragraph", 0.72)]])
    with InterleavedWebdatasetWriter(tmp_path / "txt", materialize_on_write=False) as writer:
        writer.write(batch)
    assert json.loads(_written_json(writer)["s1.json"])["text_confidence"] == [0.95, None, 0.72]
    back = InterleavedWebdatasetReader(writer.files_written, sample_id_field="sample_id",
                                       per_text_fields=("text_confidence",)).read()
    assert [r["text_confidence"] for r in _rows(back, "text")] == [0.95, None, 0.72]

    batch = _curator_rows(
        {"sample_id": "s1", "position": -1, "modality": "metadata"},
        {"sample_id": "s1", "position": 0, "modality": "text", "text_content": "intro", "confidence": "text_conf_A"},
        {"sample_id": "s1", "position": 1, "modality": "image", "content_type": "image/png", "binary_content": png,
         "confidence": "img_conf_B"},
        {"sample_id": "s1", "position": 2, "modality": "text", "text_content": "outro"})
    with InterleavedWebdatasetWriter(tmp_path / "mixed", materialize_on_write=False) as writer:
        writer.write(batch)
    assert json.loads(_written_json(writer)["s1.json"])["confidence"] == ["text_conf_A", "img_conf_B", None]
    meta = _rows(InterleavedWebdatasetReader(writer.files_written, sample_id_field="sample_id").read(), "metadata")
    assert json.loads(meta[0]["confidence"]) == ["text_conf_A", "img_conf_B", None]

    alt = ["北极熊", None, "الدب القطبي"]
    batch = _curator_rows({"sample_id": "a/b:c.d", "position": -1, "modality": "metadata"},
                          *[{"sample_id": "a/b:c.d", "position": p, "modality": "image", "content_type": "image/png",
                             "binary_content": png, "image_alt_text": a} for p, a in enumerate(alt)])
    with InterleavedWebdatasetWriter(tmp_path / "utf8", materialize_on_write=False) as writer:
        writer.write(batch)
    raw = _written_json(writer)["a%2Fb%3Ac.d.json"]
    assert "\\u" not in raw.decode() and "北极熊".encode() in raw
    back = InterleavedWebdatasetReader(writer.files_written, sample_id_field="sample_id",
                                       per_image_fields=("image_alt_text",)).read()
    assert set(back.table.column("sample_id").to_pylist()) == {"a/b:c.d"}
    assert [r["image_alt_text"] for r in _rows(back, "image")] == alt


def test_round_trip_restores_json_structures_and_edits(shards, tmp_path):
    batch = InterleavedWebdatasetReader(shards[:1], per_image_fields=()).read()
    table = batch.table
    score = table.schema.get_field_index("score")
    meta = pc.equal(table.column("modality"), "metadata")
    table = table.set_column(score, "score", pc.if_else(meta, pa.scalar(0.5), table.column("score")))
    with InterleavedWebdatasetWriter(tmp_path / "out") as writer:
        writer.write(InterleavedBatch(table))
    raw = next(d for n, d in _written_json(writer).items() if n.endswith(".json"))
    record = json.loads(raw)
    assert record["score"] == 0.5 and isinstance(record["tags"], list)  # the edit is kept, the list is a list again


def test_curator_keys_with_dots_are_separate_documents(tmp_path):
    from urllib.parse import quote

    members = []
    for sample_id in ["doc.1", "doc.2", "doc", "a/b c.d"]:
        key = quote(sample_id, safe="")  # how Curator's writer names members
        payload = {"sample_id": sample_id, "texts": [sample_id, None], "images": [None, f"{key}.1.jpg"]}
        members += [(f"{key}.json", json.dumps(payload).encode()), (f"{key}.1.jpg", sample_id.encode())]
    path = write_tar(tmp_path / "curator.tar", members)
    for sample_id_field in (None, "sample_id"):
        batch = InterleavedWebdatasetReader(path, sample_id_field=sample_id_field, materialize_on_read=True).read()
        assert [(r["sample_id"], r["binary_content"]) for r in _rows(batch, "image")] == [
            ("doc.1", b"doc.1"), ("doc.2", b"doc.2"), ("doc", b"doc"), ("a/b c.d", b"a/b c.d")]
        assert [r["text_content"] for r in _rows(batch, "text")] == ["doc.1", "doc.2", "doc", "a/b c.d"]
    assert unescape_key("50%off") == "50%off"  # a '%' that escapes nothing stays


def test_curator_texts_not_a_list_give_no_text_rows(tmp_path, warnings_logged):
    # NeMo Curator's test_reader_non_list_field: a texts (or images) field that is no list reads as no items
    path = _doc_tar(tmp_path / "s.tar", {"pdf_name": "doc.pdf", "texts": "not a list", "images": []})
    assert [r["modality"] for r in InterleavedWebdatasetReader(path).read().table.to_pylist()] == ["metadata"]
    assert any("s.tar:sample.json" in m and "field 'texts' is a str, not a list" in m for m in warnings_logged)
    path = _doc_tar(tmp_path / "n.tar", {"pdf_name": "doc.pdf", "texts": ["hello"], "images": None})
    assert [r["modality"] for r in InterleavedWebdatasetReader(path).read().table.to_pylist()] == ["metadata", "text"]


def test_curator_no_materialize_on_write_leaves_lazy_rows_null(tmp_path):
    batch = _curator_rows({"sample_id": "s1", "position": 0, "modality": "image", "content_type": "image/jpeg",
                           "source_ref": build_source_ref("/fake/img.jpg")})
    with InterleavedParquetWriter(tmp_path / "pq", materialize_on_write=False) as writer:
        writer.write(batch)
    written = pq.read_table(writer.files_written[0]).to_pylist()
    assert written[0]["binary_content"] is None and written[0]["materialize_error"] is None
    with InterleavedWebdatasetWriter(tmp_path / "tar", materialize_on_write=False) as writer:
        writer.write(batch)
    members = _written_json(writer)
    assert list(members) == ["s1.json"] and json.loads(members["s1.json"])["images"] == ["s1.0.jpg"]
    with pytest.raises(MaterializeError, match="could not materialize 1 image rows"):
        InterleavedParquetWriter(tmp_path / "strict").write(batch)


def test_parquet_writer_schema_and_overrides(shards, tmp_path):
    batch = InterleavedWebdatasetReader(shards[:1]).read()
    with InterleavedParquetWriter(tmp_path / "o", schema_overrides={"score": pa.string()}) as writer:
        writer.write(batch)
    written = pq.read_table(writer.files_written[0])
    assert written.schema.field("score").type == pa.string() and "url" in written.column_names
    scores = [v for v in batch.table.column("score").to_pylist() if v is not None]
    assert [v for v in written.column("score").to_pylist() if v is not None] == [str(v) for v in scores]
    exact = pa.schema([*INTERLEAVED_SCHEMA, pa.field("url", pa.large_string())])
    with InterleavedParquetWriter(tmp_path / "s", schema=exact) as writer:
        writer.write(batch)
    assert pq.read_schema(writer.files_written[0]).names == exact.names
    with pytest.raises(SchemaError, match="column 'score' cannot be cast from double to int8"):
        InterleavedParquetWriter(tmp_path / "bad", schema_overrides={"score": pa.int8()}).write(batch)


def test_requested_fields_absent_everywhere_are_null(shards, tmp_path, warnings_logged):
    with InterleavedParquetWriter(tmp_path / "pq") as writer:
        writer.write(InterleavedWebdatasetReader(shards[:1]).read())
    batch = InterleavedParquetReader(tmp_path / "pq", fields=("nonexistent_field", "url")).read()
    assert batch.table.column("nonexistent_field").null_count == batch.num_rows
    assert "url" in batch.table.column_names and "score" not in batch.table.column_names
    assert any("'nonexistent_field'" in m and "filling with null" in m for m in warnings_logged)
    payload = {"pdf_name": "doc.pdf", "texts": ["t"], "images": []}
    batch = InterleavedWebdatasetReader(_doc_tar(tmp_path / "m.tar", payload), fields=("p_hash",)).read()
    assert batch.table.column("p_hash").to_pylist() == [None, None]
    assert any("Requested fields not found in source sample: 'p_hash'" in m for m in warnings_logged)
    empty = write_tar(tmp_path / "empty.tar", [("image.jpg", b"abc")])
    assert "p_hash" in InterleavedWebdatasetReader(empty, fields=("p_hash",)).read().table.column_names
    assert reconcile_schema(pa.schema([("score", pa.int32())])) == reconcile_schema([pa.schema([("score",
                                                                                                 pa.int32())])])


def test_frame_refs_on_other_images_and_damaged_tiffs(tmp_path):
    import subprocess
    import sys

    from stable_datasets.interleaved.materialize import tiff_frame

    png = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1].tobytes()
    path = write_tar(tmp_path / "p.tar", [("s.json", b"{}"), ("s.tif", png)])
    refs = [build_source_ref(str(path), "s.tif", 1536, len(png), k) for k in (0, 1)]
    table = align_table(pa.table({"sample_id": ["s", "s"], "position": pa.array([0, 1], pa.int32()),
                                  "modality": ["image", "image"], "source_ref": refs}), INTERLEAVED_SCHEMA)
    first, second = materialize(table, "warn").to_pylist()
    assert first["binary_content"] == png and first["materialize_error"] is None  # one image is its own frame 0
    assert "not a TIFF, so it has one frame" in second["materialize_error"]
    with pytest.raises(MaterializeError, match="cannot extract frame 0 from x: not an image"):
        tiff_frame(b"not-an-image", 0, "x")
    # MINT-1T PDFs are JPEG-compressed TIFFs: a cut RGBA frame keeps every decoded pixel and the alpha
    rgba = [np.full((32, 32, 4), ((150 + 30 * i) % 256, (100 + 40 * i) % 256, (50 * i) % 256, 255), np.uint8)
            for i in range(2)]
    jpeg_in_tiff = cv2.imencodemulti(".tiff", rgba, [cv2.IMWRITE_TIFF_COMPRESSION, 7])[1].tobytes()
    for k, frame in enumerate(_frames(jpeg_in_tiff)):
        (alone,) = _frames(tiff_frame(jpeg_in_tiff, k, "x"))
        assert alone.shape == (32, 32, 4) and np.array_equal(alone, frame)
    # damaged TIFFs: every outcome is a value or a materialize_error, never a crash of the process
    tiff = bytearray(_multi_frame_tiff(3))
    rng = np.random.default_rng(0)
    (tmp_path / "damaged").mkdir()
    for n in range(40):
        copy = bytearray(tiff)
        for at in rng.integers(4, len(copy), size=1 + n % 4):
            copy[at] ^= 0xFF
        (tmp_path / "damaged" / f"{n}.tif").write_bytes(bytes(copy[: len(copy) - (n % 3) * 100]))
    script = f"""
import pathlib
from stable_datasets.interleaved.materialize import MaterializeError, tiff_frame
for path in sorted(pathlib.Path({str(tmp_path / "damaged")!r}).iterdir()):
    for k in range(4):
        try:
            tiff_frame(path.read_bytes(), k, str(path))
        except MaterializeError:
            pass
print("done")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]


def test_integer_and_float_json_numbers_meet_as_float64(tmp_path):
    big = _doc_tar(tmp_path / "a.tar", {"texts": ["x"], "score": 2**53 + 1})
    floats = _doc_tar(tmp_path / "b.tar", {"texts": ["y"], "score": 0.5}, "other.json")
    with pytest.raises(SchemaError, match=r"column 'score' cannot be cast from int64 to double: Integer value "
                                          r"9007199254740993 not in range"):
        InterleavedWebdatasetReader([big, floats]).read()  # never a float that silently drops digits
    ints = _doc_tar(tmp_path / "c.tar", {"texts": ["x"], "score": 1})
    batch = InterleavedWebdatasetReader([ints, floats]).read()
    assert batch.table.schema.field("score").type == pa.float64()
    assert [r["score"] for r in _rows(batch, "metadata")] == [1.0, 0.5]
