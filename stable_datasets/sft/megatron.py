"""Megatron-Bridge's packed Parquet reader, by its names, over `PackedSFTDataset`.

Code written against Megatron-Bridge's reader plan constructs
`GPTSFTPackedParquetDataset(file_path, tokenizer, return_cu_seqlen=, pad_cu_seqlens=,
pack_metadata_file_path=, max_seq_length=, max_num_samples=, seed=, ...)`, or calls
`create_sft_dataset(path, tokenizer, seq_length=, ...)`, and expects items as Python lists
(`input_ids`, `seq_boundaries` = `seq_start_id + [len(input_ids)]`, `loss_mask`), a negative
index to be a padding sample (its loss mask all zeros), and `collate_fn` with Megatron's keys.
These names give exactly that, reading through our `PackedSFTDataset` (its numpy items stay
the fast path). Arguments of Megatron-Bridge's `GPTSFTDataset` that only matter for unpacked
JSONL (`add_bos`, `label_key`, `memmap_workers`, ...) are accepted and have no effect on packs;
anything else is refused by name.

Path and row errors use Megatron-Bridge's wording ("Packed Parquet file not found", "missing
required columns", "must start with 0", "not non-decreasing", ...), so code that matches them
keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stable_datasets.builder.data_files import glob_pattern
from stable_datasets.sft.dataset import PackedFilesError, PackedFilesNotFoundError, PackedSFTDataset
from stable_datasets.sft.indexed_packs import half_pair, indexed_pairs_in, indexed_prefix
from stable_datasets.sft.validate import row_fault

__all__ = ["GPTSFTPackedParquetDataset", "GPTSFTPackedParquetMultiShardDataset", "REQUIRED_COLUMNS",
           "create_sft_dataset", "is_packed_parquet_file", "resolve_packed_parquet_paths"]

REQUIRED_COLUMNS = {"input_ids", "seq_start_id", "loss_mask"}
# GPTSFTDataset arguments that shape unpacked JSONL examples; packs are already tokenized and packed
UNPACKED_ONLY = frozenset({"add_bos", "add_eos", "add_sep", "label_key", "truncation_field", "index_mapping_dir",
                           "prompt_template", "truncation_method", "memmap_workers", "hf_dataset",
                           "global_sample_mapping", "virtual_tokens", "tokens_to_generate", "ceil_to_power_2",
                           "get_attention_mask_from_fusion", "sanity_check_dist_workers", "output_original_text",
                           "is_test", "special_tokens", "chat", "use_hf_tokenizer_chat_template", "tool_schemas"})
_SUFFIXES = (".parquet", ".pq")
_PACKED_SUFFIXES = (".idx.parquet", ".idx.pq")


def is_packed_parquet_file(path: str | Path) -> bool:
    """Megatron-Bridge's name test: a path or glob ending in `.idx.parquet` or `.idx.pq`, in any case (a plain
    `.parquet` is not a packed file by name, though the readers below take it)."""
    return str(path).lower().endswith(_PACKED_SUFFIXES)


def resolve_parquet_paths(spec: str | Path | Sequence[str | Path]) -> list[str]:
    """Files of a packed Parquet spec (a file, a glob, a folder, or a list), with Megatron-Bridge's errors."""
    if isinstance(spec, (list, tuple)):
        return [p for item in spec for p in resolve_parquet_paths(item)]
    text = str(spec)
    path = Path(text)
    if path.is_dir():
        found = sorted(str(p) for p in path.iterdir() if p.suffix.lower() in _SUFFIXES and p.is_file())
        if not found:
            raise PackedFilesNotFoundError(f"No Parquet files found in directory: {text}. Files must end with "
                                           ".parquet or .pq")
        return found
    if path.is_file():
        return [text]
    matched = glob_pattern(text)
    if matched is not None:
        found = sorted(str(p) for p in matched if Path(p).suffix.lower() in _SUFFIXES)
        if not found:
            raise PackedFilesNotFoundError(f"No Parquet files found matching pattern: {text}. Files must end "
                                           "with .parquet or .pq")
        return found
    raise PackedFilesNotFoundError(f"Packed Parquet file not found: {text}")


#: Megatron-Bridge's public name for the same resolution (`megatron.bridge.data.packing.paths`)
resolve_packed_parquet_paths = resolve_parquet_paths


