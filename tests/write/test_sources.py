"""Sources say how many rows a job yields when they know it, so progress bars show a total and an ETA."""

from __future__ import annotations

import pyarrow as pa

import stable_datasets as sds
from stable_datasets.dataset.in_memory import TableSource
from stable_datasets.dataset.mapping import MapSource
from stable_datasets.write.sources import ExampleSource


def test_expected_rows():
    assert ExampleSource().expected_rows(None) is None
    assert TableSource(pa.table({"x": [1, 2, 3]}), "t").expected_rows(None) == 3
    ds = sds.StableDataset.from_dict({"x": list(range(10))})
    common = {"batch_size": 4, "with_indices": False, "input_columns": None, "remove": [], "given_features": None,
              "fn_kwargs": {}, "desc": "map"}
    assert MapSource(ds, lambda r: r, batched=False, **common).expected_rows((4, 10)) == 6
    assert MapSource(ds, lambda b: b, batched=True, **common).expected_rows((4, 10)) is None  # may change the count


def test_a_bar_gets_its_total(monkeypatch):
    from stable_datasets.write import parts

    totals = []

    def spy(iterable=None, **kwargs):
        totals.append(kwargs.get("total"))
        return parts_progress(iterable, **kwargs)

    parts_progress = parts.progress
    monkeypatch.setattr(parts, "progress", spy)
    sds.StableDataset.from_dict({"x": list(range(7))})
    ds = sds.StableDataset.from_dict({"x": list(range(5))}).map(lambda r: {"y": r["x"] * 2})
    assert ds["y"] == [0, 2, 4, 6, 8]
    assert 7 in totals and 5 in totals
