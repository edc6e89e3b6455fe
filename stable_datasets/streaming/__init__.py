"""Training reads: block-shuffled orders, streaming iterables, resumable loaders.

`BlockShuffleSampler` orders the indices of a map-style dataset; `StreamingDataset` (also
`StableDataset.to_iterable()` and `load_dataset(..., streaming=True)`) reads blocks itself.
`StreamingDataLoader` (needs torch) is imported from `stable_datasets.streaming.loader`.

The names load on first use (PEP 562): the iterable and the loader import torch when it is
installed, and the torch-free parts (`bijection`, `order`) serve the map-style side too (a shuffled
`StableDataset` view is a keyed bijection), which must not pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"BlockOrder": "order", "BlockShuffleSampler": "sampler", "StreamingDataLoader": "loader",
          "StreamingDataset": "iterable"}

__all__ = ["BlockOrder", "BlockShuffleSampler", "StreamingDataLoader", "StreamingDataset"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"stable_datasets.streaming.{home}"), name)
