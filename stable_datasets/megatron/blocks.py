"""Token blocks for pretraining: fixed-length samples cut across document boundaries, as Megatron-Core's `GPTDataset`.

Megatron-Core builds three indices from one `numpy.random.RandomState(seed)`: the document index (the split's
documents repeated for each epoch and shuffled; a short final epoch is shuffled on its own), the sample index
(where each sample starts: a position in the document index and an offset in that document) and the shuffle index
(a permutation of the samples; a separate final epoch again on its own). Sample j is the tokens at positions
[j * seq_length, (j + 1) * seq_length + extra) of the shuffled documents laid end to end (`extra` is 1 with
`add_extra_token`: one more token, so the inputs and the shifted labels are both `seq_length` long).

`TokenBlocks` draws the same random numbers in the same order, so it has the same indices and serves the same
samples. Megatron builds the sample index by walking every document in C++; here it is a binary search of each
sample's first token over the cumulative document lengths, numpy a chunk of samples at a time. The indices kept are
Megatron's own, in its dtypes (document index 4 bytes an entry, sample index 8 and shuffle index 4 bytes a
sample); nothing is per token. `token_blocks` serves the samples as a stream with the elastic resume of every
stream here (streaming/iterable.py): sample i of the stream is sample i of Megatron's `GPTDataset`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from stable_datasets.megatron.indexed import IndexedDataset
from stable_datasets.streaming.iterable import StreamingDataset

#: Megatron-Core's pad token id when its tokenizer has none (`megatron_dataset._PAD_TOKEN_ID`)
PAD_TOKEN_ID = -1
#: a final epoch with fewer samples than this share of an epoch is shuffled apart (Megatron-Core's threshold)
SEPARATE_FINAL_EPOCH_BELOW = 0.80
SPLIT_NAMES = ("train", "valid", "test")
#: samples whose place in the documents is found together while the sample index is built
SAMPLES_PER_CHUNK = 1 << 20


class ColumnTokens:
    """A dataset's token column with the reading API `TokenBlocks` needs (`sequence_lengths`, `get`): the lengths
    from the Arrow offsets a batch at a time, each document read when a sample needs it."""

    def __init__(self, dataset: Any, column: str = "input_ids"):
        if column not in dataset.column_names:
            raise KeyError(f"column {column!r} is not in the dataset; columns are {dataset.column_names}")
        self.dataset, self.column = dataset.select_columns([column]), column
        lengths = [np.diff(t.column(column).combine_chunks().offsets.to_numpy())
                   for t in self.dataset.with_format("arrow").iter(batch_size=16_384)]
        self.sequence_lengths = np.concatenate(lengths).astype(np.int32) if lengths else np.zeros(0, np.int32)
        self.identity = f"dataset:{dataset.fingerprint}:{column}"

    def get(self, idx: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        tokens = np.asarray(self.dataset[int(idx)][self.column], dtype=np.int64)
        return tokens[offset:] if length is None else tokens[offset:offset + length]


def open_tokens(source: Any, column: str = "input_ids") -> Any:
    """An indexed dataset prefix (str or path), an `IndexedDataset`, or a dataset with a token-list column."""
    if isinstance(source, (str, os.PathLike)):
        return IndexedDataset(source)
    if isinstance(source, IndexedDataset) or (hasattr(source, "sequence_lengths") and hasattr(source, "get")):
        return source
    if hasattr(source, "column_names") and hasattr(source, "fingerprint"):
        return ColumnTokens(source, column)
    raise TypeError(f"token blocks read an indexed dataset prefix, an IndexedDataset or a dataset with a {column!r} "
                    f"column, got {type(source).__name__}")


def source_identity(tokens: Any) -> str:
    """What the samples are cut from: an indexed dataset's index bytes (hashed) and data size, not its path, so a
    state saved on one cluster resumes on another that mounts a copy elsewhere; a dataset's fingerprint."""
    if isinstance(tokens, IndexedDataset):
        digest = hashlib.sha256(Path(tokens.idx_path).read_bytes())
        return f"indexed:{digest.hexdigest()[:16]}:{os.path.getsize(tokens.bin_path)}"
    return getattr(tokens, "identity", None) or hashlib.sha256(
        np.ascontiguousarray(tokens.sequence_lengths).tobytes()).hexdigest()[:16]


