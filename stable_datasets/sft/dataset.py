"""`PackedSFTDataset`: packs from our caches, Megatron-Bridge Parquet files, packed indexed `.bin`/`.idx` pairs
(the sign-bit variant, named by prefix) or NeMo .npy files.

`ds[i]` returns `{"input_ids", "seq_boundaries", "loss_mask"}` as numpy arrays: slices of
decoded row groups or memory-mapped batches, never per-token Python objects. A negative
index returns the same pack with an all-zero loss mask (Megatron pads batches that way).
With `max_num_samples`, `samples_mapping` repeats the packs in epochs, each shuffled without
replacement by the dataset's own RNG (the global numpy RNG is never touched).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from loguru import logger

from stable_datasets.builder.data_files import glob_pattern
from stable_datasets.dataset.open import open_cache
from stable_datasets.dataset.row_source import DatasetRowSource
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.download.inputs import RemoteInputNotFoundError, local_inputs
from stable_datasets.errors import StableDatasetsError
from stable_datasets.layouts.parquet_shards import ParquetRowGroups
from stable_datasets.sft.adopt import adopted, wants_adoption
from stable_datasets.sft.collate import collate_packed
from stable_datasets.sft.indexed_packs import PackedIndexedRows, half_pair, indexed_pairs_in, indexed_prefix
from stable_datasets.sft.parquet_pages import PACK_ID, PAGE_MIN_GROUP_ROWS, PackPages, datafusion_available
from stable_datasets.sft.validate import BlockChecks, row_fault
from stable_datasets.streaming.source import block_bounds_of

COLUMNS = ("input_ids", "loss_mask", "seq_start_id")
#: samples read ahead in one page query when `ds[i]` is called in a steady stride (a sequential sampler over
#: `samples_mapping`, one rank of many, one DataLoader worker of many)
READAHEAD = 256
MAX_STRIDE = 1 << 12
#: lone packs read from row groups before DataFusion is started for them: its import (~0.7 s) pays off only
#: over many reads, and opening a file and reading one pack stays fast
LONE_READS_BEFORE_PAGES = 8
_LOGGED: set[str] = set()  # read-path messages already logged in this process


def _log_once(message: str) -> None:
    if message not in _LOGGED:
        _LOGGED.add(message)
        logger.info(message)


class PackedRowError(StableDatasetsError, ValueError):
    """A stored pack is malformed (mask length, sequence starts)."""


class PackedFilesError(StableDatasetsError, ValueError):
    """The packed files cannot serve packs: a missing column, an empty or unreadable file, no packs."""


class PackedFilesNotFoundError(PackedFilesError, FileNotFoundError):
    """A named file, folder or pattern holds no packed files."""


def _resolve_files(paths: Any, storage_options: dict[str, Any] | None = None) -> tuple[str, list[Path]]:
    """("cache", [dir]) / ("parquet", files) / ("npy", files) / ("indexed", prefixes) from a path, folder, glob or
    list. A packed indexed pair (sft/indexed_packs.py) is named by its prefix, its `.bin` or its `.idx`; a folder
    of such pairs (and no Parquet or .npy files) gives them all, sorted.

    A path that exists is taken literally even when it has glob characters (`shard_[01].parquet`).
    URLs (`s3://`, `https://`, ...; a prefix or a glob too) are read from local verified copies
    (download.inputs).
    """
    items = list(paths) if isinstance(paths, (list, tuple)) else [paths]
    if not items:
        raise PackedFilesNotFoundError("no packed files given (an empty list)")

    try:
        items = local_inputs(items, (".parquet", ".pq", ".npy"), storage_options)
    except RemoteInputNotFoundError as exc:
        raise PackedFilesNotFoundError(str(exc)) from None
    files: list[Path] = []
    prefixes: set[Path] = set()  # packed indexed pairs, named by prefix
    for item in items:
        path = Path(item)
        if (path / "_metadata.json").is_file():
            return "cache", [path]
        if path.is_dir():
            found = sorted(path.glob("*.parquet")) or sorted(path.glob("*.pq")) or sorted(path.glob("*.npy"))
            if not found and (pairs := [Path(p) for p in indexed_pairs_in(path)]):
                prefixes.update(pairs)
                found = pairs
            if not found:
                raise PackedFilesNotFoundError(f"folder {path} holds no .parquet, .pq or .npy packed files, no "
                                               "packed indexed .bin/.idx pair and no stable-datasets cache")
            files.extend(found)
        elif (prefix := indexed_prefix(path)) is not None:
            prefixes.add(Path(prefix))
            files.append(Path(prefix))
        elif path.is_file() and half_pair(path) is None:
            files.append(path)
        elif (matched := glob_pattern(str(item))) is not None:
            if not matched:
                raise PackedFilesNotFoundError(f"no files match the pattern {item}")
            files.extend(sorted(Path(p) for p in matched))
        else:
            raise PackedFilesNotFoundError(half_pair(path) or f"packed file {item} does not exist (looked for a file, "
                                           f"a folder, a pattern and a packed indexed pair {item}.bin + .idx)")
    kinds = {"indexed" if f in prefixes else "npy" if f.suffix == ".npy" else "parquet" for f in files}
    if len(kinds) != 1:
        raise PackedFilesError(f"mix of .npy, Parquet and packed indexed files: {[str(f) for f in files]}")
    kind = kinds.pop()
    return kind, list(dict.fromkeys(files)) if kind == "indexed" else files  # x.bin and x.idx: one pair


def _read_metadata_file(path: Path) -> list[dict[str, Any]] | None:
    """A metadata file: a JSON list (what Megatron-Bridge writes), one JSON object, or JSON lines."""
    text = path.read_text().strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise PackedFilesError(f"pack metadata file {path} is neither JSON nor JSON lines: {exc}") from None
    return value if isinstance(value, list) else [value]


def _find_pack_metadata(files: Sequence[Path]) -> list[dict[str, Any]] | None:
    """`{pack_size}_metadata.jsonl` beside the files.

    With several in one folder (2048_ and 4096_), the one whose pack size appears as a number in
    the packed files' names (`training_4096.idx.parquet`); with one, that one; otherwise none
    (pass `pack_metadata_file_path=`).
    """
    numbers = {int(n) for f in files for n in re.findall(r"(?<![0-9])([0-9]+)(?![0-9])", f.name)}
    for folder in dict.fromkeys(f.parent for f in files):
        candidates = {}
        for candidate in sorted(folder.glob("*_metadata.jsonl")):
            size = candidate.name[: -len("_metadata.jsonl")]
            candidates[int(size) if size.isdigit() else None] = candidate
        matching = [candidates[n] for n in sorted(numbers) if n in candidates]
        if len(matching) == 1:
            return _read_metadata_file(matching[0])
        if len(candidates) == 1:
            return _read_metadata_file(next(iter(candidates.values())))
        if candidates:
            logger.warning("several pack metadata files in {} ({}) and none named by the pack size in {}; "
                           "pass pack_metadata_file_path=", folder, sorted(c.name for c in candidates.values()),
                           [f.name for f in files][:3])
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
        self.arrow = dataset.with_format("arrow", list(COLUMNS))
        self.num_rows = len(dataset)
        self.pack_metadata = dataset.cache_metadata[0].extra.get("pack_metadata")
        self.stored = DatasetRowSource(self.dataset)  # its rows as stored (nothing decoded)
        self._bind_stored_rows()

    def _bind_stored_rows(self) -> None:
        backend = self.stored.stored_backend()
        if backend is not None:
            self.row = backend.row  # a whole cache: its rows as stored, without the view's bookkeeping

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "row"}  # the bound backend method is rebound

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_stored_rows()

    def row(self, index: int) -> dict[str, Any]:
        return self.stored.stored_row(index)

    def row_groups(self) -> Any:
        """The Parquet row groups behind the rows, when they are one Parquet cache read as stored: then
        validation uses the row groups that reads decode anyway, instead of decoding them twice."""
        backend = self.stored.stored_backend()
        return None if backend is None else backend.parquet_row_groups()

    def arrow_rows(self, start: int, stop: int) -> Any:
        """Rows [start, stop) as an Arrow table (memory-mapped where the layout allows)."""
        return self.arrow[start:stop]


class PackedSFTDataset:
    """Map-style dataset of packs; `collate_fn` turns a list of them into a Megatron batch.

    Takes the arguments a Megatron-Bridge `GPTSFTPackedDataset` user passes: `file_path=` (same
    as `paths`), `tokenizer=` (any object with an `eos_id`; used for `eos_id` only),
    `return_cu_seqlen=`, `pack_metadata_file_path=`, `max_seq_length=`, `seed=`,
    `max_num_samples=`, `pad_to_max_length=`, `pad_seq_length_to_mult=`, `pad_seq_to_mult=`,
    `pad_cu_seqlens=`, `answer_only_loss=`. docs/packed-sft.md has the mapping.
    Parquet files with large row groups and no `pack_id` (written the Megatron-Bridge way) are
    read through a cache made of them once (`adopt=`, see sft/adopt.py).
    """

    def __init__(self, paths: Any = None, *, file_path: Any = None, tokenizer: Any = None,
                 max_num_samples: int | None = None, seed: int = 1234, allow_pickle: bool = False,
                 eos_id: int | None = None, max_seq_length: int | None = None, pad_to_max_length: bool = False,
                 pad_seq_length_to_mult: int = 16, pad_seq_to_mult: int = 1, answer_only_loss: bool = True,
                 pad_cu_seqlens: bool = False, return_cu_seqlen: bool = True,
                 pack_metadata: Sequence[dict[str, Any]] | dict[str, Any] | None = None,
                 pack_metadata_file_path: str | Path | None = None, legacy_keys: bool = False,
                 cache_row_groups: int = 16, max_open_files: int = 64, validate: bool = True,
                 page_reads: bool | None = None, readahead: int = READAHEAD,
                 storage_options: dict[str, Any] | None = None, adopt: bool | None = None):
        if paths is None and file_path is None:
            raise TypeError("PackedSFTDataset needs the packed files: paths= (or file_path=, as Megatron-Bridge "
                            "names it)")
        if paths is not None and file_path is not None:
            raise TypeError("pass the packed files once: paths= or file_path=, not both")
        paths = paths if paths is not None else file_path
        #: what collate_fn is missing when the tokenizer has no eos_id (the packs read without it, as Megatron-Bridge's
        #: constructor does not need the collate's arguments)
        self._eos_missing = ""
        if eos_id is None and tokenizer is not None:
            eos_id = getattr(tokenizer, "eos_id", None)
            if eos_id is None:
                self._eos_missing = f" (tokenizer {type(tokenizer).__name__} has no eos_id)"
        if pack_metadata is not None and pack_metadata_file_path is not None:
            raise TypeError("pass pack_metadata= or pack_metadata_file_path=, not both")
        if pack_metadata_file_path is not None:
            pack_metadata = _read_metadata_file(Path(local_inputs([pack_metadata_file_path], (),
                                                                  storage_options)[0]))
            if pack_metadata is None:
                raise PackedFilesError(f"pack metadata file {pack_metadata_file_path} is empty")
        self.paths = paths
        self.seed = seed
        self.validate = validate
        self.allow_pickle = allow_pickle  # the user's choice, kept as is through pickling
        self._pages: Any = None  # page-level reads of Parquet files (parquet_pages), when they can serve
        self.readahead = max(1, int(readahead))
        self._reset_readahead()

        found_metadata: Any = None
        if isinstance(paths, StableDataset):
            self._source: Any = _CacheRows(paths)
            found_metadata = self._source.pack_metadata
            self.files: list[Path] = []
        else:
            kind, files = _resolve_files(paths, storage_options)
            self.files = files
            if kind == "cache":
                self._source = _CacheRows(open_cache(files[0]))
                found_metadata = self._source.pack_metadata
            elif kind in ("npy", "indexed"):  # flat arrays, or memory-mapped sign-bit .bin/.idx pairs
                self._source = _NpyPacks(files, allow_pickle) if kind == "npy" else PackedIndexedRows(files)
            elif wants_adoption(files, adopt):  # large row groups, no pack_id: a cache made once (sft/adopt.py)
                self._source = _CacheRows(adopted(files))
            else:
                try:
                    self._source = ParquetRowGroups(files, columns=COLUMNS, cache_row_groups=cache_row_groups,
                                                    max_open_files=max_open_files)
                except FileNotFoundError as exc:
                    raise PackedFilesNotFoundError(str(exc)) from None
                except ValueError as exc:
                    raise PackedFilesError(str(exc)) from None
                self._pages = _page_reader(self._source, page_reads)
            if kind != "cache" and not self._source.num_rows:
                raise PackedFilesError(f"the packed files {[str(f) for f in files][:3]} hold no packs (0 rows)")
            found_metadata = found_metadata or _find_pack_metadata(files)
        if pack_metadata is None:
            pack_metadata = found_metadata
        self.pack_metadata = [pack_metadata] if isinstance(pack_metadata, dict) else pack_metadata
        if max_seq_length is None and self.pack_metadata:
            max_seq_length = max(int(p["pack_size"]) for p in self.pack_metadata)
        self.num_packs = int(self._source.num_rows)
        self._checks: BlockChecks | None = None  # made on the first validated read
        self.max_num_samples = max_num_samples
        self.samples_mapping = self._build_samples_mapping()
        self.collate_settings = {
            "eos_id": eos_id, "max_seq_length": max_seq_length, "pad_to_max_length": pad_to_max_length,
            "pad_seq_length_to_mult": pad_seq_length_to_mult, "pad_seq_to_mult": pad_seq_to_mult,
            "answer_only_loss": answer_only_loss, "pad_cu_seqlens": pad_cu_seqlens,
            "return_cu_seqlen": return_cu_seqlen, "pack_metadata": self.pack_metadata, "legacy_keys": legacy_keys}

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

    def block_bounds(self) -> np.ndarray:
        """Positions where the stored blocks begin (Parquet row groups, a cache's blocks), then `len(self)`:
        what `PackedSampler(locality_starts=)` and the block shuffle of `stable_datasets.streaming` use."""

        source = self._source
        if isinstance(source, ParquetRowGroups):
            stored = source.starts
        elif isinstance(source, _CacheRows):
            stored = block_bounds_of(source.dataset)
            if stored is None:  # a lazily shuffled view: no two neighbours share a stored block
                stored = np.arange(len(source.dataset) + 1, dtype=np.int64)
        else:
            stored = np.asarray([0, self.num_packs], dtype=np.int64)
        if self.samples_mapping is None:
            return np.asarray(stored, dtype=np.int64)
        from stable_datasets.streaming.order import runs_of_blocks  # local: the streaming package imports torch

        return runs_of_blocks(np.searchsorted(stored, self.samples_mapping, side="right") - 1)

    def _locate(self, idx: int) -> tuple[int, bool]:
        """(stored pack, padding) of sample `idx`. Megatron-Bridge's rule: a negative index is a padding sample
        (its loss mask zeroed) of sample `len(self) + idx` (through the samples mapping when there is one)."""
        given = int(idx)
        padding = given < 0
        position = given + len(self) if padding else given
        if not 0 <= position < len(self):
            raise IndexError(f"index {given} is out of range for {len(self)} samples"
                             + (" (a negative index is a padding sample of the sample len + index)" if padding else ""))
        return (int(self.samples_mapping[position]) if self.samples_mapping is not None else position), padding

    def __getitem__(self, idx: int) -> dict[str, np.ndarray]:
        pack, padding = self._locate(idx)
        if self._pages is not None:
            position = int(idx) + (len(self) if int(idx) < 0 else 0)
            stride = position - self._last_position if self._last_position is not None else 0
            steady = 0 < stride <= MAX_STRIDE and stride == self._last_stride
            self._last_position, self._last_stride = position, stride
            ahead = self._ahead.pop(pack, None) or self._read_pages(position, pack, stride if steady else 0)
            if ahead is not None:
                return self._sample(pack, ahead[0], padding, ahead[1])
        return self._sample(pack, self._source.row(pack), padding)

    def _reset_readahead(self) -> None:
        self._ahead: dict[int, tuple[dict[str, Any], bool]] = {}  # pack -> (row, validation flag), read ahead
        self._last_position: int | None = None
        self._last_stride = 0
        self._lone_reads = 0

    def _read_pages(self, position: int, pack: int, stride: int) -> tuple[dict[str, Any], bool] | None:
        """(row, validation flag) of `pack` read from its pages, or None for the row-group path.

        Samples requested in a steady `stride` (0: none) are read `readahead` at a time in one query
        and kept until asked for; a lone pack is read from its pages when its row group is not decoded
        already (the LRU) and is large enough for a query to beat decoding it.
        """
        pages, source = self._pages, self._source
        if stride and self.readahead > 1:
            positions = np.arange(position, min(len(self), position + stride * self.readahead), stride)
            packs = self.samples_mapping[positions] if self.samples_mapping is not None else positions
            packs = packs[np.sort(np.unique(packs, return_index=True)[1])]  # each pack once, the asked one first
        else:
            self._lone_reads += 1
            if source.locate(pack)[0] in source._cache or (self._lone_reads <= LONE_READS_BEFORE_PAGES
                                                           and not pages.started):
                return None
            packs = np.asarray([pack], np.int64)
        if not pages.usable(np.unique(pages.files_of(packs))):
            return None
        rows, flags = pages.read(packs)
        self._ahead = {int(p): (row, flag) for p, row, flag in zip(packs[1:].tolist(), rows[1:], flags[1:])}
        return rows[0], flags[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, np.ndarray]]:
        """A batch of samples, as `[self[i] for i in indices]` (a DataLoader with a batch size calls this).

        From Parquet files written with `pack_id` (`write_packed_parquet`) and DataFusion installed,
        the batch is read page by page in one query per file instead of a row group per pack.
        """
        if len(indices) < 2:
            return [self[i] for i in indices]
        located = [self._locate(i) for i in indices]
        packs = np.fromiter((pack for pack, _ in located), np.int64, count=len(located))
        if self._pages is None or not self._pages.usable(np.unique(self._pages.files_of(packs))):
            return [self._sample(pack, self._source.row(pack), padding) for pack, padding in located]
        rows, bad = self._pages.read(packs)
        return [self._sample(pack, row, padding, flag) for (pack, padding), row, flag in zip(located, rows, bad)]

    def _sample(self, pack: int, row: dict[str, Any], padding: bool, bad: bool | None = None) -> dict[str, np.ndarray]:
        """The sample of stored `row`; `bad` is its validation flag when the caller has it already."""
        input_ids, loss_mask, starts = row["input_ids"], row["loss_mask"], row["seq_start_id"]
        if input_ids is None or loss_mask is None or starts is None:  # (whether validated or not: nothing to serve)
            nulls = [c for c in ("input_ids", "loss_mask", "seq_start_id") if row[c] is None]
            raise PackedRowError(f"pack {pack} of {self.paths}: {', '.join(nulls)} is null")
        if type(input_ids) is not np.ndarray or type(loss_mask) is not np.ndarray or type(starts) is not np.ndarray:
            input_ids, loss_mask, starts = np.asarray(input_ids), np.asarray(loss_mask), np.asarray(starts)
        if self.validate and ((self._checks or self._block_checks()).is_bad(pack) if bad is None else bad):
            self._check(pack, input_ids, loss_mask, starts.astype(np.int64))
            raise PackedRowError(f"pack {pack} of {self.paths}: malformed (null or unreadable packed columns)")
        boundaries = np.empty(len(starts) + 1, np.int64)  # np.append costs ~5 µs a pack, more than the read
        boundaries[:-1] = starts  # int32 or int64 stored: converted in this one copy
        boundaries[-1] = len(input_ids)
        if padding:
            loss_mask = np.zeros_like(loss_mask)
        return {"input_ids": input_ids, "seq_boundaries": boundaries, "loss_mask": loss_mask}

    def _block_checks(self) -> BlockChecks:
        if self._checks is None:
            self._checks = BlockChecks(self._source)
        return self._checks

    def _check(self, pack: int, input_ids: np.ndarray, loss_mask: np.ndarray, starts: np.ndarray) -> None:
        """Raise Megatron-Bridge's message for a pack breaking its row rule (`row_fault`), naming the pack."""
        fault = row_fault(len(input_ids), len(loss_mask), starts)
        if fault is not None:
            raise PackedRowError(f"pack {pack} of {self.paths}: {fault}")

    @property
    def collate_fn(self) -> Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]:
        """`collate_packed` bound to this dataset's settings (eos_id and max_seq_length are required)."""
        settings = dict(self.collate_settings)
        if settings["eos_id"] is None or settings["max_seq_length"] is None:
            raise ValueError(f"collate_fn needs eos_id={getattr(self, '_eos_missing', '')} and max_seq_length= "
                             "(max_seq_length defaults to the pack_size of the packing metadata when there is one)")
        return functools.partial(collate_packed, **settings)

    # Pickling (DataLoader workers) carries the source as it is: Parquet sources carry their resolved
    # file list and row counts and reopen handles per process; .npy sources are plain arrays already.
    # Nothing is re-resolved or reloaded with allow_pickle behind the user's back. Rows read ahead stay behind.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_ahead", "_last_position", "_last_stride", "_lone_reads")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset_readahead()


