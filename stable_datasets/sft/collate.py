"""`collate_packed`: packs -> the batch a Megatron-style trainer consumes.

Each pack is `{"input_ids", "seq_boundaries", "loss_mask"}` (the loss mask already shifted
left by one, as stored). Per sub-sequence, tokens drop the last id and labels drop the first,
so no label crosses a sequence boundary.

Keys: `tokens`, `labels`, `loss_mask`, `position_ids`, `token_count`, `padding_mask`,
`attention_mask`, `cu_seqlens_q`, `cu_seqlens_kv`, `max_seqlen_q`, `max_seqlen_kv`; plus
`cu_seqlens_q_padded`/`cu_seqlens_kv_padded` when `pad_seq_to_mult > 1`. With
`legacy_keys=True` the NeMo names instead: `cu_seqlens`, `cu_seqlens_argmin`, `max_seqlen`,
and with `pad_seq_to_mult > 1` `cu_seqlens_unpadded`, `cu_seqlens_unpadded_argmin` (rows
padded with -1).

Context parallelism (`pad_seq_to_mult > 1`): packs written with per-sequence padding (EOS up
to a multiple, as Megatron-Bridge and `pack_sequences(pad_seq_to_mult=)` write them) keep
their physical boundaries in the `*_padded` keys; the real length of each sequence ends at
its last non-EOS token, as in Megatron-Bridge. Sequences not padded at pack time are padded
here with EOS.

`return_cu_seqlen=False` (no THD attention) gives `padding_mask` and a causal `attention_mask`
of shape (batch, 1, L, L), True where attention is masked, instead of the cu_seqlens keys.

Padded length: min(max_seq_length, the longest row rounded up to `pad_seq_length_to_mult`),
as Megatron-Bridge computes it; `max_seq_length` with `pad_to_max_length=True`.
`cu_seqlens` rows end at the padded length and are padded with it (zero-length sequences),
so every row has the same number of entries; `pad_cu_seqlens=True` fixes that number from
the packing metadata (`max_samples_per_bin + 2`) for CUDA-graph-friendly shapes.
Torch tensors when torch is importable, numpy arrays otherwise.

An empty sequence (two equal `seq_start_id` values, which Megatron-Bridge's row rule allows)
adds no tokens, labels or positions and one zero-length entry to `cu_seqlens` (a repeated
offset, as a one-token sequence gives after the label shift), so rows keep one boundary per
stored sequence. Megatron-Bridge's collate adds `length - 1` per sequence, so there the
offsets step back by one for an empty sequence (and an empty first sequence slices
`input_ids[0:-1]`); offsets that decrease are not a valid `cu_seqlens`, hence ours differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple if multiple > 1 else value


def collate_packed(batch: Sequence[Mapping[str, Any]], *, eos_id: int, max_seq_length: int,
                   pad_to_max_length: bool = False, pad_seq_length_to_mult: int = 16, pad_seq_to_mult: int = 1,
                   answer_only_loss: bool = True, pad_cu_seqlens: bool = False,
                   pack_metadata: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
                   legacy_keys: bool = False, return_cu_seqlen: bool = True,
                   return_tensors: str | None = None) -> dict[str, Any]:
    """Collate packs into one batch (see the module docstring for the exact layout)."""
    rows = [_shift_pack(item, eos_id=eos_id, answer_only_loss=answer_only_loss, pad_seq_to_mult=pad_seq_to_mult)
            for item in batch]
    token_count = [len(r[0]) for r in rows]
    max_length = _padded_length(token_count, max_seq_length=max_seq_length, pad_to_max_length=pad_to_max_length,
                                pad_seq_length_to_mult=pad_seq_length_to_mult)
    out: dict[str, Any] = {"tokens": _stack([r[0] for r in rows], max_length, eos_id),
                           "labels": _stack([r[1] for r in rows], max_length, eos_id),
                           "loss_mask": _stack([r[2] for r in rows], max_length, 0),
                           "position_ids": _stack([r[3] for r in rows], max_length, 0),
                           "token_count": token_count}
    padded_cu, real_cu = _sequence_offsets(rows, max_length)
    padding_mask = _padding_mask(padded_cu, real_cu, max_length)
    width, max_seqlen = _cu_seqlens_shape(padded_cu, max_length, pad_cu_seqlens=pad_cu_seqlens,
                                          pack_metadata=pack_metadata)
    if not return_cu_seqlen:  # no THD kernel: one causal mask per row (True = masked), as Megatron-Bridge gives
        causal = ~np.tril(np.ones((max_length, max_length), dtype=bool))
        out.update({"padding_mask": padding_mask,
                    "attention_mask": np.broadcast_to(causal, (len(rows), 1, max_length, max_length)).copy()})
    elif legacy_keys:
        out.update(_legacy_cu_seqlens_keys(padded_cu, real_cu, width, max_seqlen, pad_seq_to_mult))
    else:
        out["padding_mask"] = padding_mask
        out.update(_cu_seqlens_keys(padded_cu, real_cu, width, max_seqlen, pad_seq_to_mult))
    return _to_tensors(out) if return_tensors != "numpy" else out


#: one pack after the label shift: tokens, labels, loss mask, positions, padded and real sequence lengths
_ShiftedPack = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int], list[int]]


def _shift_pack(item: Mapping[str, Any], *, eos_id: int, answer_only_loss: bool,
                pad_seq_to_mult: int) -> _ShiftedPack:
    """One pack's sequences shifted (tokens drop the last id, labels the first) so no label crosses a boundary.

    Per sequence, the slices are numpy; the loop is over sequences, not tokens. With `pad_seq_to_mult > 1`
    each sequence is EOS-padded to the multiple context parallelism wants, and its real length ends at its
    last non-EOS token (packs padded at pack time keep their padding physically).
    """
    ids = np.asarray(item["input_ids"])
    bounds = np.asarray(item["seq_boundaries"], dtype=np.int64)
    stored_mask = np.asarray(item["loss_mask"])
    tokens, labels, loss, positions, padded_lens, real_lens = [], [], [], [], [], []
    for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        stop = max(end - 1, start)  # an empty sequence (equal starts): no tokens, not ids[start:-1]
        t = ids[start:stop]
        lab = ids[start + 1:end]
        m = stored_mask[start:stop].astype(np.int64) if answer_only_loss else (t != eos_id).astype(np.int64)
        n = len(t)
        real = n
        if pad_seq_to_mult > 1:  # packs padded at pack time: the real tokens end at the last non-EOS
            not_eos = np.flatnonzero(t != eos_id)
            real = int(not_eos[-1]) + 1 if len(not_eos) else 0
        padded = _ceil_to(n, pad_seq_to_mult)
        if padded > n:  # per-sequence padding (context parallelism wants multiples)
            pad = padded - n
            t = np.concatenate([t, np.full(pad, eos_id, t.dtype)])
            lab = np.concatenate([lab, np.full(pad, eos_id, lab.dtype)])
            m = np.concatenate([m, np.zeros(pad, np.int64)])
        tokens.append(t)
        labels.append(lab)
        loss.append(m)
        positions.append(np.arange(padded, dtype=np.int64))
        padded_lens.append(padded)
        real_lens.append(real)
    joined = [np.concatenate(x) if x else np.zeros(0, np.int64) for x in (tokens, labels, loss, positions)]
    return (*joined, padded_lens, real_lens)


def _padded_length(token_count: list[int], *, max_seq_length: int, pad_to_max_length: bool,
                   pad_seq_length_to_mult: int) -> int:
    """The batch's row length, computed as Megatron-Bridge does so shapes match its collate.

    min(max_seq_length, the longest row rounded up to `pad_seq_length_to_mult`), or `max_seq_length` with
    `pad_to_max_length`; a pack longer than that is an error, never a silent truncation.
    """
    longest = max(token_count, default=0)
    if pad_to_max_length:
        max_length = max_seq_length
    else:
        max_length = min(max_seq_length, _ceil_to(longest, pad_seq_length_to_mult))
    if longest > max_length:
        raise ValueError(f"a pack has {longest} tokens after the label shift, more than max_seq_length="
                         f"{max_seq_length}")
    return max_length


def _stack(arrays: list[np.ndarray], max_length: int, pad_value: int) -> np.ndarray:
    """Rows of different lengths as one (batch, max_length) int64 matrix, the tail filled with `pad_value`."""
    out = np.full((len(arrays), max_length), pad_value, dtype=np.int64)
    for i, a in enumerate(arrays):
        out[i, :len(a)] = a
    return out


def _cumulative(lengths: list[int], end_at: int | None) -> list[int]:
    """Offsets from lengths; with `end_at`, one more entry so the row's padded tail is a sequence of its own."""
    cu = [0, *np.cumsum(lengths, dtype=np.int64).tolist()]
    if end_at is not None and cu[-1] != end_at:
        cu.append(end_at)
    return cu


