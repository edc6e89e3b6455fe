"""The viewer's cells are bounded whatever a row holds: a pack of thousands of sequences, a cell of deep JSON."""

from __future__ import annotations

import json

import numpy as np

from stable_datasets.sft.tokenize import ByteTokenizer
from stable_datasets.viewer import cells


def test_a_pack_view_is_cut_to_a_fixed_number_of_sequences_runs_and_characters():
    sequences, length = 5000, 400  # 2,000,000 tokens in one pack
    ids = np.full(sequences * length, ord("a"), np.int64)
    mask = np.tile(np.array([0, 1] * (length // 2), np.int8), sequences)  # 200 loss runs per sequence
    row = {"input_ids": ids, "loss_mask": mask, "seq_start_id": np.arange(0, sequences * length, length)}
    view = cells.pack_view(row, ByteTokenizer().decode)
    assert view["num_sequences"] == sequences and view["length"] == sequences * length
    assert len(view["sequences"]) == cells.PACK_SEQUENCES
    first, last = view["sequences"][0], view["sequences"][-1]
    assert (first["start"], first["end"], last["end"]) == (0, length, cells.PACK_SEQUENCES * length)
    assert first["num_runs"] == length // 2 and len(first["loss"]) == cells.PACK_RUNS
    assert first["loss"][:2] == [[1, 2], [3, 4]] and first["loss_tokens"] == length // 2
    assert first["text"] == "a" * min(length, cells.PACK_TEXT_CHARS)
    assert len(json.dumps(view)) < 64 * 1024


def test_a_small_pack_is_shown_whole():
    row = {"input_ids": np.array([104, 105, 33, 111, 107]), "loss_mask": np.array([0, 1, 1, 0, 1]),
           "seq_start_id": np.array([0, 3])}
    view = cells.pack_view(row, ByteTokenizer().decode)
    assert view == {"kind": "pack", "length": 5, "num_sequences": 2, "sequences": [
        {"start": 0, "end": 3, "loss": [[1, 3]], "num_runs": 1, "loss_tokens": 2, "text": "hi!"},
        {"start": 3, "end": 5, "loss": [[4, 5]], "num_runs": 1, "loss_tokens": 1, "text": "ok"}]}


def test_a_cell_of_huge_nested_values_is_bounded_without_dumping_them_whole():
    value = [{"k": "x" * 100_000, "deep": [[list(range(1000))]]} for _ in range(500)]
    shown = cells.cell(value, None, lambda item: "")
    assert shown["kind"] == "json" and len(shown["text"]) == cells.TEXT_CHARS
    assert shown["text"].startswith('[{"k": "' + "x" * 100)
    assert shown["length"] < 200_000  # what was built: LIST_ITEMS items of bounded size, not 50 MB of JSON


def test_an_error_cell_says_what_failed_in_one_line():
    assert cells.error_cell(ValueError("bad png\nsecond line")) == {
        "kind": "error", "text": "cannot decode: ValueError: bad png", "length": 34}
