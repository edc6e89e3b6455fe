"""Megatron pretraining data: Megatron-Core's indexed `.bin`/`.idx` format, written from any source and read back
bit-exactly (docs/megatron.md)."""

from stable_datasets.megatron.indexed import IndexedDataset, IndexedFormatError, IndexedWriter, optimal_dtype
from stable_datasets.megatron.write import write_indexed_dataset

__all__ = ["IndexedDataset", "IndexedFormatError", "IndexedWriter", "optimal_dtype", "write_indexed_dataset"]
