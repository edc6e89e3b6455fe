"""`sft.pack_stream`: packs planned from token counts, the offline packer's bins, exact elastic resume, mixes."""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.sft import pack_sequences, pack_stream

torch = pytest.importorskip("torch")
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402

ROWS = 200


def tokenized(first_id: int, rows: int, seed: int) -> sds.StableDataset:
    """Row i: input_ids [first_id + i, 1, 1, ...] of 3..12 tokens (its first token names it), loss on all."""
    lengths = np.random.default_rng(seed).integers(3, 13, rows)
    return sds.StableDataset.from_dict({
        "input_ids": [[first_id + i] + [1] * (int(n) - 1) for i, n in enumerate(lengths)],
        "loss_mask": [[1] * int(n) for n in lengths]})


def sequence_ids(pack) -> list[int]:
    ids = np.asarray(pack["input_ids"])
    return [int(ids[s]) for s in np.asarray(pack["seq_start_id"]).tolist()]


def test_packs_are_the_offline_packers_bins_over_each_lookahead_window():
    ds = tokenized(1000, ROWS, 0)
    packs = list(pack_stream(ds.to_iterable(), pack_size=24, algorithm="first_fit_decreasing", lookahead=50))
    offline = []
    for lo in range(0, ROWS, 50):
        window = [(np.asarray(r["input_ids"], np.int32), np.asarray(r["loss_mask"], np.int8))
                  for r in ds.select(range(lo, lo + 50))]
        offline += pack_sequences(window, 24, "first_fit_decreasing", seed=lo // 50).rows
    assert len(packs) == len(offline)
    for ours, theirs in zip(packs, offline):
        for name in ("input_ids", "loss_mask", "seq_start_id"):
            assert np.asarray(ours[name]).tolist() == theirs[name].tolist()
    assert sorted(i for p in packs for i in sequence_ids(p)) == list(range(1000, 1000 + ROWS))  # each row once
    assert all(len(p["input_ids"]) - len(p["seq_start_id"]) <= 24 for p in packs)  # positions after the shift
    for pack in packs:  # no pack draws from more than one look-ahead window
        assert len({(i - 1000) // 50 for i in sequence_ids(pack)}) == 1


def test_a_packed_stream_resumes_exactly_on_another_cluster_size():
    ds = tokenized(0, ROWS, 1)

    def stream(rank, world):
        rows = ds.to_iterable(rank=rank, world_size=world).shuffle(seed=2, buffer_size=64)
        return pack_stream(rows, pack_size=32, seed=3, lookahead=64).shuffle(seed=4)

    every = Counter(i for p in stream(0, 1) for i in sequence_ids(p))
    assert sorted(every) == list(range(ROWS)) and set(every.values()) == {1}

    def collate(batch):
        return [sequence_ids(p) for p in batch]

    served, state = Counter(), None
    for world, workers, batch, steps in [(2, 2, 3, 2), (3, 0, 2, None)]:
        states = []
        for rank in range(world):
            packed = stream(rank, world)
            if state is not None:
                packed.load_state_dict(state)
            loader = StreamingDataLoader(packed, batch_size=batch, num_workers=workers, collate_fn=collate)
            iterator = iter(loader)
            for got in ([next(iterator) for _ in range(steps)] if steps else iterator):
                served.update(i for pack in got for i in pack)
            states.append(json.loads(json.dumps(loader.state_dict())))
            del iterator
        assert all(s == states[0] for s in states)
        state = states[0]
    extra = served - every
    assert served - extra == every  # every sequence once, plus only the padded packs of the last step
    assert sum(extra.values()) <= 2 * 16  # at most 2 padded packs (3 ranks), each of at most 32 / 2 sequences


def test_packing_works_after_mixing_and_refuses_what_it_cannot_pack():
    a, b = tokenized(0, 60, 2), tokenized(10_000, 40, 3)
    mixed = sds.interleave_datasets([a.to_iterable().shuffle(seed=1), b.to_iterable()], probabilities=[0.6, 0.4],
                                    seed=0, stopping_strategy="all_exhausted")
    packs = list(pack_stream(mixed, pack_size=40, lookahead=32))
    ids = Counter(i for p in packs for i in sequence_ids(p))
    assert set(range(60)) | set(range(10_000, 10_040)) == set(ids)
    assert sum(ids.values()) == len(mixed)  # each draw of the mix once (oversampled rows more than once)
    with pytest.raises(ValueError, match="needs a 'input_ids' column of token ids"):
        pack_stream(sds.StableDataset.from_dict({"text": ["a"]}).to_iterable(), pack_size=8)
    with pytest.raises(ValueError, match="no row of the stream fits pack_size=1"):
        pack_stream(a.to_iterable(), pack_size=1)
    with pytest.raises(ValueError, match="lookahead must be a positive int, got 0"):
        pack_stream(a.to_iterable(), pack_size=8, lookahead=0)


@pytest.mark.parametrize("column, value, why", [
    ("input_ids", 2**31, "token id 2147483648 is not in [0, 2**31) (input_ids are int32)"),
    ("input_ids", 2**32 + 5, "token id 4294967301 is not in [0, 2**31) (input_ids are int32)"),
    ("input_ids", -1, "token id -1 is not in [0, 2**31) (input_ids are int32)"),
    ("loss_mask", 2, "loss_mask value 2 is not 0 or 1"),
    ("loss_mask", 256, "loss_mask value 256 is not 0 or 1"),
    ("loss_mask", -1, "loss_mask value -1 is not 0 or 1")])
@pytest.mark.parametrize("mapped", [False, True])
def test_a_stream_packs_only_what_fits_its_types_and_names_the_row(column, value, why, mapped):
    """Before: id 2**31 was cast to int32 (-2147483648), 2**32 + 5 to 5, a mask of 256 to 0 and of 2 kept as
    2: packs of other tokens, silently. Row 7 holds the value; the error names it (arrow path and map path)."""
    from stable_datasets.sft.pack import PackInputError

    rows = {"input_ids": [[1, 2, 3, 4]] * 12, "loss_mask": [[0, 1, 1, 1]] * 12}
    rows[column] = [list(r) for r in rows[column]]
    rows[column][7][2] = value
    stream = sds.StableDataset.from_dict(rows).to_iterable()
    if mapped:
        stream = stream.map(lambda row: row)  # (rows read one by one, through pack_row)
    with pytest.raises(PackInputError, match=rf"^row 7: {re.escape(why)}; refusing to pack it"):
        list(pack_stream(stream, pack_size=8, algorithm="first_fit", lookahead=16))


@pytest.mark.parametrize("pad", [1, 4])
def test_offline_packing_refuses_ids_and_masks_that_do_not_fit(pad):
    """Before: pack_sequences cast ids to int32 and the mask to int8 (2**31 -> -2**31, 300 -> 44)."""
    from stable_datasets.sft.pack import PackInputError

    ok = (np.array([5, 6, 7]), np.array([0, 1, 1]))
    for ids, mask, why in [
            (np.array([5, 2**31, 7], np.int64), np.array([0, 1, 1]), "token id 2147483648 is not in [0, 2**31)"),
            (np.array([5, 6, 7], np.uint64), np.array([0, 1, 300]), "loss_mask value 300 is not 0 or 1"),
            (np.array([5.0, 6.5, 7.0]), np.array([0, 1, 1]), "token ids must be integers, got float64"),
            (np.array([5, 6, 7]), np.array([0.0, 0.5, 1.0]), "loss_mask value 0.5 is not 0 or 1")]:
        with pytest.raises(PackInputError, match=rf"^sequence 2: {re.escape(why)}"):
            pack_sequences([ok, ok, (ids, mask)], pack_size=16, algorithm="first_fit", pad_seq_to_mult=pad,
                           pad_id=0 if pad > 1 else None)
    fits = pack_sequences([ok, (np.array([2**31 - 1, 0], np.int64), np.array([True, False]))], pack_size=16,
                          algorithm="first_fit")
    assert fits.rows[0]["input_ids"].dtype == np.int32
    assert sorted(fits.rows[0]["input_ids"].tolist()) == [0, 5, 6, 7, 2**31 - 1]  # the largest id kept as it is
    assert sorted(fits.rows[0]["loss_mask"].tolist()) == [0, 0, 0, 1, 1]
