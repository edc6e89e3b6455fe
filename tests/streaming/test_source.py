"""streaming.source: the declared seams streams read (RowSource and one Protocol per ability, checked with
isinstance), the adapter of a plain map-style dataset, and a StableDataset's row source off its public surface."""

from __future__ import annotations

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.dataset.row_source import DatasetRowSource
from stable_datasets.streaming import StreamingDataset
from stable_datasets.streaming.reader import BlockReader, ItemReader, make_reader
from stable_datasets.streaming.source import (
    BlockReads,
    Blocks,
    Identified,
    MapStyleSource,
    OpensBeforeFork,
    ReadsFilesInPlace,
    RowSource,
    Shards,
    block_bounds_of,
    row_source,
    shard_bounds_of,
)

PLUMBING = ("read_block", "read_rows", "rows_from_arrow", "batch_from_arrow", "reads_rows_in_place", "block_bounds",
            "shard_bounds", "source_files", "open_before_fork", "stored_row", "serves_stored_rows",
            "stored_row_counts", "with_backends", "with_split_name", "concatenate", "is_whole", "iter_arrow")


@pytest.fixture(scope="module")
def numbers():
    return sds.StableDataset.from_dict({"idx": list(range(50)), "text": [f"row {i}" for i in range(50)]})


def test_a_stable_dataset_hands_out_a_row_source_with_every_ability_and_keeps_none_of_them_public(numbers):
    source = row_source(numbers)
    assert isinstance(source, DatasetRowSource) and isinstance(source, RowSource)
    for ability in (BlockReads, Blocks, Shards, Identified, ReadsFilesInPlace, OpensBeforeFork):
        assert isinstance(source, ability), ability.__name__
    assert row_source(source) is source  # a row source is its own
    assert [name for name in PLUMBING if hasattr(numbers, name)] == []
    view = numbers.select(range(10, 20)).with_format("numpy")
    rows = row_source(view)
    assert rows.read_block(2, 5).column("idx").to_pylist() == [12, 13, 14]
    assert rows.read_rows(np.array([9, 0])).column("idx").to_pylist() == [19, 10]
    assert rows.batch_from_arrow(rows.read_block(0, 2))["idx"].tolist() == [10, 11]
    assert rows.fingerprint == view.fingerprint and rows.source_files() is None
    assert block_bounds_of(view).tolist() == [0, 10] and shard_bounds_of(view) is None  # a view bounds no window
    assert rows.stored_row(3) == {"idx": 13, "text": "row 13"} and rows.stored_backend() is None


class Squares:
    """A plain map-style dataset: __len__ and __getitem__ only, plus block bounds."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> dict[str, int]:
        return {"x": index * index}

    def block_bounds(self) -> np.ndarray:
        return np.array([0, 4, 8, 12])


def test_a_plain_map_style_dataset_is_adapted_and_keeps_its_block_bounds():
    source = row_source(Squares())
    assert isinstance(source, MapStyleSource) and isinstance(source, RowSource)
    assert not isinstance(source, BlockReads) and source.fingerprint is None and source.shard_bounds() is None
    assert source.__getitems__([3, 1]) == [{"x": 9}, {"x": 1}]
    assert block_bounds_of(Squares()).tolist() == [0, 4, 8, 12]
    assert isinstance(make_reader(source, None, None), ItemReader)
    stream = StreamingDataset(Squares(), shuffle=True, seed=3, window_blocks=1)
    rows = [r["x"] for r in stream]
    assert sorted(rows) == [i * i for i in range(12)]
    assert all(len({rows.index(i * i) // 4 for i in range(b, b + 4)}) == 1 for b in (0, 4, 8))  # a block at a time
    assert block_bounds_of(list(range(5))) is None and [r for r in StreamingDataset(list(range(5)))] == list(range(5))
    with pytest.raises(TypeError, match="map-style dataset"):
        row_source(object())


def test_a_stream_reads_a_stable_dataset_through_its_row_source(numbers):
    stream = numbers.to_iterable()
    assert stream.dataset is numbers and isinstance(stream.source, DatasetRowSource)
    assert isinstance(make_reader(stream.source, None, None), BlockReader)
    assert [r["idx"] for r in stream.with_format("numpy")] == list(range(50))
