"""Group edges that depend on each file alone: an added, removed or edited file changes at most two groups."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stable_datasets.builder.file_groups import MAX_FILES, content_groups, is_edge

files = st.lists(st.tuples(st.text("abcdef", min_size=1, max_size=6), st.integers(0, 5000)), max_size=60,
                 unique_by=lambda f: f[0])


def grouped(items: list[tuple[str, int]], target: int = 4000) -> list[tuple[tuple[str, int], ...]]:
    items = sorted(items)
    return [tuple(items[lo:hi]) for lo, hi in content_groups([n for n, _ in items], [s for _, s in items], target)]


def test_groups_cover_every_file_in_order():
    names = [f"file{i:03d}" for i in range(200)]
    groups = content_groups(names, [1000] * 200, target_bytes=4000)
    assert groups[0][0] == 0 and groups[-1][1] == 200
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(groups))
    assert 20 <= len(groups) <= 90  # an edge after about one file in four
    assert content_groups([], []) == []
    assert content_groups(["only"], [0]) == [(0, 1)]


def test_a_file_as_large_as_the_target_is_always_an_edge():
    assert all(is_edge(f"f{i}", 4000, target_bytes=4000) for i in range(100))
    edges = sum(is_edge(f"f{i}", 0) for i in range(20_000))
    assert 20_000 / MAX_FILES * 0.8 < edges < 20_000 / MAX_FILES * 1.2


def test_sizes_must_match_names():
    with pytest.raises(ValueError, match="^2 names but 1 sizes$"):
        content_groups(["a", "b"], [1])


@given(files, st.tuples(st.text("abcdef", min_size=1, max_size=6), st.integers(0, 5000)))
def test_adding_a_file_changes_at_most_two_groups(items, added):
    if added[0] in {n for n, _ in items}:
        return
    before, after = set(grouped(items)), grouped([*items, added])
    assert len([g for g in after if g not in before]) <= 2


@given(files, st.data())
def test_editing_or_removing_a_file_changes_at_most_two_groups(items, data):
    if not items:
        return
    which = data.draw(st.integers(0, len(items) - 1))
    before = set(grouped(items))
    edited = [*items[:which], (items[which][0], data.draw(st.integers(0, 5000))), *items[which + 1:]]
    removed = items[:which] + items[which + 1:]
    assert len([g for g in grouped(edited) if g not in before]) <= 2
    assert len([g for g in grouped(removed) if g not in before]) <= 1
