"""Megatron pretraining data: Megatron-Core's indexed `.bin`/`.idx` format, written from any source and read back
bit-exactly, and cut into Megatron-Core's GPTDataset samples and blends (docs/megatron.md)."""

from stable_datasets.megatron.blend import BlendedBlocks, BlendError, blended_token_blocks
from stable_datasets.megatron.blocks import TokenBlocks, token_blocks
from stable_datasets.megatron.indexed import IndexedDataset, IndexedFormatError, IndexedWriter, optimal_dtype
from stable_datasets.megatron.write import write_indexed_dataset

__all__ = ["BlendError", "BlendedBlocks", "IndexedDataset", "IndexedFormatError", "IndexedWriter", "TokenBlocks",
           "blended_token_blocks", "optimal_dtype", "token_blocks", "write_indexed_dataset"]