def _page_reader(source: Any, page_reads: bool | None) -> Any:
    """The page reader of Parquet files (None: row groups only), and a log line, once per process, saying
    which path reads serve and how to get the page path when it is not taken.

    `page_reads=None` (default) uses pages where they beat row-group decodes (files of large row groups
    with `pack_id`, DataFusion installed); True uses them whatever the row-group size; False never.
    """

    files = source.paths
    where = f"{files[0]}" + (f" and {len(files) - 1} more" if len(files) > 1 else "")
    if page_reads is False:
        _log_once(f"packed Parquet {where}: row-group reads (page_reads=False)")
        return None
    pages = PackPages(files, source.file_rows(), COLUMNS, source.file_groups(),
                      min_group_rows=0 if page_reads else PAGE_MIN_GROUP_ROWS)
    if not datafusion_available():
        reason = "DataFusion is not installed (pip install stable-datasets[pages] for page-level reads)"
    elif PACK_ID not in source.file_schema.names:
        reason = (f"the files have no {PACK_ID} column (write_packed_parquet writes it; page-level reads "
                  "need it)")
    elif all(pages.small_groups(f) for f in range(len(files))):
        reason = (f"row groups of {pages.group_rows.mean():.0f} packs on average decode faster than a page "
                  f"query (pages from {PAGE_MIN_GROUP_ROWS} packs a group; write_packed_parquet writes ~230)")
    else:
        _log_once(f"packed Parquet {where}: page-level reads through DataFusion (batches, strided runs and "
                  "single packs of large row groups); the file check runs on the first read")
        return pages
    _log_once(f"packed Parquet {where}: row-group reads: {reason}")
    return None
