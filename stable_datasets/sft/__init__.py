"""Packed SFT: tokenize conversations, pack them, cache the packs, serve Megatron batches."""

from stable_datasets.sft.builder import ChatSFTBuilder, ChatSFTConfig
from stable_datasets.sft.collate import collate_packed
from stable_datasets.sft.dataset import PackedFilesError, PackedFilesNotFoundError, PackedRowError, PackedSFTDataset
from stable_datasets.sft.megatron import (
    GPTSFTPackedParquetDataset,
    GPTSFTPackedParquetMultiShardDataset,
    create_sft_dataset,
)
from stable_datasets.sft.pack import (
    PACKED_FEATURES,
    PACKED_PARQUET_SCHEMA,
    PackingConfig,
    pack_sequences,
    write_packed_parquet,
)
from stable_datasets.sft.packing import (
    ALGORITHMS,
    best_fit_decreasing,
    first_fit,
    first_fit_decreasing,
    first_fit_shuffle,
    pack_indices,
    packing_metadata,
)
from stable_datasets.sft.tokenize import ByteTokenizer, chat_tokenizer, normalize_messages

__all__ = [
    "ALGORITHMS", "PACKED_FEATURES", "PACKED_PARQUET_SCHEMA", "ByteTokenizer",
    "GPTSFTPackedParquetDataset", "GPTSFTPackedParquetMultiShardDataset", "create_sft_dataset",
    "ChatSFTBuilder", "ChatSFTConfig", "PackedFilesError",
    "PackedFilesNotFoundError", "PackedRowError",
    "PackedSFTDataset", "PackedSampler", "PackingConfig", "best_fit_decreasing", "chat_tokenizer",
    "collate_packed", "first_fit", "first_fit_decreasing", "first_fit_shuffle", "normalize_messages",
    "pack_indices", "pack_stream", "pack_sequences", "packing_metadata", "row_group_starts", "write_packed_parquet",
]


def __getattr__(name: str):
    """`PackedSampler`, `row_group_starts` and `pack_stream` on first use: their modules import
    `stable_datasets.streaming`, which imports torch when installed (1.8 s), and reading packs needs neither."""
    if name in ("PackedSampler", "row_group_starts"):
        from stable_datasets.sft import sampler  # local: it imports torch when installed

        return getattr(sampler, name)
    if name == "pack_stream":
        from stable_datasets.sft.stream_pack import pack_stream  # local: it imports torch when installed

        return pack_stream
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
