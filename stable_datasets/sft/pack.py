"""Tokenized sequences -> packs, and the files Megatron-Bridge reads.

A sequence of n tokens occupies n - 1 positions of a pack (inputs drop the last token, labels
the first), so packing uses `len(ids) - 1` as each item's size, as Megatron-Bridge does.
Each pack row holds `input_ids` (int32), `loss_mask` (int8, shifted left by one within each
sequence: position i says whether token i + 1 is trained on) and `seq_start_id` (int32,
starting at 0).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.features import Features
from stable_datasets.features.sequence import Sequence as SequenceFeature
from stable_datasets.features.value import Value
from stable_datasets.layouts import parquet_shards
from stable_datasets.sft.packing import ALGORITHMS, pack_indices, packing_metadata
from stable_datasets.sft.parquet_pages import PACK_ID, PAGE_BYTES
from stable_datasets.sft.tokenize import chat_tokenizer
from stable_datasets.streaming.source import MapStyle

if TYPE_CHECKING:
    from stable_datasets.sft.tokenize import ChatTokenizer

#: row-group size of the files `write_packed_parquet` writes with `pack_id` (chosen in benchmarks/RESULTS.md,
#: issue 13 part 14: page-level reads make large groups cheap to read from, and they keep the footer small)
PACKED_ROW_GROUP_BYTES = 4 << 20
PACKED_FEATURES = Features({"input_ids": SequenceFeature(Value("int32")), "loss_mask": SequenceFeature(Value("int8")),
                            "seq_start_id": SequenceFeature(Value("int32"))})


@dataclass
class PackingConfig:
    """How conversations become packs; every field (and the tokenizer's identity) is fingerprinted."""

    tokenizer: Any = None  # None: the built-in ByteTokenizer
    pack_size: int = 4096
    algorithm: str = "first_fit_shuffle"
    seed: int = 0
    loss_on: str = "assistant"  # or "all"
    overlong: str = "skip"  # or "truncate"
    eos_id: int | None = None
    pad_seq_to_mult: int = 1  # > 1: each sequence padded with EOS to a multiple (context parallelism)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown packing algorithm {self.algorithm!r}; choose one of {ALGORITHMS}")
        if self.overlong not in ("skip", "truncate"):
            raise ValueError(f"overlong must be 'skip' or 'truncate', got {self.overlong!r}")
        if self.pack_size < 2:
            raise ValueError(f"pack_size must be at least 2, got {self.pack_size}")
        _check_pad_multiple(self.pad_seq_to_mult, self.pack_size)

    def chat_tokenizer(self) -> ChatTokenizer:
        return chat_tokenizer(self.tokenizer, self.eos_id)

    def fingerprint_identity(self) -> dict[str, Any]:
        return {"tokenizer": self.chat_tokenizer().identity(), "pack_size": self.pack_size,
                "algorithm": self.algorithm, "seed": self.seed, "loss_on": self.loss_on, "overlong": self.overlong,
                "pad_seq_to_mult": self.pad_seq_to_mult, "extra": self.extra}

    def pack_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `pack_sequences` and `pack_row` (`plan_packs` takes `pad_seq_to_mult` alone)."""
        if self.pad_seq_to_mult == 1:
            return {}
        return {"pad_seq_to_mult": self.pad_seq_to_mult, "pad_id": self.chat_tokenizer().eos_id}


def _check_pad_multiple(pad_seq_to_mult: int, pack_size: int) -> None:
    if isinstance(pad_seq_to_mult, bool) or not isinstance(pad_seq_to_mult, int) or pad_seq_to_mult < 1:
        raise ValueError(f"pad_seq_to_mult must be a positive int, got {pad_seq_to_mult!r}")
    if pad_seq_to_mult > pack_size:
        raise ValueError(f"pack_size={pack_size} must be at least pad_seq_to_mult={pad_seq_to_mult}")


@dataclass
class PackPlan:
    """Which sequences go in which pack: `bins` hold indices into the sequences given to `plan_packs`."""

    bins: list[list[int]]
    metadata: dict[str, Any]
    limit: int  # a sequence keeps at most this many tokens (pack_size + 1; more only when skipped)
    skipped: int = 0
    truncated: int = 0


def plan_packs(token_counts: np.ndarray, pack_size: int, algorithm: str = "first_fit_shuffle", seed: int = 0,
               overlong: str = "skip", *, pad_seq_to_mult: int = 1) -> PackPlan:
    """Bins over every sequence of a split, from token counts alone (a sequence of n tokens fills
    n - 1 positions). Overlong sequences are skipped or cut to pack_size + 1 tokens; sequences
    of fewer than 2 tokens are left out.

    With `pad_seq_to_mult > 1` a sequence fills its n - 1 positions rounded up to a multiple
    (`pack_row` pads it so), and it is overlong when that passes the largest multiple that fits
    in `pack_size` (cut to that multiple with `overlong="truncate"`), as Megatron-Bridge does."""
    _check_pad_multiple(pad_seq_to_mult, pack_size)
    counts = np.asarray(token_counts, dtype=np.int64)
    cap = pack_size // pad_seq_to_mult * pad_seq_to_mult  # the longest padded length that fits
    padded = -(-(counts - 1) // pad_seq_to_mult) * pad_seq_to_mult
    overlong_mask = padded > cap
    skipped = int(overlong_mask.sum()) if overlong == "skip" else 0
    truncated = int(overlong_mask.sum()) if overlong == "truncate" else 0
    if skipped:
        logger.warning("skipped {} sequences longer than pack_size={} (overlong='truncate' keeps them cut)",
                       skipped, pack_size)
    kept = np.flatnonzero((counts >= 2) & ~(overlong_mask if overlong == "skip" else False))
    if not len(kept):
        raise ValueError("no sequence fits the pack size; nothing to pack")
    lengths = np.minimum(padded[kept], cap)
    bins = pack_indices(lengths, pack_size, algorithm, seed)
    metadata = packing_metadata(lengths, [[int(lengths[i]) for i in b] for b in bins], pack_size)
    return PackPlan(bins=[[int(kept[i]) for i in b] for b in bins], metadata=metadata, limit=cap + 1,
                    skipped=skipped, truncated=truncated)


#: token ids are stored as int32 (Megatron's packed format): an id must be below this
TOKEN_ID_LIMIT = 1 << 31


class PackInputError(StableDatasetsError, ValueError):
    """A sequence to pack whose token ids or loss mask do not fit the packed format's types (int32 ids in
    [0, 2**31), a 0/1 loss mask): refused, naming the sequence, rather than wrapped into other tokens."""


def checked_tokens(ids: np.ndarray, mask: np.ndarray, ends: np.ndarray, names: Sequence[Any] | None = None,
                   what: str = "sequence") -> tuple[np.ndarray, np.ndarray]:
    """(ids as int32, mask as int8) of sequences laid end to end (each ending at `ends`), or a PackInputError
    naming the first sequence (`names[k]`, else its place k in the pack) whose ids or mask do not fit: a cast
    alone would wrap id 2**31 to -2**31 and mask 256 to 0. One min/max per pack, no per-token Python."""
    ids, mask = np.asarray(ids), np.asarray(mask)
    bad_at, why = None, ""
    if ids.dtype.kind not in "iu" and ids.size:
        bad_at, why = 0, f"token ids must be integers, got {ids.dtype}"
    elif ids.size and (int(ids.min()) < 0 or int(ids.max()) >= TOKEN_ID_LIMIT):
        bad_at = int(np.flatnonzero((ids < 0) | (ids >= TOKEN_ID_LIMIT))[0])
        why = f"token id {int(ids[bad_at])} is not in [0, 2**31) (input_ids are int32)"
    if bad_at is None and mask.size and mask.dtype.kind != "b":
        off = (mask != 0) & (mask != 1)
        if off.any():
            bad_at = int(np.flatnonzero(off)[0])
            why = f"loss_mask value {mask[bad_at].item()!r} is not 0 or 1"
    if bad_at is not None:
        k = int(np.searchsorted(np.asarray(ends), bad_at, side="right"))
        name = names[k] if names is not None and k < len(names) else k
        raise PackInputError(f"{what} {name}: {why}; refusing to pack it (a cast would silently change it)")
    return ids.astype(np.int32, copy=False), mask.astype(np.int8, copy=False)


def shifted_mask(mask: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The packed format's labels rule for sequences laid end to end (none empty, each ending at `ends`): each
    sequence's loss mask moved one token left, with a 0 at its last token (int8)."""
    shifted = np.empty(len(mask), dtype=np.int8)
    shifted[:-1] = mask[1:]
    shifted[ends - 1] = 0
    return shifted


