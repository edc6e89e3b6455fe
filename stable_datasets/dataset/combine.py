"""Views made of other views, without a copy: datasets concatenated, a view labelled as another split, a view
served by other backends (column views of its own).

Why functions and not methods: they are the plumbing of `concatenate_datasets`, `interleave_datasets`, split
strings (`"train[:10%]+test"`) and column operations, not names a user calls on a dataset, so they stay off
`StableDataset`'s public surface; they live in `dataset/`, the one package that reads its private state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset
    from stable_datasets.features.features import Features
    from stable_datasets.layouts.base import LayoutBackend


def concatenate(datasets: Sequence[StableDataset]) -> StableDataset:
    """Rows of each dataset in turn; all must have the same features."""
    if not datasets:
        raise ValueError("concatenate_datasets needs at least one dataset")
    first = datasets[0]
    for other in datasets[1:]:
        if other.features != first.features:
            raise ValueError(f"cannot concatenate datasets with different features: {first.features} vs "
                             f"{other.features}")
    backends, parts, offset = [], [], 0
    for ds in datasets:
        backends.extend(ds._backends)
        parts.append((np.asarray(ds._indices) if ds._indices is not None else np.arange(ds._starts_list[-1]))
                     + offset)
        offset += ds._starts_list[-1]
    indices = None if all(ds._indices is None for ds in datasets) else np.concatenate(parts)
    return type(first)(backends, features=first.features, info=first.info,
                       split="+".join(str(ds.split) for ds in datasets), indices=indices, format=first._format)


def with_split_name(ds: StableDataset, split: str | None) -> StableDataset:
    """The same rows, labelled as another split (e.g. "train[:10%]+test")."""
    view = ds._derive()
    view._split = split
    return view


def with_backends(ds: StableDataset, backends: Sequence[LayoutBackend], features: Features,
                  renamed: dict[str, str] | None = None) -> StableDataset:
    """The same rows, split, format and transform, served by `backends` (column views of the dataset's) and
    described by `features`; format columns follow `renamed` (old -> new name)."""
    fmt, renamed = ds._format, renamed or {}
    columns = tuple(renamed.get(c, c) for c in fmt.columns or () if renamed.get(c, c) in features) or None
    view = type(ds)(backends, features=features, info=dataclasses.replace(ds._info, features=features),
                    split=ds._split, indices=ds._indices, format=dataclasses.replace(fmt, columns=columns))
    view._transform = ds._transform
    return view