def split_documents(count: int, split: str | None, split_name: str) -> tuple[int, int]:
    """The documents [first, last) of `split_name` under Megatron's `--split "969,30,1"` weights (None: all).

    The weights are normalised and laid end to end as Megatron-Core's `parse_and_normalize_split` and
    `convert_split_vector_to_split_matrix` do (the same float sums), each bound rounded to a document."""
    if split is None:
        return 0, count
    if split_name not in SPLIT_NAMES:
        raise ValueError(f"split_name must be one of {SPLIT_NAMES}, got {split_name!r}")
    try:
        weights = [float(w) for w in split.replace("/", ",").split(",")]
    except ValueError:
        raise ValueError(f"split {split!r} is not comma-separated weights like '969,30,1'") from None
    weights += [0.0] * (3 - len(weights))
    if len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(f"split {split!r} needs at most three non-negative weights with a positive sum")
    normalised = (np.array(weights, dtype=np.float64) / np.sum(np.array(weights, dtype=np.float64))).tolist()
    ends = [0.0]
    for w in normalised:
        ends.append(ends[-1] + w)
    which = SPLIT_NAMES.index(split_name)
    lo, hi = ends[which], ends[which + 1]
    if hi <= lo:
        raise ValueError(f"split {split!r} gives the {split_name} split no documents")
    return round(lo * float(count)), round(hi * float(count))


