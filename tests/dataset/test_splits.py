from __future__ import annotations

import pytest

from stable_datasets.dataset.splits import SplitSlice, parse_split


@pytest.mark.parametrize(("spec", "n", "expected"), [
    ("train", 100, [("train", 0, 100)]),
    ("train[:10%]", 100, [("train", 0, 10)]),
    ("train[10%:]", 95, [("train", 10, 95)]),  # 9.5 rounds to the nearest even, as Python rounds
    ("train[10:20]", 100, [("train", 10, 20)]),
    ("train[-5:]", 100, [("train", 95, 100)]),
    ("train[:-10%]", 100, [("train", 0, 90)]),
    ("train[90:500]", 100, [("train", 90, 100)]),
    ("train[50:10]", 100, [("train", 50, 50)]),
    ("train[:33%] + test", 3, [("train", 0, 1), ("test", 0, 3)]),
])
def test_split_bounds(spec, n, expected):
    parts = parse_split(spec)
    assert [(p.name, *p.bounds(n)) for p in parts] == expected


def test_split_parse_errors():
    with pytest.raises(ValueError, match="cannot parse split 'train\\[1:2:3\\]'"):
        parse_split("train[1:2:3]")
    with pytest.raises(ValueError, match="outside"):
        SplitSlice("train", "150%").bounds(10)
    assert parse_split("train")[0].is_whole
