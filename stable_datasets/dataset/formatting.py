"""Output formats: "python" (default), "numpy", "torch", "arrow".

Decoding (features) yields Python values or numpy arrays; this module only converts the
numpy-mode result to torch tensors, so there is one decode path for every format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stable_datasets.errors import missing_extra

FORMAT_TYPES = ("python", "numpy", "torch", "arrow")


@dataclass(frozen=True)
class Format:
    type: str = "python"
    columns: tuple[str, ...] | None = None
    decode: bool = True
    video_decode: Any = None  # a VideoDecodeConfig, or None for VideoRef cells

    def __post_init__(self) -> None:
        if self.type not in FORMAT_TYPES:
            raise ValueError(f"unknown format {self.type!r}; choose one of {FORMAT_TYPES}")

    @property
    def numpy(self) -> bool:
        return self.type in ("numpy", "torch")


def _torch():
    try:
        import torch
    except ImportError:
        raise missing_extra("with_format('torch')", "PyTorch", "torch") from None
    return torch


def to_torch(value: Any) -> Any:
    """numpy arrays/scalars -> tensors (copied if read-only); containers recursively."""
    torch = _torch()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            if not value.flags.writeable:
                value = value.copy()
            return torch.from_numpy(value)
        if value.dtype == object:
            return [to_torch(v) for v in value]
        return value
    if isinstance(value, (np.generic, int, float, bool)) and not isinstance(value, (np.str_, np.bytes_)):
        return torch.tensor(value)
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, list):
        converted = [to_torch(v) for v in value]
        if converted and all(isinstance(v, torch.Tensor) for v in converted):
            shapes = {tuple(v.shape) for v in converted}
            if len(shapes) == 1:
                return torch.stack(converted)
        return converted
    return value
