"""Rows of a dataset as plain Python values, for comparing two caches of the same data."""

from __future__ import annotations

import numpy as np


def plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def rows_of(ds) -> list[dict]:
    return [plain(ds[i]) for i in range(len(ds))]


def remote_split_prefix(env, ds, scheme: str) -> str:
    """The object key prefix of a loaded remote split (from its local attempt folder)."""
    relative = ds.cache_dirs[0].relative_to(env.local / "shards" / scheme / env.bucket).as_posix()
    return relative.rsplit("/attempts/", 1)[0]
