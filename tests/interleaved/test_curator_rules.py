"""NeMo Curator's interleaved schema and reader rules (issue 25 items 6-7).

Inputs, expected values and message fragments are those of Curator's
tests/stages/interleaved/test_schema_utils.py and test_multimodal_reader.py (reserved fields,
missing fields, per-modality fields, non-list fields, max_batch_bytes, empty inputs), and of
its WebDataset writer (member keys are `quote(sample_id, safe="")`).
"""

from __future__ import annotations

import json
import tarfile
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from stable_datasets.interleaved import (
    INTERLEAVED_SCHEMA,
    RESERVED_COLUMNS,
    InterleavedBatch,
    InterleavedParquetReader,
    InterleavedParquetWriter,
    InterleavedWebdatasetReader,
    InterleavedWebdatasetWriter,
    SchemaError,
    align_table,
    build_source_ref,
    reconcile_schema,
    resolve_schema,
)
from tests.fixtures.tars import write_tar

_BASE = [pa.field("sample_id", pa.string()), pa.field("position", pa.int32()), pa.field("modality", pa.string())]




def _doc(path, payload, name="sample.json"):
    return write_tar(path, {name: json.dumps(payload).encode()})


def _count(batch, modality):
    return pc.sum(pc.equal(batch.table.column("modality"), modality)).as_py() or 0


# -- resolve_schema / reconcile_schema / align_table (test_schema_utils.py) -------------------------
def test_resolve_schema(warnings_logged):
    assert resolve_schema(None, None) is None and resolve_schema() is None
    result = resolve_schema(None, {"url": pa.string(), "text_content": pa.large_string()})
    assert all(result.get_field_index(n) >= 0 for n in RESERVED_COLUMNS)
    assert result.field("url").type == pa.string() and result.field("text_content").type == pa.large_string()
    assert result.field("sample_id").nullable is False and result.field("url").nullable is True
    assert resolve_schema(schema_overrides={"url": pa.string()}) == resolve_schema(None, {"url": pa.string()})
    custom = pa.schema([pa.field("sample_id", pa.string())])
    assert resolve_schema(custom, {"extra": pa.float64()}) == custom
    assert any("schema_overrides ignored" in m for m in warnings_logged)
    with pytest.raises(SchemaError, match=r"reserved columns \['position'\] have fixed types"):
        resolve_schema(None, {"position": pa.int64()})


def test_reconcile_schema():
    large = reconcile_schema(pa.schema([*_BASE, pa.field("text_content", pa.large_string())]))
    assert large.field("text_content").type == pa.large_string()  # never downcast
    tag = reconcile_schema(pa.schema([*_BASE, pa.field("tag", pa.dictionary(pa.int8(), pa.string()))]))
    assert tag.field("tag").type == pa.string()
    position = reconcile_schema(pa.schema([pa.field("sample_id", pa.string()), pa.field("position", pa.int64()),
                                           pa.field("modality", pa.string())]))
    assert position.field("position").type == pa.int32()
    assert reconcile_schema(pa.schema(_BASE)) == INTERLEAVED_SCHEMA


def test_align_table():
    filled = align_table(pa.table({"sample_id": pa.array(["s1"], type=pa.string())}), INTERLEAVED_SCHEMA)
    assert filled.schema == INTERLEAVED_SCHEMA and filled.column("binary_content").null_count == 1
    target = pa.schema([pa.field("sample_id", pa.string()), pa.field("score", pa.float64())])
    table = pa.table({"sample_id": ["s1"], "score": pa.array([0.5], type=pa.float32()), "extra": ["drop"]})
    result = align_table(table, target)
    assert result.schema.names == ["sample_id", "score"] and result.schema.field("score").type == pa.float64()
    # reserved columns: large -> small allowed (unchecked, as Curator); the user's target is not reconciled
    small = pa.schema([pa.field("sample_id", pa.string()), pa.field("text_content", pa.string())])
    big = pa.table({"sample_id": ["s"], "text_content": pa.array(["t"], pa.large_string())})
    assert align_table(big, small).schema == small
    keep = pa.schema([pa.field("sample_id", pa.string()), pa.field("text_content", pa.large_string())])
    assert align_table(pa.table({"sample_id": ["s"], "text_content": ["t"]}), keep).schema == keep
    # passthrough columns: checked casts, a value that does not fit names the column
    assert align_table(pa.table({"n": pa.array([1], pa.int64())}), pa.schema([("n", pa.int8())]))["n"].to_pylist() \
        == [1]
    with pytest.raises(SchemaError, match="column 'n' cannot be cast from int64 to int8"):
        align_table(pa.table({"n": pa.array([300], pa.int64())}), pa.schema([("n", pa.int8())]))


# -- WebDataset reader (test_multimodal_reader.py) -----------------------------------------------
PAYLOAD = {"pdf_name": "doc.pdf", "texts": ["t"], "images": []}


def test_fields_reserved_key_raises(tmp_path):
    path = _doc(tmp_path / "reserved_key.tar", PAYLOAD)
    with pytest.raises(ValueError, match="fields contains reserved keys"):
        InterleavedWebdatasetReader(path, fields=("sample_id",)).read()


