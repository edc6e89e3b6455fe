"""Packs in Megatron's indexed `.bin`/`.idx` files, the loss mask in each token's sign bit.

The packed indexed variant of Megatron-Bridge's packing surface (issue 38): the files are an
ordinary Megatron-Core indexed dataset of int32 (`stable_datasets.megatron.indexed`), so its
readers, merges and object-store reads apply, and

- one document per pack, one sequence per packed sub-sequence: `seq_start_id` is the running sum
  of the document's sequence lengths (from 0, strictly increasing: an empty sequence has no place);
- each int32 value is a token id (non-negative, below 2**31) in the low 31 bits with the token's
  loss mask (0/1, as stored: already shifted left by one) in the sign bit: a negative value is a
  token that counts for the loss.

Packs read back as `PackedSFTDataset` items (`input_ids`, `seq_boundaries`, `loss_mask`), so
`collate_packed` gives the batch it gives for the same packs read from Parquet. Megatron-Bridge's
snapshot has no such reader or writer: the layout follows the issue's description.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stable_datasets.errors import StableDatasetsError
from stable_datasets.megatron.indexed import IndexedDataset, IndexedWriter
from stable_datasets.sft.collate import collate_packed

__all__ = ["PackedIndexedDataset", "PackedIndexedError", "PackedIndexedRows", "decode_packed_tokens",
           "encode_packed_tokens", "indexed_pairs_in", "indexed_prefix", "write_packed_indexed"]

SIGN_BIT = np.int64(1) << 31
ID_LIMIT = int(SIGN_BIT)  # ids must stay below the sign bit


class PackedIndexedError(StableDatasetsError, ValueError):
    """A pack that the sign-bit layout cannot hold, or indexed files that are not such packs (names file, row and
    field)."""


def encode_packed_tokens(input_ids: np.ndarray, loss_mask: np.ndarray) -> np.ndarray:
    """int32 values: the id in the low 31 bits, the 0/1 mask in the sign bit (inputs already checked)."""
    return (input_ids.astype(np.int64) | (loss_mask.astype(np.int64) << 31)).astype(np.uint32).view(np.int32)


def decode_packed_tokens(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids int32, loss_mask int8) of sign-bit values."""
    values = np.asarray(values, dtype=np.int32)
    return values & np.int32(0x7FFFFFFF), (values < 0).astype(np.int8)


