"""Training reads: block-shuffled orders, streaming iterables, resumable loaders.

`BlockShuffleSampler` orders the indices of a map-style dataset; `StreamingDataset` (also
`StableDataset.to_iterable()` and `load_dataset(..., streaming=True)`) reads blocks itself.
`StreamingDataLoader` (needs torch) is imported from `stable_datasets.streaming.loader`.
"""

from stable_datasets.streaming.iterable import StreamingDataset
from stable_datasets.streaming.order import BlockOrder
from stable_datasets.streaming.sampler import BlockShuffleSampler

__all__ = ["BlockOrder", "BlockShuffleSampler", "StreamingDataLoader", "StreamingDataset"]


def __getattr__(name: str):  # StreamingDataLoader imports torch only when asked for
    if name == "StreamingDataLoader":
        from stable_datasets.streaming.loader import StreamingDataLoader  # local: it imports torch

        return StreamingDataLoader
    raise AttributeError(name)