def _check_files(files: list[str], spec: Any) -> None:
    """Megatron-Bridge's checks on the footers: every file has the three columns; some file has rows."""
    import pyarrow.parquet as pq

    rows = 0
    for file in files:
        try:
            metadata = pq.read_metadata(file)
        except (OSError, ValueError) as exc:
            raise PackedFilesError(f"Packed Parquet file '{file}' cannot be read: {exc}") from None
        columns = set(metadata.schema.to_arrow_schema().names)
        missing = REQUIRED_COLUMNS - columns
        if missing:
            raise PackedFilesError(f"Packed Parquet file '{file}' is missing required columns: {sorted(missing)}. "
                                   f"Required columns are: {sorted(REQUIRED_COLUMNS)}. Found columns: "
                                   f"{sorted(columns)}")
        rows += metadata.num_rows
    if rows == 0:
        raise PackedFilesError(f"Packed Parquet dataset is empty (0 rows) for path: {spec}")


def _as_lists(sample: dict[str, np.ndarray]) -> dict[str, list[int]]:
    return {"input_ids": sample["input_ids"].tolist(), "seq_boundaries": sample["seq_boundaries"].tolist(),
            "loss_mask": sample["loss_mask"].tolist()}


class GPTSFTPackedParquetDataset(PackedSFTDataset):
    """Megatron-Bridge's `GPTSFTPackedParquetDataset`: items as Python lists, Megatron's arguments.

    `file_path` is a `.parquet`/`.pq` file, a glob, a folder, or a list of them (a `.npy` pack
    file, a packed indexed `.bin`/`.idx` prefix or a folder of such pairs, or one of our caches
    also works: `PackedSFTDataset` reads them). `tokenizer` needs an `eos_id` (what the collate
    pads labels with). A negative `idx` is a padding sample: the pack `len(self) + idx` with an
    all-zero loss mask, also with `max_num_samples`.
    """

    def __init__(self, file_path: Any, tokenizer: Any, return_cu_seqlen: bool = True, pad_cu_seqlens: bool = False,
                 pad_seq_to_mult: int = 1, pack_metadata_file_path: str | Path | None = None, *,
                 max_seq_length: int | None = None, max_num_samples: int | None = None, seed: int = 1234,
                 pad_to_max_length: bool = False, pad_seq_length_to_mult: int = 16, answer_only_loss: bool = True,
                 **kwargs: Any):
        unknown = sorted(set(kwargs) - UNPACKED_ONLY - _READER_OPTIONS)
        if unknown:
            raise TypeError(f"GPTSFTPackedParquetDataset got unexpected keyword argument(s) {unknown}")
        reader = {k: v for k, v in kwargs.items() if k in _READER_OPTIONS}
        files: Any = file_path
        if isinstance(file_path, (str, Path, list, tuple)) and not _is_special(file_path):
            files = resolve_parquet_paths(file_path)
            _check_files(files, file_path)
        super().__init__(file_path=files, tokenizer=tokenizer, return_cu_seqlen=return_cu_seqlen,
                         pad_cu_seqlens=pad_cu_seqlens, pad_seq_to_mult=pad_seq_to_mult,
                         pack_metadata_file_path=pack_metadata_file_path, max_seq_length=max_seq_length,
                         max_num_samples=max_num_samples, seed=seed, pad_to_max_length=pad_to_max_length,
                         pad_seq_length_to_mult=pad_seq_length_to_mult, answer_only_loss=answer_only_loss, **reader)
        self.file_path = file_path

    def __getitem__(self, idx: int) -> dict[str, list[int]]:  # type: ignore[override]
        return _as_lists(super().__getitem__(idx))

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, list[int]]]:  # type: ignore[override]
        return [_as_lists(s) for s in super().__getitems__(indices)]

    @staticmethod
    def validate_row(idx: int, input_ids: Sequence[int], loss_mask: Sequence[int], seq_start_id: Sequence[int]
                     ) -> None:
        """Megatron-Bridge's row rule with its messages (`row_fault`): equal starts (an empty sequence) pass. Our
        reader applies the same rule on read, a block of rows at a time."""
        fault = row_fault(len(input_ids), len(loss_mask), list(seq_start_id))
        if fault is not None:
            raise ValueError(f"Row {idx}: {fault}")

    def close(self) -> None:
        """Megatron-Bridge's `close()`: file handles are per process here and closed with the dataset."""


# PackedSFTDataset's own reader options, accepted by the Megatron names too
_READER_OPTIONS = frozenset({"allow_pickle", "eos_id", "legacy_keys", "cache_row_groups", "max_open_files", "validate",
                             "page_reads", "readahead", "storage_options", "pack_metadata", "adopt"})