def pack_row(sequences: Sequence[tuple[np.ndarray, np.ndarray]], limit: int, *, pad_seq_to_mult: int = 1,
             pad_id: int | None = None, names: Sequence[Any] | None = None,
             what: str = "sequence") -> dict[str, np.ndarray]:
    """One pack from its (input_ids, loss_mask) sequences, each cut to `limit` tokens and, with
    `pad_seq_to_mult > 1`, padded with `pad_id` (zero loss) to a multiple after the label shift. Ids and mask
    that do not fit int32 / 0-1 are a PackInputError naming the sequence (`names`: what each sequence is)."""
    parts = [(ids[:limit], mask[:limit]) for ids, mask in sequences]
    if pad_seq_to_mult > 1:
        if pad_id is None:
            raise ValueError("pad_seq_to_mult > 1 needs pad_id=, the tokenizer's EOS id")
        parts = [_pad_to_multiple(ids, mask, pad_seq_to_mult, pad_id) for ids, mask in parts]
    lengths = np.fromiter((len(ids) for ids, _ in parts), np.int64, count=len(parts))
    ends = np.cumsum(lengths)
    starts = (ends - lengths).astype(np.int32)
    if not parts:
        return {"input_ids": np.zeros(0, np.int32), "loss_mask": np.zeros(0, np.int8), "seq_start_id": starts}
    id_parts = [np.asarray(ids) for ids, _ in parts]
    floats = [k for k, ids in enumerate(id_parts) if ids.size and ids.dtype.kind not in "iu"]
    if floats:  # (joined, a float sequence would turn every id into a float: name it before)
        bad = id_parts[floats[0]]
        checked_tokens(bad, np.zeros(0), np.array([bad.size]), [names[floats[0]] if names else floats[0]], what)
    ids, mask = checked_tokens(_joined(id_parts), _joined([mask for _, mask in parts]), ends, names, what)
    if not lengths.all():  # an empty sequence still gets its one shifted mask entry
        shifted = [np.append(mask[a + 1:b], 0).astype(np.int8) for a, b in zip(starts.tolist(), ends.tolist())]
        return {"input_ids": ids, "loss_mask": np.concatenate(shifted), "seq_start_id": starts}
    # the label shift of every sequence at once: mask[1:] and a 0 at its end
    return {"input_ids": ids, "loss_mask": shifted_mask(mask, ends), "seq_start_id": starts}


