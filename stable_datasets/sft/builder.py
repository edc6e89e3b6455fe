"""`ChatSFTBuilder`: a builder of conversations that, given a `PackingConfig`, builds packs.

Subclasses yield `(key, record)` from `_conversations(**gen_kwargs)`; their SplitGenerators
pass `split` among the gen_kwargs. Without packing a
row is `{"messages": [{"role", "content"}, ...]}`. With `packing=PackingConfig(...)` every
conversation of the split is tokenized (loss mask on assistant tokens by default, EOS
appended), the lengths are packed by the chosen algorithm, and rows are packs. The packing
metadata goes into `_metadata.json` (`extra.pack_metadata`) and beside the shards as
`{pack_size}_metadata.jsonl`, the file Megatron-Bridge reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from loguru import logger

from stable_datasets.builder.builder import GeneratorBasedBuilder
from stable_datasets.builder.config import BuilderConfig
from stable_datasets.builder.info import DatasetInfo
from stable_datasets.features.features import Features
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import Value
from stable_datasets.progress import progress
from stable_datasets.sft.pack import (
    PACKED_FEATURES,
    PackingConfig,
    metadata_file_name,
    metadata_file_text,
    pack_sequences,
)
from stable_datasets.sft.tokenize import encode_conversations, normalize_messages

CHAT_FEATURES = Features({"messages": Sequence({"role": Value("string"), "content": Value("string")})})


@dataclass
class ChatSFTConfig(BuilderConfig):
    packing: PackingConfig | None = None


class ChatSFTBuilder(GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = ChatSFTConfig

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pack_metadata: dict[str, dict[str, Any]] = {}

    def _description(self) -> str:
        return ""

    def _info(self) -> DatasetInfo:
        return DatasetInfo(features=PACKED_FEATURES if self.config.packing else CHAT_FEATURES,
                           description=self._description())

    def _conversations(self, **gen_kwargs: Any) -> Iterator[tuple[Any, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must implement _conversations(**gen_kwargs)")

    def _generate_examples(self, **gen_kwargs: Any):
        """gen_kwargs must include "split"; all of them are passed on to `_conversations`."""
        split = gen_kwargs["split"]
        packing: PackingConfig | None = self.config.packing
        if packing is None:
            for key, record in self._conversations(**gen_kwargs):
                try:
                    yield key, {"messages": normalize_messages(record)}
                except ValueError as exc:
                    raise ValueError(f"record {key!r}: {exc}") from None
            return
        tokenizer = packing.chat_tokenizer()
        conversations = [normalize_messages(r) for _, r in progress(self._conversations(**gen_kwargs),
                                                                     desc=f"read {split}", unit=" conversations")]
        sequences = encode_conversations(conversations, tokenizer, packing.loss_on)
        result = pack_sequences(sequences, packing.pack_size, packing.algorithm, packing.seed, packing.overlong)
        self._pack_metadata[split] = {**result.metadata, "skipped_sequences": result.skipped,
                                      "truncated_sequences": result.truncated, "num_sequences": len(sequences),
                                      "eos_id": tokenizer.eos_id}
        logger.info("packed {} conversations of '{}' into {} packs ({}% efficient)", len(sequences), split,
                    len(result.rows), result.metadata["packing_efficiency"])
        for number, row in enumerate(result.rows):
            yield f"pack-{number:08d}", row

    def _split_extra(self, split: str) -> dict[str, Any]:
        meta = self._pack_metadata.get(split)
        return {"pack_metadata": meta} if meta else {}

    def _split_files(self, split: str) -> dict[str, str]:
        meta = self._pack_metadata.get(split)
        if not meta:
            return {}
        megatron = {k: meta[k] for k in ("dataset_max_seqlen", "max_samples_per_bin", "packing_factor",
                                         "packing_efficiency", "pack_size", "min_packed_seqlen")}
        return {metadata_file_name(meta["pack_size"]): metadata_file_text(megatron)}
