"""The global random generators (Python's `random`, numpy's, torch's) in parallel jobs.

A forked child inherits its parent's generator states: without a new seed, every part of a
`map(num_proc=N)` or a parallel build draws the same "random" numbers (row i equal to row
i + rows/N). Python reseeds its own `random` after a fork; `reseed_after_fork` does the same for
numpy and torch (from fresh entropy). With a seed given (`map(seed=)`), `seed_block(seed, index)`
seeds all three from (seed, index) at the start of each input block, so a map draws the same
numbers whatever `num_proc` is: blocks are the same in one process and in N.
"""

from __future__ import annotations

import random
import sys

import numpy as np


def reseed_after_fork() -> None:
    """Fresh, distinct states for numpy's and torch's global generators in a forked child."""
    np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()


def seed_block(seed: int, index: int) -> None:
    """Seed Python's, numpy's and (if imported) torch's global generators from (seed, block index)."""
    state = np.random.SeedSequence([int(seed), int(index)]).generate_state(4, np.uint32)
    value = int(state[0]) << 32 | int(state[1])
    random.seed(value)
    np.random.seed(state)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(value & ((1 << 63) - 1))
