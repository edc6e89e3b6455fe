"""Output formats: "python" (default), "numpy", "torch", "arrow", "pandas", "polars".

Decoding (features) yields Python values or numpy arrays; this module only converts the
numpy-mode result to torch tensors, so there is one decode path for every format. The table
formats give the stored values: "arrow" as tables, "pandas" and "polars" as DataFrames (a
row is a one-row frame, a column a Series), as Hugging Face's formatters do. Hugging Face's
short names are accepted: "np", "pt", "pa".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stable_datasets.errors import missing_extra

FORMAT_TYPES = ("python", "numpy", "torch", "arrow", "pandas", "polars")
TABLE_FORMATS = ("arrow", "pandas", "polars")  # rows and batches are tables of stored values
FORMAT_ALIASES = {"np": "numpy", "pt": "torch", "pa": "arrow", "pyarrow": "arrow", "pd": "pandas", "pl": "polars"}


@dataclass(frozen=True)
class Format:
    type: str = "python"
    columns: tuple[str, ...] | None = None
    decode: bool = True
    video_decode: Any = None  # a VideoDecodeConfig, or None for VideoRef cells

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", FORMAT_ALIASES.get(self.type, self.type))
        if self.type not in FORMAT_TYPES:
            raise ValueError(f"unknown format {self.type!r}; choose one of {FORMAT_TYPES} (or the short names "
                             f"{sorted(FORMAT_ALIASES)})")

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


def table_output(table: Any, type: str) -> Any:
    """A table of stored values in a table format: itself ("arrow"), or a pandas / polars DataFrame."""
    if type == "pandas":
        return table.to_pandas()
    if type == "polars":
        try:
            import polars
        except ImportError:
            raise missing_extra("with_format('polars')", "polars", "polars") from None
        return polars.from_arrow(table)
    return table