def _joined(arrays: list[Any]) -> np.ndarray:
    """The arrays end to end. Mixed integer types join as int64 (numpy would promote uint64 with int64 to float64,
    rounding ids); a uint64 value past int64 is clipped to the int64 maximum, which `checked_tokens` refuses."""
    arrays = [np.asarray(a) for a in arrays]
    kinds = {a.dtype for a in arrays}
    if len(kinds) > 1 and all(d.kind in "iub" for d in kinds):
        arrays = [np.minimum(a, np.iinfo(np.int64).max).astype(np.int64) if a.dtype == np.uint64 else a
                  for a in arrays]
        return np.concatenate(arrays, dtype=np.int64)
    return np.concatenate(arrays)


def _pad_to_multiple(ids: np.ndarray, mask: np.ndarray, multiple: int, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    pad = -(-(len(ids) - 1) // multiple) * multiple + 1 - len(ids)
    if pad <= 0:
        return ids, mask
    ids, mask = np.asarray(ids), np.asarray(mask)  # (their own types: checked_tokens refuses what does not fit)
    return (_joined([ids, np.full(pad, pad_id, np.int64)]),
            np.concatenate([mask, np.zeros(pad, mask.dtype)]))


@dataclass
class PackResult:
    rows: list[dict[str, np.ndarray]]
    metadata: dict[str, Any]
    skipped: int = 0
    truncated: int = 0


def pack_sequences(sequences: Sequence[tuple[np.ndarray, np.ndarray]], pack_size: int,
                   algorithm: str = "first_fit_shuffle", seed: int = 0, overlong: str = "skip", *,
                   pad_seq_to_mult: int = 1, pad_id: int | None = None) -> PackResult:
    """Pack (input_ids, loss_mask) pairs (mask aligned with input_ids) into rows.

    With `pad_seq_to_mult > 1` each sequence is padded with `pad_id` (the EOS id) and a zero
    loss mask until its length after the label shift is a multiple of `pad_seq_to_mult`, as
    Megatron-Bridge prepares packs for context parallelism; `collate_packed(pad_seq_to_mult=)`
    finds the real lengths again (see `plan_packs` for overlong sequences).
    """
    if pad_seq_to_mult > 1 and pad_id is None:
        raise ValueError("pack_sequences(pad_seq_to_mult>1) needs pad_id=, the tokenizer's EOS id")
    plan = plan_packs(np.fromiter((len(ids) for ids, _ in sequences), np.int64, count=len(sequences)), pack_size,
                      algorithm, seed, overlong, pad_seq_to_mult=pad_seq_to_mult)
    rows = [pack_row([sequences[i] for i in members], plan.limit, pad_seq_to_mult=pad_seq_to_mult, pad_id=pad_id,
                     names=members) for members in plan.bins]
    return PackResult(rows=rows, metadata=plan.metadata, skipped=plan.skipped, truncated=plan.truncated)


def metadata_file_name(pack_size: int) -> str:
    return f"{pack_size}_metadata.jsonl"


def metadata_file_text(metadata: dict[str, Any]) -> str:
    """Megatron-Bridge reads this file with json.load: a JSON list of metadata dicts."""
    return json.dumps([metadata])


#: the columns of a packed Parquet file as Megatron-Bridge's `write_packed_parquet` writes them (2026): the loss
#: mask is list<int8>, like our caches' PACKED_FEATURES (files with list<uint8> masks, the earlier plan's, still read)
PACKED_PARQUET_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8())),
                                   ("seq_start_id", pa.list_(pa.int32()))])


