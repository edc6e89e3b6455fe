"""How deeply a JSON text nests, found before any parser sees it.

pyarrow's JSON reader recurses once per level and overflows the C stack (SIGSEGV) near 20,000
levels; Python's `json` raises a bare `RecursionError` near 1,000. So a block of JSON Lines (or a
whole JSON document) is checked first against `STABLE_DATASETS_MAX_JSON_DEPTH` (stable_datasets.env),
in numpy: the openers (`[`, `{`) of each line bound its depth from above, and only a line with
more openers than the limit is measured exactly (brackets inside strings do not count).
"""

from __future__ import annotations

import numpy as np

from stable_datasets.env import max_json_depth
from stable_datasets.loaders.columns import LoaderError

_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))


def check_depth(path: str, data: bytes, first_line: int = 0, *, lines: bool = True) -> None:
    """Raise LoaderError naming the file and line when `data` nests deeper than the limit. `lines`: each line is
    its own record (JSON Lines); else `data` is one document."""
    limit = max_json_depth()
    if len(data) <= limit:
        return
    raw = np.frombuffer(data, np.uint8)
    opener_at = np.flatnonzero((raw == _OPEN[0]) | (raw == _OPEN[1]))
    if len(opener_at) <= limit:
        return
    if lines:
        ends = np.flatnonzero(raw == 10)
        bounds = np.concatenate([[0], ends + 1, [len(raw)]])
        per_line = np.diff(np.searchsorted(opener_at, bounds))
        candidates = np.flatnonzero(per_line > limit)
    else:
        bounds, candidates = np.array([0, len(raw)]), np.array([0])
    for index in candidates.tolist():
        start, stop = int(bounds[index]), int(bounds[index + 1])
        deepest = _first_past(raw[start:stop], limit)
        if deepest is not None:
            line = first_line + 1 + (index if lines else int(np.count_nonzero(raw[:start + deepest] == 10)))
            raise LoaderError(f"{path}, line {line}: JSON nested deeper than {limit} levels; flatten the record, or "
                              "raise STABLE_DATASETS_MAX_JSON_DEPTH if it is meant to be that deep")


def _first_past(raw: np.ndarray, limit: int) -> int | None:
    """Offset of the first bracket at depth `limit + 1` (outside strings), else None."""
    quote = raw == ord('"')
    backslash = raw == ord("\\")
    if backslash.any():  # a quote after an odd run of backslashes is escaped
        positions = np.arange(len(raw))
        last_other = np.maximum.accumulate(np.where(backslash, -1, positions))
        quote_at = np.flatnonzero(quote)
        before = quote_at - 1
        run = np.where(before >= 0, before - last_other[np.maximum(before, 0)], 0)
        quote[quote_at[(run % 2) == 1]] = False
    inside = (np.cumsum(quote, dtype=np.int64) % 2) == 1  # after an opening quote, until its closing one
    step = np.zeros(len(raw), np.int32)
    step[((raw == _OPEN[0]) | (raw == _OPEN[1])) & ~inside] = 1
    step[((raw == _CLOSE[0]) | (raw == _CLOSE[1])) & ~inside] = -1
    depth = np.cumsum(step, dtype=np.int32)
    past = np.flatnonzero(depth > limit)
    return int(past[0]) if len(past) else None