def _sequence_offsets(rows: list[_ShiftedPack], max_length: int) -> tuple[list[list[int]], list[list[int]]]:
    """Per row, the physical (padded) offsets ending at `max_length` and the real ones, entry for entry.

    The real offsets repeat their last value where the padded ones have the trailing padding entry, since
    that tail holds no real tokens; both lists then have the same length per row.
    """
    padded_cu = [_cumulative(r[4], max_length) for r in rows]
    real_cu = [_cumulative(r[5], None) for r in rows]
    for cu_p, cu_r in zip(padded_cu, real_cu):
        cu_r.extend([cu_r[-1]] * (len(cu_p) - len(cu_r)))
    return padded_cu, real_cu


def _padding_mask(padded_cu: list[list[int]], real_cu: list[list[int]], max_length: int) -> np.ndarray:
    """True where a position holds no real token, so MoE routers skip it.

    That is the tail of the row and, with per-sequence padding, each sequence's alignment padding.
    """
    padding_mask = np.ones((len(padded_cu), max_length), dtype=bool)
    for i, (cu_p, cu_r) in enumerate(zip(padded_cu, real_cu)):
        for start, real in zip(cu_p[:-1], np.diff(cu_r).tolist()):
            padding_mask[i, start:start + real] = False
    return padding_mask