def binary_loss_mask(mask: Any, row: int) -> np.ndarray:
    """A loss mask of bools, uint8 or any ints as int8 0/1, as Megatron-Bridge normalises it on write; a value
    other than 0/1 (or False/True) is a PackInputError naming the row, never written as another weight."""
    values = np.asarray(mask)
    if values.size and values.dtype.kind not in "biu":
        raise PackInputError(f"pack row {row}: field loss_mask holds {values.dtype} values; it takes 0/1 or bools")
    if values.size and values.dtype != np.bool_ and ((values < 0) | (values > 1)).any():
        bad = values[(values < 0) | (values > 1)][0]
        raise PackInputError(f"pack row {row}: field loss_mask holds {bad}; a loss mask is 0/1 (or bools)")
    return values.astype(np.int8, copy=False)


def packed_table(rows: Iterable[dict[str, Any]], first_row: int = 0) -> pa.Table:
    """Pack rows as a table of PACKED_PARQUET_SCHEMA (what write_packed_parquet writes); `first_row` numbers the
    rows in errors."""
    rows = list(rows)
    columns = {}
    for name, dtype in (("input_ids", np.int32), ("loss_mask", np.int8), ("seq_start_id", np.int32)):
        if name == "loss_mask":
            values = [binary_loss_mask(r[name], first_row + k) for k, r in enumerate(rows)]
        else:
            values = [np.asarray(r[name], dtype=dtype) for r in rows]
        offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int32)
        flat = np.concatenate(values).astype(dtype, copy=False) if values else np.zeros(0, dtype)
        columns[name] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
    return pa.table(columns, schema=PACKED_PARQUET_SCHEMA)


