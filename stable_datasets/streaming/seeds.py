"""One rule for shuffle seeds, whichever shuffle takes them: a dataset's eager permutation (Hugging Face's
`np.random.default_rng(seed).permutation`), its lazy keyed shuffle, a stream's block shuffle and a mix's draws.

A seed is a non-negative int below 2**63 (a Python or numpy int, not a bool): every shuffle keys 64-bit hashes
with it, so a larger one would be cut (two seeds giving one order) or overflow, a float would be truncated, and
a negative one has no meaning to numpy. None, where a shuffle accepts it, draws a fresh seed in the same range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stable_datasets.errors import SeedError

#: seeds are below this (they key signed 64-bit hashes)
SEED_LIMIT = 1 << 63


def check_seed(seed: Any, what: str = "shuffle") -> int:
    """`seed` as an int in [0, 2**63), or a one-line SeedError naming `what` took it."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < SEED_LIMIT:
        shown = repr(seed) if len(repr(seed)) <= 40 else repr(seed)[:37] + "..."
        raise SeedError(f"{what}: seed must be an int in [0, 2**63), got {shown} ({type(seed).__name__})")
    return int(seed)


def fresh_seed() -> int:
    """A seed drawn from the system's entropy, in the range `check_seed` accepts (for a seed of None)."""
    return int(np.random.SeedSequence().entropy % SEED_LIMIT)