def _shuffled(values: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    rng.shuffle(values)
    return values


class TokenBlocks:
    """Megatron-Core's `GPTDataset` samples over `source` as a map-style dataset (the module docstring).

    `num_samples` None: one epoch's samples; else enough epochs for that many (Megatron's `num_samples`, which a
    blend sets per dataset). `split` ("969,30,1") with `split_name` picks the documents as Megatron's `--split`.
    Item i is `{"tokens", "labels", "loss_mask", "position_ids"}` as Megatron-Core's `GPTDataset[i]` with its
    default options (no EOD resets, no EOD loss mask, no attention mask); `text(i)` is the raw token window."""

    def __init__(self, source: Any, seq_length: int, *, seed: int, num_samples: int | None = None,
                 split: str | None = None, split_name: str = "train", add_extra_token: bool = True,
                 drop_last_partial: bool = True, column: str = "input_ids"):
        if isinstance(seq_length, bool) or not isinstance(seq_length, int) or seq_length < 2:
            raise ValueError(f"seq_length must be an int of at least 2, got {seq_length!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ValueError(f"seed must be an int in [0, 2**32) (numpy's RandomState seed), got {seed!r}")
        if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, int)
                                        or num_samples < 0):
            raise ValueError(f"num_samples must be None or a non-negative int, got {num_samples!r}")
        self.tokens = open_tokens(source, column)
        self.seq_length, self.seed, self.num_samples = seq_length, seed, num_samples
        self.extra = int(bool(add_extra_token))
        self.split, self.split_name, self.drop_last_partial = split, split_name, bool(drop_last_partial)
        sizes = np.asarray(self.tokens.sequence_lengths)
        first, last = split_documents(len(sizes), split, split_name)
        self.documents = np.arange(first, last, dtype=np.int32)
        self.tokens_per_epoch = int(np.sum(sizes[first:last], dtype=np.int64))
        if self.tokens_per_epoch == 0 or (num_samples is None and self._samples_in(self.tokens_per_epoch) < 1):
            raise ValueError(f"the {split_name} documents [{first}, {last}) hold {self.tokens_per_epoch} tokens: "
                             f"too few for one sample of {seq_length} + {self.extra} tokens")
        self.num_epochs = self._epochs()
        self._build(sizes)
        self.fingerprint = hashlib.sha256(repr((
            "megatron_token_blocks", 1, source_identity(self.tokens), seq_length, seed, num_samples, split,
            split_name if split is not None else None, self.extra, self.drop_last_partial)).encode()).hexdigest()[:32]

    def _epochs(self) -> int:
        if self.num_samples is None:
            return 1
        wanted = self.num_samples * self.seq_length + self.extra
        return max(1, -(-wanted // self.tokens_per_epoch))

    def _samples_in(self, tokens: int) -> int:
        if self.drop_last_partial:
            return (tokens - self.extra) // self.seq_length
        return int(np.ceil(np.float32(tokens - self.extra) / np.float32(self.seq_length)))  # (C++ float division)

    def _build(self, sizes: np.ndarray) -> None:
        epochs, per_epoch = self.num_epochs, self.tokens_per_epoch
        separate = False
        if epochs > 1:
            before_final = ((epochs - 1) * per_epoch - self.extra) // self.seq_length
            from_final = self.num_samples - before_final
            separate = from_final < int(SEPARATE_FINAL_EPOCH_BELOW * ((per_epoch - self.extra) // self.seq_length))
        rng = np.random.RandomState(self.seed)
        if separate:
            parts = [_shuffled(np.tile(self.documents, epochs - 1), rng), _shuffled(self.documents.copy(), rng)]
            self.document_index = np.concatenate(parts)
        else:
            self.document_index = _shuffled(np.tile(self.documents, epochs), rng)
        samples = self._samples_in(epochs * per_epoch)
        self._num_samples = samples
        self.sample_index = self._sample_index(sizes, samples)
        dtype = np.uint32 if samples < np.iinfo(np.uint32).max - 1 else np.int64
        if separate:
            first = before_final
            self.shuffle_index = np.concatenate([_shuffled(np.arange(0, first, dtype=dtype), rng),
                                                 _shuffled(np.arange(first, samples, dtype=dtype), rng)])
        else:
            self.shuffle_index = _shuffled(np.arange(samples, dtype=dtype), rng)

    def __len__(self) -> int:
        return self._num_samples

    def _sample_index(self, sizes: np.ndarray, samples: int) -> np.ndarray:
        """Megatron's sample index, (samples + 1) x 2: where sample j starts, as (position in the document index,
        offset in that document); found a chunk of samples at a time by a binary search over where each entry of
        the document index ends (its tokens laid end to end), in Megatron's dtype (int32 when it fits)."""
        ends = np.cumsum(sizes[self.document_index], dtype=np.int64)
        fits = max(len(self.document_index), int(sizes.max(initial=0))) <= np.iinfo(np.int32).max
        out = np.empty((samples + 1, 2), dtype=np.int32 if fits else np.int64)
        for lo in range(0, samples + 1, SAMPLES_PER_CHUNK):
            j = np.arange(lo, min(lo + SAMPLES_PER_CHUNK, samples + 1), dtype=np.int64)
            at = j * self.seq_length
            # the boundary token: the last of the sample before (with the extra token) or the first after it
            doc = np.searchsorted(ends, at, side="right" if self.extra else "left")
            past = doc >= len(ends)  # the end of a last partial sample (drop_last_partial=False)
            doc = np.minimum(doc, len(ends) - 1)
            starts = ends[doc] - sizes[self.document_index[doc]]
            offset = np.where(past, ends[-1] - starts - self.extra, at - starts)
            first = j == 0  # the first sample starts at the first entry, even an empty one
            out[lo:lo + len(j), 0] = np.where(first, 0, doc)
            out[lo:lo + len(j), 1] = np.where(first, 0, offset)
        return out

    def text(self, index: int) -> np.ndarray:
        """The `seq_length + extra` token ids of sample `index` (in the shuffled order), int64, padded with -1."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {index} out of range for {len(self)} samples")
        j = int(self.shuffle_index[int(index) % len(self)])
        (first, offset), (last, end) = self.sample_index[j].tolist(), self.sample_index[j + 1].tolist()
        parts = []
        for k in range(first, last + 1):  # the documents the sample spans, the first from its offset
            length = None if k < last else end + self.extra - (offset if k == first else 0)
            parts.append(self.tokens.get(int(self.document_index[k]), offset=offset if k == first else 0,
                                         length=length))
        out = np.full(self.seq_length + self.extra, PAD_TOKEN_ID, dtype=np.int64)
        joined = np.concatenate(parts)
        out[:len(joined)] = joined
        return out

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        text = self.text(int(index))
        if self.extra:
            tokens, labels = text[:-1].copy(), text[1:].copy()
        else:
            tokens, labels = text.copy(), np.roll(text, -1)
            labels[-1] = PAD_TOKEN_ID
        loss_mask = np.ones(self.seq_length, dtype=np.float32)
        loss_mask[labels == PAD_TOKEN_ID] = 0.0
        tokens[tokens == PAD_TOKEN_ID] = 0
        labels[labels == PAD_TOKEN_ID] = 0
        return {"tokens": tokens, "labels": labels, "loss_mask": loss_mask,
                "position_ids": np.arange(self.seq_length, dtype=np.int64)}

    def __repr__(self) -> str:
        return (f"TokenBlocks({len(self)} samples of {self.seq_length}+{self.extra} tokens, seed={self.seed}, "
                f"epochs={self.num_epochs})")


def token_blocks(source: Any, seq_length: int, *, seed: int, add_extra_token: bool = True,
                 num_samples: int | None = None, split: str | None = None, split_name: str = "train",
                 drop_last_partial: bool = True, column: str = "input_ids", rank: int | None = None,
                 world_size: int | None = None, drop_last: bool = False,
                 loader_batch_size: int | None = None) -> StreamingDataset:
    """Megatron-Core's `GPTDataset` samples of `source` as a resumable stream (see `TokenBlocks`).

    The stream serves sample 0, 1, 2, ... of Megatron's shuffled order (rank r of N: samples r, r + N, ...), and
    its `state_dict()` / `load_state_dict()` resume on any world size and worker count as every stream does."""
    blocks = TokenBlocks(source, seq_length, seed=seed, num_samples=num_samples, split=split, split_name=split_name,
                         add_extra_token=add_extra_token, drop_last_partial=drop_last_partial, column=column)
    return StreamingDataset(blocks, shuffle=False, rank=rank, world_size=world_size, drop_last=drop_last,
                            loader_batch_size=loader_batch_size)
