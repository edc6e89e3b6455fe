"""`BuildOptions`: how `prepare` builds, one frozen value made and checked once.

`load_dataset` makes it from its keywords and hands it down whole, whatever path the call takes
(a dataset, a dict of them, a stream, a slice of a stream), so no keyword can be dropped on one of
them by relaying it by name; `DatasetBuilder.prepare` makes one from its own keywords the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

DOWNLOAD_MODES = ("reuse_dataset_if_exists", "force_rebuild", "force_redownload")
VERIFICATION_MODES = ("basic_checks", "all_checks", "no_checks")


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """Everything `prepare` takes besides the split names (see `DatasetBuilder.prepare` for each)."""

    storage_format: str = "arrow"
    download_mode: str = "reuse_dataset_if_exists"
    verification_mode: str = "basic_checks"
    layout_options: Mapping[str, Any] | None = None
    lock_timeout: float | None = None
    soft_lock: bool | None = None
    num_proc: int | None = None
    engine: str = "process"
    ray_address: str | None = None
    cache_limit: str | int | None = None

    def __post_init__(self) -> None:
        if self.download_mode not in DOWNLOAD_MODES:
            raise ValueError(f"download_mode must be one of {DOWNLOAD_MODES}, got {self.download_mode!r}")
        if self.verification_mode not in VERIFICATION_MODES:
            raise ValueError(f"verification_mode must be one of {VERIFICATION_MODES}, got "
                             f"{self.verification_mode!r}")
        if self.layout_options is not None:  # a copy: the caller's dict may change after the call
            object.__setattr__(self, "layout_options", dict(self.layout_options))

    @property
    def force(self) -> bool:
        """A rebuild was asked for: no published cache is reused."""
        return self.download_mode != "reuse_dataset_if_exists"

    def layout_overrides(self) -> dict[str, Any] | None:
        return dict(self.layout_options) if self.layout_options is not None else None
