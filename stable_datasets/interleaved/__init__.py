"""Interleaved image-text documents: WebDataset tars <-> Parquet <-> caches."""

from stable_datasets.interleaved.batch import InterleavedBatch
from stable_datasets.interleaved.keys import escape_key, split_member, unescape_key
from stable_datasets.interleaved.materialize import MaterializeError, materialize
from stable_datasets.interleaved.parquet_reader import InterleavedParquetReader
from stable_datasets.interleaved.schema import (
    INTERLEAVED_SCHEMA,
    MODALITIES,
    RESERVED_COLUMNS,
    SchemaError,
    align_table,
    build_source_ref,
    parse_source_ref,
    reconcile_schema,
    resolve_schema,
)
from stable_datasets.interleaved.webdataset_reader import InterleavedReadError, InterleavedWebdatasetReader
from stable_datasets.interleaved.writers import InterleavedParquetWriter, InterleavedWebdatasetWriter

__all__ = [
    "INTERLEAVED_SCHEMA", "MODALITIES", "RESERVED_COLUMNS", "InterleavedBatch", "InterleavedParquetReader",
    "InterleavedParquetWriter", "InterleavedReadError", "InterleavedWebdatasetReader", "InterleavedWebdatasetWriter",
    "MaterializeError", "SchemaError", "align_table", "build_source_ref", "escape_key", "materialize",
    "parse_source_ref", "reconcile_schema", "resolve_schema", "split_member", "unescape_key",
]