def _checked_row(row: Mapping[str, Any], number: int, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, mask, sequence lengths) of one pack, or a PackedIndexedError naming file, row and field."""
    def fault(field: str, what: str) -> PackedIndexedError:
        return PackedIndexedError(f"{where}: pack row {number}: field {field} {what}")

    ids, mask = np.asarray(row["input_ids"]), np.asarray(row["loss_mask"])
    starts = np.asarray(row["seq_start_id"], dtype=np.int64)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise fault("input_ids", f"must be a flat list of integer ids, got {ids.dtype} of shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= ID_LIMIT):
        bad = ids[(ids < 0) | (ids >= ID_LIMIT)][0]
        raise fault("input_ids", f"holds {bad}; ids are non-negative and below 2**31 (the sign bit holds the mask)")
    if mask.shape != ids.shape:
        raise fault("loss_mask", f"has {mask.size} values for {ids.size} input_ids")
    if mask.size and mask.dtype.kind not in "biu":
        raise fault("loss_mask", f"holds {mask.dtype} values; a loss mask is binary (0/1 or bools)")
    if mask.size and ((mask < 0) | (mask > 1)).any():
        raise fault("loss_mask", f"holds {mask[(mask < 0) | (mask > 1)][0]}; a loss mask is binary (0/1 or bools)")
    if starts.size == 0 or starts[0] != 0:
        raise fault("seq_start_id", f"must start with 0, got {starts[:5].tolist()}")
    if (np.diff(starts) <= 0).any():
        at = int(np.argmax(np.diff(starts) <= 0)) + 1
        raise fault("seq_start_id", f"must be strictly increasing: {starts[at - 1]} then {starts[at]} at index {at}")
    if starts[-1] >= ids.size:
        raise fault("seq_start_id", f"starts a sequence at {starts[-1]}, past the {ids.size} input_ids")
    return ids, mask, np.diff(np.append(starts, ids.size))


def write_packed_indexed(rows: Iterable[Mapping[str, Any]], output_prefix: str | os.PathLike,
                         chunk_rows: int = 1024) -> int:
    """Write packs (`input_ids`, `loss_mask`, `seq_start_id`) as `output_prefix.bin`/`.idx`; returns the packs
    written. Every row is checked first (module docstring); on an error nothing is left visible."""
    where = f"{os.fspath(output_prefix)}.bin"
    writer = IndexedWriter(output_prefix, dtype=np.int32)
    written = 0
    try:
        rows = iter(rows)
        while chunk := list(itertools.islice(rows, chunk_rows)):
            checked = [_checked_row(row, written + k, where) for k, row in enumerate(chunk)]
            values = np.concatenate([encode_packed_tokens(ids, mask) for ids, mask, _ in checked])
            lengths = np.concatenate([lens for _, _, lens in checked])
            writer.add_block(values, lengths, documents=np.array([len(lens) for _, _, lens in checked]))
            written += len(chunk)
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    return written


class PackedIndexedDataset:
    """Packs of a sign-bit `.bin`/`.idx` pair as `PackedSFTDataset` items; `collate_fn` is `collate_packed` with
    `collate_options` (`eos_id=`, `max_seq_length=`, `pad_seq_to_mult=`, ...). Opening checks the layout: int32
    values and every pack's sequences non-empty (`seq_start_id` strictly increasing)."""

    def __init__(self, path_prefix: str | os.PathLike, storage_options: dict[str, Any] | None = None,
                 **collate_options: Any):
        self.indexed = IndexedDataset(path_prefix, storage_options=storage_options)
        self.collate_options = collate_options
        where = self.indexed.bin_path
        if self.indexed.dtype != np.int32:
            raise PackedIndexedError(f"{where}: field input_ids is stored as {self.indexed.dtype}; sign-bit packs "
                                     "are int32")
        docs = self.indexed.document_indices
        empty_pack = np.flatnonzero(np.diff(docs) == 0)
        if len(empty_pack):
            raise PackedIndexedError(f"{where}: pack row {int(empty_pack[0])}: field seq_start_id is empty; a pack "
                                     "holds at least one sequence")
        empty = np.flatnonzero(self.indexed.sequence_lengths == 0)
        if len(empty):
            row = int(np.searchsorted(docs, empty[0], side="right")) - 1
            raise PackedIndexedError(f"{where}: pack row {row}: field seq_start_id is not strictly increasing "
                                     f"(sequence {int(empty[0] - docs[row])} is empty)")

    def __len__(self) -> int:
        return self.indexed.document_count

    def __getitem__(self, idx: int) -> dict[str, np.ndarray]:
        if not -len(self) <= idx < len(self):
            raise IndexError(f"pack {idx} is out of range for {len(self)} packs ({self.indexed.path_prefix})")
        row = self.row(idx % len(self))
        starts = row["seq_start_id"]
        return {"input_ids": row["input_ids"], "seq_boundaries": np.append(starts, len(row["input_ids"])),
                "loss_mask": row["loss_mask"]}

    def row(self, idx: int) -> dict[str, np.ndarray]:
        """Pack `idx` (0 <= idx < len) as a packed Parquet row stores it: `input_ids`, `loss_mask`,
        `seq_start_id`."""
        first, last = int(self.indexed.document_indices[idx]), int(self.indexed.document_indices[idx + 1])
        ids, mask = decode_packed_tokens(self.indexed.tokens(first, last))
        starts = np.zeros(last - first, dtype=np.int64)
        np.cumsum(self.indexed.sequence_lengths[first:last - 1], out=starts[1:])
        return {"input_ids": ids, "loss_mask": mask, "seq_start_id": starts}

    def collate_fn(self, batch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """`collate_packed(batch, **collate_options)`: the batch the same packs give from Parquet."""
        return collate_packed(batch, **self.collate_options)


class PackedIndexedRows:
    """The packs of one or more packed indexed prefixes, end to end, as the stored rows `PackedSFTDataset` reads
    (`row(i)`, `num_rows`): so a Megatron-Bridge config naming an indexed prefix opens as packs, the same class
    and collate as Parquet. Every pack was checked when its files opened (`PackedIndexedDataset`), and the sign-bit
    encoding admits no other fault, so `bad_packs()` flags none."""

    def __init__(self, prefixes: Sequence[str | os.PathLike]):
        self.paths = [os.fspath(p) for p in prefixes]
        self.files = [PackedIndexedDataset(p) for p in self.paths]
        self.starts = np.cumsum([0] + [len(f) for f in self.files]).astype(np.int64)
        self.num_rows = int(self.starts[-1])

    def row(self, index: int) -> dict[str, np.ndarray]:
        f = int(np.searchsorted(self.starts, index, side="right")) - 1
        return self.files[f].row(index - int(self.starts[f]))

    def bad_packs(self) -> np.ndarray:
        return np.zeros(self.num_rows, dtype=bool)


def indexed_prefix(path: str | os.PathLike) -> str | None:
    """The prefix of the local packed indexed pair `path` names (`x`, `x.bin` or `x.idx`), or None when there is
    no such pair."""
    stem = _stem(path)
    return stem if os.path.isfile(stem + ".bin") and os.path.isfile(stem + ".idx") else None


def indexed_pairs_in(folder: str | os.PathLike) -> list[str]:
    """Prefixes of the `.bin`/`.idx` pairs in `folder`, sorted."""
    return sorted(p for p in (indexed_prefix(f) for f in Path(folder).glob("*.idx")) if p is not None)


def half_pair(path: str | os.PathLike) -> str | None:
    """What is missing when `path` names half of a pair (`x.bin` without `x.idx`, or the reverse), else None."""
    stem = _stem(path)
    present = [os.path.isfile(stem + ".bin"), os.path.isfile(stem + ".idx")]
    if present.count(True) != 1:
        return None
    have, missing = (".bin", ".idx") if present[0] else (".idx", ".bin")
    return f"{stem}{have} exists but {stem}{missing} is missing (a packed indexed pair needs both)"


def _stem(path: str | os.PathLike) -> str:
    """The prefix a path names: `x` for `x`, `x.bin` or `x.idx` (any case)."""
    text = os.fspath(path)
    return text[:-4] if text.lower().endswith((".bin", ".idx")) else text