def test_fields_missing_key_warns_and_fills_none(tmp_path, warnings_logged):
    batch = InterleavedWebdatasetReader(_doc(tmp_path / "missing_key.tar", PAYLOAD), fields=("p_hash",)).read()
    meta = batch.table.filter(pc.equal(batch.table.column("modality"), "metadata")).to_pylist()[0]
    assert "p_hash" in batch.table.column_names and meta["p_hash"] is None
    assert any("Requested fields not found in source sample" in m for m in warnings_logged)


def test_per_modality_fields(tmp_path, warnings_logged):
    missing = _doc(tmp_path / "missing-per-field.tar", {"pdf_name": "doc.pdf", "texts": ["hello"], "images": []})
    assert InterleavedWebdatasetReader(missing, per_image_fields=("image_metadata",)).read().num_rows > 0
    assert any("per-modality field 'image_metadata' not found in source sample" in m for m in warnings_logged)
    not_list = _doc(tmp_path / "non-list-field.tar", {**PAYLOAD, "image_metadata": "not-a-list"})
    with pytest.raises(TypeError, match="must be a list"):
        InterleavedWebdatasetReader(not_list, per_image_fields=("image_metadata",)).read()


@pytest.mark.parametrize(("payload", "modality"), [
    ({"pdf_name": "doc.pdf", "texts": "not a list", "images": []}, "text"),
    ({"pdf_name": "doc.pdf", "texts": ["hello"], "images": None}, "image")])
def test_non_list_texts_or_images_give_no_rows(tmp_path, payload, modality):
    batch = InterleavedWebdatasetReader(_doc(tmp_path / "shard.tar", payload)).read()
    assert _count(batch, modality) == 0 and _count(batch, "metadata") == 1


def test_max_batch_bytes_splits_and_empty_inputs(tmp_path):
    for sample_id in ("doc1", "doc2"):
        write_tar(tmp_path / f"{sample_id}.tar", {f"{sample_id}.json": json.dumps(
            {"pdf_name": f"{sample_id}.pdf", "texts": ["text"], "images": []}).encode()})
    batches = list(InterleavedWebdatasetReader([tmp_path / "doc1.tar", tmp_path / "doc2.tar"], max_batch_bytes=1))
    assert len(batches) == 2
    assert [set(b.table.column("sample_id").to_pylist()) for b in batches] == [{"doc1"}, {"doc2"}]
    assert [len(b.source_files) for b in batches] == [1, 1]
    empty = InterleavedWebdatasetReader([]).read()
    assert empty.num_rows == 0 and set(INTERLEAVED_SCHEMA.names) <= set(empty.table.column_names)
    empty = InterleavedParquetReader([]).read()
    assert empty.num_rows == 0 and set(INTERLEAVED_SCHEMA.names) <= set(empty.table.column_names)


def _rows(*rows):
    return InterleavedBatch(pa.Table.from_pylist(list(rows), schema=INTERLEAVED_SCHEMA))


def test_parquet_max_batch_bytes_splits_per_file(tmp_path):
    paths = []
    for name in ("doc_a", "doc_b"):
        with InterleavedParquetWriter(tmp_path / name, materialize_on_write=False) as writer:
            writer.write(_rows({"sample_id": name, "position": -1, "modality": "metadata"},
                               {"sample_id": name, "position": 0, "modality": "text", "text_content": "hi"}))
        paths.extend(writer.files_written)
    batches = list(InterleavedParquetReader(paths, max_batch_bytes=1))
    assert len(batches) == 2
    for batch, path in zip(batches, paths):
        assert set(batch.table.column("sample_id").to_pylist()) == {path.parent.name} and \
            batch.source_files == (str(path),)


def test_writer_without_materialization_keeps_null_binary_content(tmp_path):
    ref = build_source_ref(str(tmp_path / "gone.tar"), "x.png", 512, 10)
    batch = _rows({"sample_id": "s", "position": -1, "modality": "metadata"},
                  {"sample_id": "s", "position": 0, "modality": "image", "content_type": "image/png",
                   "source_ref": ref})
    with InterleavedParquetWriter(tmp_path / "pq", materialize_on_write=False) as writer:
        writer.write(batch)
    image = InterleavedParquetReader(writer.files_written).read().table.to_pylist()[1]
    assert image["binary_content"] is None and image["source_ref"] == ref and image["materialize_error"] is None


def test_tar_keys_are_curators_and_read_back_injectively(tmp_path):
    ids = ["a", "a.1", "a.1.json", "x/y:z.w", "100%", "ünï"]
    rows = [r for sid in ids for r in ({"sample_id": sid, "position": -1, "modality": "metadata"},
                                       {"sample_id": sid, "position": 0, "modality": "text", "text_content": sid})]
    with InterleavedWebdatasetWriter(tmp_path / "out") as writer:
        writer.write(_rows(*rows))
    with tarfile.open(writer.files_written[0]) as tar:
        names = tar.getnames()
    assert sorted(n for n in names if n.endswith(".json")) == sorted(f"{quote(s, safe='')}.json" for s in ids)
    back = InterleavedWebdatasetReader(writer.files_written).read().table
    texts = back.filter(pc.equal(back.column("modality"), "text"))
    assert dict(zip(texts.column("sample_id").to_pylist(), texts.column("text_content").to_pylist())) == \
        {sid: sid for sid in ids}
