"""Descriptive types a builder returns: `SplitGenerator`, `Split` (and `DatasetInfo`, which lives beside the
features it describes so that datasets below the builder floor can carry it: features/info.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stable_datasets.features.info import DatasetInfo

__all__ = ["DatasetInfo", "Split", "SplitGenerator"]


class Split:
    """Standard split names (plain strings, so any other name works too)."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"
    ALL = "all"


@dataclass
class SplitGenerator:
    """One split of a builder: its name and the keyword arguments of `_generate_examples`."""

    name: str
    gen_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = str(self.name)
        if not self.name or any(c in self.name for c in "[]+/:"):
            raise ValueError(f"invalid split name {self.name!r}")
