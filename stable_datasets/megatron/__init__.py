"""Megatron pretraining data: Megatron-Core's indexed `.bin`/`.idx` format, written from any source and read back
bit-exactly, and cut into Megatron-Core's GPTDataset samples and blends (docs/megatron.md).

The samples and blends (`blocks`, `blend`) are streams, whose package imports torch when installed: they load on
first use, so that reading or writing `.bin`/`.idx` files (the packed SFT readers do) never imports torch."""

import importlib

from stable_datasets.megatron.indexed import IndexedDataset, IndexedFormatError, IndexedWriter, optimal_dtype
from stable_datasets.megatron.write import write_indexed_dataset

__all__ = ["BlendError", "BlendedBlocks", "IndexedDataset", "IndexedFormatError", "IndexedWriter", "TokenBlocks",
           "blended_token_blocks", "optimal_dtype", "token_blocks", "write_indexed_dataset"]

#: names served on first use, by the module that holds them
_STREAM_NAMES = {"BlendedBlocks": "blend", "BlendError": "blend", "blended_token_blocks": "blend",
                 "TokenBlocks": "blocks", "token_blocks": "blocks"}


def __getattr__(name: str):
    if name in _STREAM_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_STREAM_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