def write_packed_parquet(rows: Iterable[dict[str, Any]] | Any, path: str | Path, *,
                         pack_metadata: dict[str, Any] | None = None, row_group_bytes: int | None = None,
                         row_group_rows: int | None = None, compression: str = "zstd", pack_ids: bool = True,
                         page_bytes: int | None = None) -> Path:
    """Write packs as a Megatron-Bridge `*.idx.parquet` file, with `{pack_size}_metadata.jsonl` beside it.

    `rows` may be dicts, a PackedSFTDataset or a StableDataset of packs, and are written in
    chunks (memory stays bounded). Row groups hold `row_group_bytes` of data, at most
    `row_group_rows` rows. With `pack_ids` (default) the file also holds a `pack_id` column (the
    row number, delta-packed: a few bytes a pack) and data pages of `page_bytes` (default about one
    pack), which is what page-level reads need (`stable_datasets.sft.parquet_pages`; other readers
    ignore the column), and row groups default to `PACKED_ROW_GROUP_BYTES` (4 MiB, ~230 packs of
    4,096 tokens): a small footer (opening 100k packs in ~40 ms) and one query per batch. Without
    `pack_ids` they default to the layout's 256 KiB, which a reader decodes whole per random pack.
    """
    import pyarrow.parquet as pq


    options = dict(parquet_shards.DEFAULT_OPTIONS, compression=compression)
    if pack_ids:
        options["row_group_bytes"] = PACKED_ROW_GROUP_BYTES
    if row_group_bytes is not None:
        options["row_group_bytes"] = row_group_bytes
    if row_group_rows is not None:
        options["row_group_rows"] = row_group_rows
    parquet_shards.check_options(options)
    path = Path(path)
    if not path.name.lower().endswith((".parquet", ".pq")):  # Megatron-Bridge takes .idx.pq too, in any case
        path = path.with_name(path.name + ".idx.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(rows, MapStyle) and not isinstance(rows, list):
        source = rows
        rows = (_as_stored(source[i]) for i in range(len(source)))
    schema = PACKED_PARQUET_SCHEMA
    if pack_ids:
        schema = schema.append(pa.field(PACK_ID, pa.int64(), nullable=False))
    settings = parquet_shards.writer_settings(options, schema)
    if pack_ids or page_bytes:
        settings["data_page_size"] = page_bytes or PAGE_BYTES
    written = 0

    def numbered(table: pa.Table) -> pa.Table:
        if not pack_ids:
            return table
        ids = pa.array(np.arange(written, written + table.num_rows, dtype=np.int64))
        return table.append_column(schema.field(PACK_ID), ids)

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema, **settings) as writer:
            rows = iter(rows)
            pending = packed_table(itertools.islice(rows, 256))  # sizes the row groups
            seen = pending.num_rows
            per_group = parquet_shards.rows_per_group(options, pending.nbytes / max(pending.num_rows, 1))
            while True:
                more = packed_table(itertools.islice(rows, max(per_group, 1024)), first_row=seen)
                seen += more.num_rows
                if more.num_rows:
                    pending = pa.concat_tables([pending, more])
                whole = pending.num_rows // per_group * per_group if more.num_rows else pending.num_rows
                if whole:  # only whole row groups until the last one
                    writer.write_table(numbered(pending.slice(0, whole)), row_group_size=per_group)
                    written += whole
                    pending = pending.slice(whole)
                if not more.num_rows:
                    break
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    if pack_metadata is not None:
        (path.parent / metadata_file_name(int(pack_metadata["pack_size"]))).write_text(
            metadata_file_text(pack_metadata))
    return path


def _as_stored(item: dict[str, Any]) -> dict[str, Any]:
    """A dataset item ({input_ids, seq_boundaries, loss_mask} or a stored row) -> stored columns."""
    if "seq_start_id" in item:
        return item
    return {"input_ids": item["input_ids"], "loss_mask": item["loss_mask"],
            "seq_start_id": np.asarray(item["seq_boundaries"])[:-1]}
