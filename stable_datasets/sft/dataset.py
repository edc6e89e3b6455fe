"""`PackedSFTDataset`: packs from our caches, Megatron-Bridge Parquet files or NeMo .npy files.

`ds[i]` returns `{"input_ids", "seq_boundaries", "loss_mask"}` as numpy arrays: slices of
decoded row groups or memory-mapped batches, never per-token Python objects. A negative
index returns the same pack with an all-zero loss mask (Megatron pads batches that way).
With `max_num_samples`, `samples_mapping` repeats the packs in epochs, each shuffled without
replacement by the dataset's own RNG (the global numpy RNG is never touched).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stable_datasets.builder.data_files import glob_pattern
from stable_datasets.errors import StableDatasetsError
from stable_datasets.sft.collate import collate_packed

COLUMNS = ("input_ids", "loss_mask", "seq_start_id")


class PackedRowError(StableDatasetsError, ValueError):
    """A stored pack is malformed (mask length, sequence starts)."""


def _resolve_files(paths: Any) -> tuple[str, list[Path]]:
    """("cache", [dir]) / ("parquet", files) / ("npy", files) from a path, folder, glob or list."""
    items = list(paths) if isinstance(paths, (list, tuple)) else [paths]
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if (path / "_metadata.json").is_file():
            return "cache", [path]
        if path.is_dir():
            found = sorted(path.glob("*.parquet")) or sorted(path.glob("*.npy"))
            if not found:
                raise FileNotFoundError(f"{path} holds no .parquet or .npy packed files and no cache")
            files.extend(found)
        elif (matched := glob_pattern(str(item))) is not None:
            if not matched:
                raise FileNotFoundError(f"no files match {item}")
            files.extend(sorted(Path(p) for p in matched))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{item} does not exist")
    kinds = {"npy" if f.suffix == ".npy" else "parquet" for f in files}
    if len(kinds) != 1:
        raise ValueError(f"mix of .npy and Parquet files: {[str(f) for f in files]}")
    return kinds.pop(), files


def _find_pack_metadata(files: Sequence[Path]) -> list[dict[str, Any]] | None:
    """`{pack_size}_metadata.jsonl` beside the files: a JSON list (Megatron-Bridge) or JSON lines."""
    for folder in dict.fromkeys(f.parent for f in files):
        for candidate in sorted(folder.glob("*_metadata.jsonl")):
            text = candidate.read_text().strip()
            if not text:
                continue
            try:
                value = json.loads(text)
                return value if isinstance(value, list) else [value]
            except ValueError:
                return [json.loads(line) for line in text.splitlines() if line.strip()]
    return None


class _NpyPacks:
    """NeMo/Megatron `.npy` packed files (object arrays of dicts) held as flat arrays + offsets."""

    def __init__(self, files: Sequence[Path], allow_pickle: bool):
        if not allow_pickle:
            raise StableDatasetsError(
                f"{files[0]} is a NeMo packed .npy file: a pickled object array, and loading it can run code "
                "stored in the file. Pass allow_pickle=True only for files you trust, or convert it once with "
                "stable_datasets.sft.write_packed_parquet")
        columns: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS}
        for path in files:
            for row in np.load(path, allow_pickle=True):
                for c in COLUMNS:
                    columns[c].append(np.asarray(row[c], dtype=np.int64 if c != "loss_mask" else np.int8))
        self.values = {c: np.concatenate(v) if v else np.zeros(0, np.int64) for c, v in columns.items()}
        self.offsets = {c: np.concatenate([[0], np.cumsum([len(a) for a in v])]).astype(np.int64)
                        for c, v in columns.items()}
        self.num_rows = len(columns["input_ids"])

    def row(self, index: int) -> dict[str, np.ndarray]:
        return {c: self.values[c][self.offsets[c][index]:self.offsets[c][index + 1]] for c in COLUMNS}


class _CacheRows:
    """Rows of a stable-datasets cache or StableDataset (any layout)."""

    def __init__(self, dataset: Any):
        missing = [c for c in COLUMNS if c not in dataset.features]
        if missing:
            raise ValueError(f"the dataset has no packed columns {missing}; columns are {dataset.column_names}")
        self.dataset = dataset.with_format("python", list(COLUMNS))
        self.num_rows = len(dataset)
        self.pack_metadata = dataset.cache_metadata[0].extra.get("pack_metadata")

    def row(self, index: int) -> dict[str, Any]:
        return self.dataset.stored_row(index)


class PackedSFTDataset:
    """Map-style dataset of packs; `collate_fn` turns a list of them into a Megatron batch."""

    def __init__(self, paths: Any, *, max_num_samples: int | None = None, seed: int = 1234,
                 allow_pickle: bool = False, eos_id: int | None = None, max_seq_length: int | None = None,
                 pad_to_max_length: bool = False, pad_seq_length_to_mult: int = 16, pad_seq_to_mult: int = 1,
                 answer_only_loss: bool = True, pad_cu_seqlens: bool = False,
                 pack_metadata: Sequence[dict[str, Any]] | dict[str, Any] | None = None, legacy_keys: bool = False,
                 cache_row_groups: int = 16, validate: bool = True):
        self.paths = paths
        self.seed = seed
        self.validate = validate
        from stable_datasets.dataset.stable_dataset import StableDataset

        found_metadata: Any = None
        if isinstance(paths, StableDataset):
            self._source: Any = _CacheRows(paths)
            found_metadata = self._source.pack_metadata
            self.files: list[Path] = []
        else:
            kind, files = _resolve_files(paths)
            self.files = files
            if kind == "cache":
                from stable_datasets.dataset.open import open_cache

                self._source = _CacheRows(open_cache(files[0]))
                found_metadata = self._source.pack_metadata
            elif kind == "npy":
                self._source = _NpyPacks(files, allow_pickle)
            else:
                from stable_datasets.layouts.parquet_shards import ParquetRowGroups

                groups = ParquetRowGroups(files, columns=COLUMNS, cache_row_groups=cache_row_groups)
                self._source = groups
            found_metadata = found_metadata or _find_pack_metadata(files)
        if pack_metadata is None:
            pack_metadata = found_metadata
        self.pack_metadata = [pack_metadata] if isinstance(pack_metadata, dict) else pack_metadata
        if max_seq_length is None and self.pack_metadata:
            max_seq_length = max(int(p["pack_size"]) for p in self.pack_metadata)
        self.num_packs = int(self._source.num_rows)
        self.max_num_samples = max_num_samples
        self.samples_mapping = self._build_samples_mapping()
        self.collate_settings = {
            "eos_id": eos_id, "max_seq_length": max_seq_length, "pad_to_max_length": pad_to_max_length,
            "pad_seq_length_to_mult": pad_seq_length_to_mult, "pad_seq_to_mult": pad_seq_to_mult,
            "answer_only_loss": answer_only_loss, "pad_cu_seqlens": pad_cu_seqlens,
            "pack_metadata": self.pack_metadata, "legacy_keys": legacy_keys}

    def _build_samples_mapping(self) -> np.ndarray | None:
        if self.max_num_samples is None:
            return None
        if self.num_packs == 0:
            raise ValueError("max_num_samples needs at least one pack")
        rng = np.random.RandomState(self.seed)  # its own stream: the global RNG is never used
        epochs = -(-self.max_num_samples // self.num_packs)
        mapping = np.concatenate([rng.permutation(self.num_packs) for _ in range(epochs)])
        return mapping[: self.max_num_samples]

    def __len__(self) -> int:
        return len(self.samples_mapping) if self.samples_mapping is not None else self.num_packs

    def _row(self, pack: int) -> dict[str, Any]:
        return self._source.row(pack)

    def __getitem__(self, idx: int) -> dict[str, np.ndarray]:
        idx = int(idx)
        padding = idx < 0
        if padding:
            idx += len(self)
        if not 0 <= idx < len(self):
            raise IndexError(f"index {idx} is out of range for {len(self)} samples")
        pack = int(self.samples_mapping[idx]) if self.samples_mapping is not None else idx
        row = self._row(pack)
        input_ids = np.asarray(row["input_ids"])
        loss_mask = np.asarray(row["loss_mask"])
        starts = np.asarray(row["seq_start_id"], dtype=np.int64)
        if self.validate:
            self._check(pack, input_ids, loss_mask, starts)
        boundaries = np.append(starts, len(input_ids))
        if padding:
            loss_mask = np.zeros_like(loss_mask)
        return {"input_ids": input_ids, "seq_boundaries": boundaries, "loss_mask": loss_mask}

    def _check(self, pack: int, input_ids: np.ndarray, loss_mask: np.ndarray, starts: np.ndarray) -> None:
        where = f"pack {pack} of {self.paths}"
        if len(loss_mask) != len(input_ids):
            raise PackedRowError(f"{where}: loss_mask has {len(loss_mask)} entries for {len(input_ids)} input_ids")
        if not len(starts) or starts[0] != 0:
            raise PackedRowError(f"{where}: seq_start_id must start at 0, got {starts[:4].tolist()}")
        if len(starts) > 1 and np.any(np.diff(starts) <= 0):
            raise PackedRowError(f"{where}: seq_start_id must increase, got {starts.tolist()}")
        if starts[-1] >= len(input_ids) and len(input_ids):
            raise PackedRowError(f"{where}: seq_start_id {int(starts[-1])} is past the end of {len(input_ids)} "
                                 "input_ids")

    @property
    def collate_fn(self):
        """`collate_packed` bound to this dataset's settings (eos_id and max_seq_length are required)."""
        settings = dict(self.collate_settings)
        if settings["eos_id"] is None or settings["max_seq_length"] is None:
            raise ValueError("collate_fn needs eos_id= and max_seq_length= (max_seq_length defaults to the "
                             "pack_size of the packing metadata when there is one)")
        return functools.partial(collate_packed, **settings)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if isinstance(self._source, _NpyPacks):
            return state  # already plain numpy arrays
        state["_source"] = None  # reopened per process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._source is None:
            reopened = PackedSFTDataset(self.paths, allow_pickle=True, validate=self.validate)
            self._source = reopened._source