def _cu_seqlens_shape(padded_cu: list[list[int]], max_length: int, *, pad_cu_seqlens: bool,
                      pack_metadata: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None,
                      ) -> tuple[int, np.ndarray]:
    """The cu_seqlens row width and the (batch, 1) `max_seqlen` column.

    By default both come from the batch itself. With `pad_cu_seqlens` they come from the packing metadata
    (`max_samples_per_bin + 2` entries; `max(dataset_max_seqlen, max_length - min_packed_seqlen)`), so every
    batch has the same shapes, which CUDA graphs need.
    """
    metadata = [pack_metadata] if isinstance(pack_metadata, Mapping) else list(pack_metadata or [])
    if not pad_cu_seqlens:
        width = max(len(c) for c in padded_cu)
        max_seqlen = np.asarray([[max(np.diff(cu).max(initial=0), 0)] for cu in padded_cu], dtype=np.int32)
        return width, max_seqlen
    if not metadata:
        raise ValueError("pad_cu_seqlens=True needs pack_metadata (max_samples_per_bin, dataset_max_seqlen, "
                         "min_packed_seqlen), as written beside the packed files")
    width = max(int(p["max_samples_per_bin"]) for p in metadata) + 2
    dataset_max = max(int(p["dataset_max_seqlen"]) for p in metadata)
    min_packed = min(int(p["min_packed_seqlen"]) for p in metadata)
    return width, np.full((len(padded_cu), 1), max(dataset_max, max_length - min_packed), dtype=np.int32)


def _cu_matrix(cus: list[list[int]], cols: int, fill: int | None) -> np.ndarray:
    """Offset rows as one int32 matrix of `cols` columns, each row padded with `fill` (its last offset if None).

    Repeating the last offset adds zero-length sequences, which the THD kernels accept; NeMo's layout pads
    with -1 instead. A row wider than `cols` means the metadata undercounts the pack.
    """
    out = np.empty((len(cus), cols), dtype=np.int32)
    for i, cu in enumerate(cus):
        if len(cu) > cols:
            raise ValueError(f"a pack holds {len(cu) - 2} sequences, more than max_samples_per_bin allows")
        out[i, :len(cu)] = cu
        out[i, len(cu):] = cu[-1] if fill is None else fill
    return out


def _cu_seqlens_keys(padded_cu: list[list[int]], real_cu: list[list[int]], width: int, max_seqlen: np.ndarray,
                     pad_seq_to_mult: int) -> dict[str, Any]:
    """The Megatron(-Bridge) THD keys: `cu_seqlens_q/kv`, `max_seqlen_q/kv`, and `*_padded` under CP.

    Without per-sequence padding the boundaries the kernels need are the padded ones (ending at the padded
    length); with it, cu_seqlens_q holds the real lengths and the *_padded keys the physical ones.
    """
    cu_padded = _cu_matrix(padded_cu, width, None)
    cu_q = cu_padded if pad_seq_to_mult == 1 else _cu_matrix(real_cu, width, None)
    keys = {"attention_mask": np.ones(len(padded_cu), dtype=np.int64),
            "cu_seqlens_q": cu_q, "cu_seqlens_kv": cu_q.copy(),
            "max_seqlen_q": max_seqlen, "max_seqlen_kv": max_seqlen.copy()}
    if pad_seq_to_mult > 1:
        keys.update({"cu_seqlens_q_padded": cu_padded, "cu_seqlens_kv_padded": cu_padded.copy()})
    return keys


def _legacy_cu_seqlens_keys(padded_cu: list[list[int]], real_cu: list[list[int]], width: int,
                            max_seqlen: np.ndarray, pad_seq_to_mult: int) -> dict[str, Any]:
    """The NeMo names (`cu_seqlens`, `cu_seqlens_argmin`, `max_seqlen`, `cu_seqlens_unpadded*` under CP).

    Rows are padded with -1 and get one extra -1 column, so argmin always finds the end.
    """
    cu_padded = _cu_matrix(padded_cu, width + 1, -1)
    cu_real = _cu_matrix(real_cu, width + 1, -1)
    keys = {"attention_mask": np.ones(len(padded_cu), dtype=np.int64), "cu_seqlens": cu_padded,
            "cu_seqlens_argmin": np.argmin(cu_padded, axis=1, keepdims=True), "max_seqlen": max_seqlen}
    if pad_seq_to_mult > 1:
        keys.update({"cu_seqlens_unpadded": cu_real,
                     "cu_seqlens_unpadded_argmin": np.argmin(cu_real, axis=1, keepdims=True)})
    return keys


def _to_tensors(batch: dict[str, Any]) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return batch
    return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in batch.items()}
