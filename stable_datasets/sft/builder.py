"""`ChatSFTBuilder`: a builder of conversations that, given a `PackingConfig`, builds packs.

Subclasses yield `(key, record)` from `_conversations(**gen_kwargs)`; their SplitGenerators
pass `split` among the gen_kwargs. Without packing a row is `{"messages": [{"role",
"content"}, ...]}`. With `packing=PackingConfig(...)` a split is built in three steps
(`_plan_split`): every job tokenizes its conversations (loss mask on assistant tokens by
default, EOS appended) into a token file, in parallel; the lengths of the whole split are
packed once by the chosen algorithm (so the bins never depend on `num_proc`); then the jobs
write ranges of packs, in parallel. The packing metadata goes into `_metadata.json`
(`extra.pack_metadata`) and beside the shards as `{pack_size}_metadata.jsonl`, the file
Megatron-Bridge reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.builder.builder import GeneratorBasedBuilder, split_gen_kwargs
from stable_datasets.builder.config import BuilderConfig
from stable_datasets.builder.info import DatasetInfo, SplitGenerator
from stable_datasets.features.features import Features
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import Value
from stable_datasets.progress import progress
from stable_datasets.sft.pack import (
    PACKED_FEATURES,
    PackingConfig,
    metadata_file_name,
    metadata_file_text,
    pack_row,
    plan_packs,
)
from stable_datasets.sft.token_store import TokenSequences, write_tokens
from stable_datasets.sft.tokenize import encode_conversations, normalize_messages
from stable_datasets.write import JobRunner, SplitJobs

CHAT_FEATURES = Features({"messages": Sequence({"role": Value("string"), "content": Value("string")})})
TOKENIZE_CHUNK = 4096  # conversations tokenized (and held) at a time


@dataclass
class ChatSFTConfig(BuilderConfig):
    packing: PackingConfig | None = None


class ChatSFTBuilder(GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = ChatSFTConfig

    def _description(self) -> str:
        return ""

    def _info(self) -> DatasetInfo:
        return DatasetInfo(features=PACKED_FEATURES if self.config.packing else CHAT_FEATURES,
                           description=self._description())

    def _conversations(self, **gen_kwargs: Any) -> Iterator[tuple[Any, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must implement _conversations(**gen_kwargs)")

    def _normalized(self, gen_kwargs: dict[str, Any]) -> Iterator[tuple[Any, list[dict[str, str]]]]:
        for key, record in self._conversations(**gen_kwargs):
            try:
                yield key, normalize_messages(record)
            except ValueError as exc:
                raise ValueError(f"record {key!r}: {exc}") from None

    def _tokenize(self, gen_kwargs: dict[str, Any], path: str) -> int:
        """First step of a packed build (one job): the job's conversations -> a token file."""
        packing: PackingConfig = self.config.packing
        tokenizer = packing.chat_tokenizer()
        conversations = (messages for _, messages in progress(
            self._normalized(gen_kwargs), desc=f"tokenize {gen_kwargs.get('split', '')}", unit=" conversations"))
        chunks = iter(lambda: list(itertools.islice(conversations, TOKENIZE_CHUNK)), [])
        return write_tokens(Path(path), (encode_conversations(chunk, tokenizer, packing.loss_on) for chunk in chunks))

    def _plan_split(self, generator: SplitGenerator, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        packing: PackingConfig | None = self.config.packing
        jobs = split_gen_kwargs(generator.gen_kwargs, num_jobs)
        if packing is None:
            return SplitJobs(jobs)
        split = generator.name
        paths = [str(workdir / f"tokens-{i:05d}.arrow") for i in range(len(jobs))]
        run(self._tokenize, list(zip(jobs, paths)), desc=f"tokenize '{split}' job")
        sequences = TokenSequences(paths)
        if not len(sequences):
            raise ValueError(f"{self.name}: split {split!r} has no conversations to pack"
                             f"{_inputs_named(generator.gen_kwargs)}")
        plan = plan_packs(sequences.token_counts(), packing.pack_size, packing.algorithm, packing.seed,
                          packing.overlong, pad_seq_to_mult=packing.pad_seq_to_mult)
        meta = {**plan.metadata, "skipped_sequences": plan.skipped, "truncated_sequences": plan.truncated,
                "num_sequences": len(sequences), "eos_id": packing.chat_tokenizer().eos_id}
        logger.info("packed {} conversations of '{}' into {} packs ({}% efficient)", len(sequences), split,
                    len(plan.bins), plan.metadata["packing_efficiency"])
        num_jobs = max(1, min(num_jobs, len(plan.bins)))
        bounds = [round(i * len(plan.bins) / num_jobs) for i in range(num_jobs + 1)]
        pack_jobs = [{"token_files": paths, "bins": plan.bins[lo:hi], "first_pack": lo, "limit": plan.limit,
                      "row_options": packing.pack_kwargs()} for lo, hi in itertools.pairwise(bounds)]
        megatron = {k: meta[k] for k in ("dataset_max_seqlen", "max_samples_per_bin", "packing_factor",
                                         "packing_efficiency", "pack_size", "min_packed_seqlen")}
        return SplitJobs(pack_jobs, extra={"pack_metadata": meta},
                         files={metadata_file_name(meta["pack_size"]): metadata_file_text(megatron)})

    def _generate_examples(self, **gen_kwargs: Any):
        """Conversations (gen_kwargs of a split generator), or packs (a job from `_plan_split`)."""
        if "bins" not in gen_kwargs:
            for key, messages in self._normalized(gen_kwargs):
                yield key, {"messages": messages}
            return
        sequences = TokenSequences(gen_kwargs["token_files"])
        for number, members in enumerate(gen_kwargs["bins"], start=gen_kwargs["first_pack"]):
            yield f"pack-{number:08d}", pack_row([sequences[i] for i in members], gen_kwargs["limit"],
                                                 **gen_kwargs["row_options"])


def _inputs_named(gen_kwargs: dict[str, Any]) -> str:
    """The input files of a split generator, for an error that sends the user to them."""
    files = gen_kwargs.get("files") or gen_kwargs.get("data_files") or []
    if isinstance(files, str | Path):
        files = [files]
    names = [str(f) for f in files]
    return f" (input files: {', '.join(names)})" if names else ""
