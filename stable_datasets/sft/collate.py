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
    rows = []  # per pack: tokens, labels, loss, positions, padded seq lengths, real seq lengths
    for item in batch:
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
        rows.append((*joined, padded_lens, real_lens))

    token_count = [len(r[0]) for r in rows]
    longest = max(token_count, default=0)
    if pad_to_max_length:
        max_length = max_seq_length
    else:
        max_length = min(max_seq_length, _ceil_to(longest, pad_seq_length_to_mult))
    if longest > max_length:
        raise ValueError(f"a pack has {longest} tokens after the label shift, more than max_seq_length="
                         f"{max_seq_length}")

    def stack(arrays: list[np.ndarray], pad_value: int) -> np.ndarray:
        out = np.full((len(arrays), max_length), pad_value, dtype=np.int64)
        for i, a in enumerate(arrays):
            out[i, :len(a)] = a
        return out

    tokens = stack([r[0] for r in rows], eos_id)
    labels = stack([r[1] for r in rows], eos_id)
    loss_mask = stack([r[2] for r in rows], 0)
    position_ids = stack([r[3] for r in rows], 0)

    def cumulative(lengths: list[int], end_at: int | None) -> list[int]:
        cu = [0, *np.cumsum(lengths, dtype=np.int64).tolist()]
        if end_at is not None and cu[-1] != end_at:
            cu.append(end_at)
        return cu

    padded_cu = [cumulative(r[4], max_length) for r in rows]
    real_cu = [cumulative(r[5], None) for r in rows]
    for cu_p, cu_r in zip(padded_cu, real_cu):  # trailing padding holds no real tokens
        while len(cu_r) < len(cu_p):
            cu_r.append(cu_r[-1])
    # True where a position holds no real token: the tail of the row and, with per-sequence
    # padding, each sequence's alignment padding (MoE routers skip these)
    padding_mask = np.ones((len(rows), max_length), dtype=bool)
    for i, (cu_p, cu_r) in enumerate(zip(padded_cu, real_cu)):
        for start, real in zip(cu_p[:-1], np.diff(cu_r).tolist()):
            padding_mask[i, start:start + real] = False

    metadata = [pack_metadata] if isinstance(pack_metadata, Mapping) else list(pack_metadata or [])
    if pad_cu_seqlens:
        if not metadata:
            raise ValueError("pad_cu_seqlens=True needs pack_metadata (max_samples_per_bin, dataset_max_seqlen, "
                             "min_packed_seqlen), as written beside the packed files")
        width = max(int(p["max_samples_per_bin"]) for p in metadata) + 2
    else:
        width = max(len(c) for c in padded_cu)
    fill = -1 if legacy_keys else None

    def as_matrix(cus: list[list[int]], extra: int = 0) -> np.ndarray:
        cols = width + extra
        out = np.empty((len(cus), cols), dtype=np.int32)
        for i, cu in enumerate(cus):
            if len(cu) > cols:
                raise ValueError(f"a pack holds {len(cu) - 2} sequences, more than max_samples_per_bin allows")
            out[i, :len(cu)] = cu
            out[i, len(cu):] = cu[-1] if fill is None else fill
        return out

    if pad_cu_seqlens:
        dataset_max = max(int(p["dataset_max_seqlen"]) for p in metadata)
        min_packed = min(int(p["min_packed_seqlen"]) for p in metadata)
        max_seqlen = np.full((len(rows), 1), max(dataset_max, max_length - min_packed), dtype=np.int32)
    else:
        max_seqlen = np.asarray([[max(np.diff(cu).max(initial=0), 0)] for cu in padded_cu], dtype=np.int32)

    out: dict[str, Any] = {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "position_ids": position_ids,
                           "token_count": token_count}
    if not return_cu_seqlen:  # no THD kernel: one causal mask per row (True = masked), as Megatron-Bridge gives
        causal = ~np.tril(np.ones((max_length, max_length), dtype=bool))
        out.update({"padding_mask": padding_mask,
                    "attention_mask": np.broadcast_to(causal, (len(rows), 1, max_length, max_length)).copy()})
        return _to_tensors(out) if return_tensors != "numpy" else out
    if legacy_keys:
        # NeMo layout: one extra -1 column so argmin always finds the end
        cu_padded = as_matrix(padded_cu, extra=1)
        cu_real = as_matrix(real_cu, extra=1)
        out.update({"attention_mask": np.ones(len(rows), dtype=np.int64), "cu_seqlens": cu_padded,
                    "cu_seqlens_argmin": np.argmin(cu_padded, axis=1, keepdims=True), "max_seqlen": max_seqlen})
        if pad_seq_to_mult > 1:
            out.update({"cu_seqlens_unpadded": cu_real,
                        "cu_seqlens_unpadded_argmin": np.argmin(cu_real, axis=1, keepdims=True)})
    else:
        # Without per-sequence padding the boundaries the kernels need are the padded ones (ending at the
        # padded length); with it, cu_seqlens_q holds the real lengths and the *_padded keys the physical ones.
        cu_padded = as_matrix(padded_cu)
        cu_q = cu_padded if pad_seq_to_mult == 1 else as_matrix(real_cu)
        out.update({"padding_mask": padding_mask, "attention_mask": np.ones(len(rows), dtype=np.int64),
                    "cu_seqlens_q": cu_q, "cu_seqlens_kv": cu_q.copy(),
                    "max_seqlen_q": max_seqlen, "max_seqlen_kv": max_seqlen.copy()})
        if pad_seq_to_mult > 1:
            out.update({"cu_seqlens_q_padded": cu_padded, "cu_seqlens_kv_padded": cu_padded.copy()})
    return _to_tensors(out) if return_tensors != "numpy" else out


def _to_tensors(batch: dict[str, Any]) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return batch
    return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in batch.items()}
