"""Interleaved image-text documents from WebDataset tars or Parquet, as one document per row.

    sds.load_dataset("interleaved", split="train", data_files="shards/*.tar")

A row is `{"sample_id", "texts", "images", "metadata"}`. `texts` and `images` are aligned,
one slot per item in document order: a text or None, an image (decoded to an RGB array when
read) or None. An image token naming a multi-frame TIFF is one frame of it (the reader's
`frame_index`), materialized as that frame alone. `metadata` is the document's passthrough
fields as JSON text.
"""

from __future__ import annotations

import json

import stable_datasets as sds
from stable_datasets.builder.data_files import normalize_data_files
from stable_datasets.download.inputs import options_for
from stable_datasets.interleaved import (
    RESERVED_COLUMNS,
    InterleavedParquetReader,
    InterleavedWebdatasetReader,
    materialize,
    parse_source_ref,
)


class Interleaved(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")

    def _info(self):
        return sds.DatasetInfo(
            description="Interleaved image-text documents (MINT-1T style).",
            features=sds.Features({"sample_id": sds.Value("string"), "texts": sds.Sequence(sds.Value("string")),
                                   "images": sds.Sequence(sds.Image()), "metadata": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        splits = normalize_data_files(self.config.data_files, "interleaved", input_options=self.input_storage_options)
        return [sds.SplitGenerator(split, {"paths": paths}) for split, paths in splits.items()]

    def _generate_examples(self, paths):
        paths = [self.local_input(p) for p in paths]  # this node's copies, of the version the fingerprint identified
        tars = [p for p in paths if p.endswith(".tar")]
        parquets = [p for p in paths if p.endswith(".parquet")]
        options = {"storage_options": options_for(paths[0], self.input_storage_options)} if paths else {}
        readers = ([InterleavedWebdatasetReader(tars, **options)] if tars else []) + \
                  ([InterleavedParquetReader(parquets, **options)] if parquets else [])
        for reader in readers:
            for batch in reader:
                table = materialize(batch.table, "warn")
                for sample in type(batch)(table).samples():
                    yield self._document(sample.to_pylist())

    @staticmethod
    def _document(rows):
        meta = next((r for r in rows if r["modality"] == "metadata"), {})
        items = sorted((r for r in rows if r["modality"] != "metadata"),
                       key=lambda r: (r["position"], parse_source_ref(r.get("source_ref")).get("frame_index") or 0))
        texts = [r["text_content"] if r["modality"] == "text" else None for r in items]
        # a row whose bytes could not be read (or whose TIFF frame could not be cut) is an empty slot
        images = [r["binary_content"] if r["modality"] == "image" and not r.get("materialize_error") else None
                  for r in items]
        passthrough = {k: v for k, v in meta.items() if k not in RESERVED_COLUMNS and v is not None}
        return rows[0]["sample_id"], {"sample_id": rows[0]["sample_id"], "texts": texts, "images": images,
                                      "metadata": json.dumps(passthrough, sort_keys=True)}