def _is_special(spec: Any) -> bool:
    """Specs PackedSFTDataset resolves itself: .npy files, our caches, remote URLs, packed indexed pairs (a prefix,
    its .bin or .idx, or a folder of pairs)."""
    items = spec if isinstance(spec, (list, tuple)) else [spec]
    for item in items:
        text = str(item)
        if text.endswith(".npy") or "://" in text or (Path(text) / "_metadata.json").is_file() or _indexed(text):
            return True
    return False


def _indexed(text: str) -> bool:
    """A packed indexed pair or half of one (PackedSFTDataset names what is missing), or a folder holding pairs and
    no Parquet files."""
    path = Path(text)
    if path.is_dir():
        return not any(p.suffix.lower() in _SUFFIXES for p in path.iterdir()) and bool(indexed_pairs_in(path))
    return indexed_prefix(path) is not None or half_pair(path) is not None


class GPTSFTPackedParquetMultiShardDataset:
    """The plan's multi-shard dataset: one `GPTSFTPackedParquetDataset` per path, served end to end.

    Each shard gets the same keyword arguments (so `max_num_samples` applies per shard, as in
    the plan); `collate_fn` is the first shard's.
    """

    def __init__(self, parquet_paths: Sequence[str | Path], tokenizer: Any, **kwargs: Any):
        if not parquet_paths:
            raise PackedFilesNotFoundError("GPTSFTPackedParquetMultiShardDataset needs at least one Parquet path")
        self.shards = [GPTSFTPackedParquetDataset(p, tokenizer, **kwargs) for p in parquet_paths]
        self.shard_offsets = np.cumsum([0] + [len(s) for s in self.shards])

    @property
    def collate_fn(self) -> Callable[..., dict[str, Any]]:
        """The first shard's, made when asked for: the constructor does not need the collate's arguments."""
        return self.shards[0].collate_fn

    def __len__(self) -> int:
        return int(self.shard_offsets[-1])

    def __getitem__(self, idx: int) -> dict[str, list[int]]:
        """The shard holding `idx`; a negative `idx` falls in the first shard, a padding sample there."""
        shard = int(np.searchsorted(self.shard_offsets[1:], idx, side="right"))
        if shard >= len(self.shards):
            raise IndexError(f"index {idx} is out of range for {len(self)} samples")
        return self.shards[shard][int(idx) - int(self.shard_offsets[shard])]


def create_sft_dataset(path: str | Path, tokenizer: Any, seq_length: int = 2048, add_bos: bool = False,
                       add_eos: bool = True, add_sep: bool = False, seed: int = 1234, label_key: str = "output",
                       answer_only_loss: bool = True, truncation_field: str = "input", pad_to_max_length: bool = False,
                       index_mapping_dir: str | None = None, prompt_template: str = "{input} {output}",
                       truncation_method: str = "right", memmap_workers: int = 2, hf_dataset: bool = False,
                       global_sample_mapping: bool = False, pack_metadata_file_path: str | Path | None = None,
                       pad_cu_seqlens: bool = False, chat: bool = False, **kwargs: Any) -> GPTSFTPackedParquetDataset:
    """Megatron-Bridge's factory: packed `.parquet`/`.pq` (file, glob or folder) or `.npy` -> the packed
    dataset with `max_seq_length=seq_length`. Unpacked JSONL is refused with what to use instead."""
    text = str(path)
    packed = text.lower().endswith((".parquet", ".pq", ".npy")) or Path(text).is_dir() or glob_pattern(text) \
        or _indexed(text)
    if not packed:
        raise ValueError(f"create_sft_dataset: {text} is not packed SFT data (.parquet, .pq or .npy packs, or a "
                         "packed indexed .bin/.idx prefix); "
                         "unpacked chat or prompt/completion JSONL is tokenized and packed by this library's 'sft' "
                         "builder: sds.load_dataset('sft', data_files=..., packing=PackingConfig(pack_size=...)), then "
                         "PackedSFTDataset(ds)")
    del add_bos, add_eos, add_sep, label_key, truncation_field, index_mapping_dir, prompt_template
    del truncation_method, memmap_workers, hf_dataset, global_sample_mapping, chat
    return GPTSFTPackedParquetDataset(text, tokenizer, pad_cu_seqlens=pad_cu_seqlens,
                                      pack_metadata_file_path=pack_metadata_file_path, max_seq_length=seq_length,
                                      seed=seed, answer_only_loss=answer_only_loss,
                                      pad_to_max_length=pad_to_max_length, **kwargs)
