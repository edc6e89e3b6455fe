"""Random packs for the pack checks' tests: the same seed gives the same packs in every test module."""

from __future__ import annotations

import numpy as np


def random_packs(seed: int, n: int) -> list[dict[str, list[int]]]:
    """Packs of which about half are broken in one of the ways the checks name."""
    rng = np.random.default_rng(seed)
    packs = []
    for _ in range(n):
        length = int(rng.integers(0, 12))
        starts = sorted(set(rng.integers(0, max(length, 1), int(rng.integers(1, 4))).tolist()) | {0})
        pack = {"input_ids": list(range(length)), "loss_mask": [1] * length, "seq_start_id": starts}
        fault = int(rng.integers(0, 8))
        if fault == 1:
            pack["loss_mask"] = pack["loss_mask"][:-1] if length else [1]
        elif fault == 2:
            pack["seq_start_id"] = []
        elif fault == 3:
            pack["seq_start_id"] = [int(rng.integers(1, 5)), *starts[1:]]
        elif fault == 4 and len(starts) > 1:
            pack["seq_start_id"] = [0, starts[-1], starts[-1]]  # an empty sequence: allowed
        elif fault == 6 and len(starts) > 1:
            pack["seq_start_id"] = [0, starts[-1], starts[-1] - 1]  # decreasing: refused
        elif fault == 5:
            pack["seq_start_id"] = [*starts, length + int(rng.integers(0, 3))]
        packs.append(pack)
    return packs
