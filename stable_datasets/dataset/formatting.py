"""Output formats: "python" (default), "numpy", "torch", "arrow", "pandas", "polars".

Decoding (features) yields Python values or numpy arrays; this module only converts the
numpy-mode result to torch tensors, so there is one decode path for every format. The table
formats give the stored values: "arrow" as tables, "pandas" and "polars" as DataFrames (a
row is a one-row frame, a column a Series), as Hugging Face's formatters do. Hugging Face's
short names are accepted: "np", "pt", "pa".

The numpy format gives what Hugging Face's gives: strings as `np.str_` (a batch's string column as a `<U`
array), list cells as arrays, and a batch's column always as one array: stacked for cells of one shape
(equal-length lists -> 2-d), an object array of the cells otherwise (ragged lists, structs, nulls).

The torch format gives float columns as float32, as Hugging Face's does (models train in float32, and
a float64 column would make a float64 batch); `with_format("torch", dtype=torch.float64)` gives every
numeric tensor that dtype instead, as Hugging Face's `dtype=` does. `output_all_columns=True` with
`columns=`: the other columns come too, as Python values (Hugging Face's rule).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stable_datasets.dataset.transform_view import rest_as_python
from stable_datasets.errors import ColumnNotFoundError, missing_extra
from stable_datasets.features.video import VideoDecodeConfig

FORMAT_TYPES = ("python", "numpy", "torch", "arrow", "pandas", "polars")
TABLE_FORMATS = ("arrow", "pandas", "polars")  # rows and batches are tables of stored values
FORMAT_ALIASES = {"np": "numpy", "pt": "torch", "pa": "arrow", "pyarrow": "arrow", "pd": "pandas", "pl": "polars"}


@dataclass(frozen=True)
class Format:
    type: str = "python"
    columns: tuple[str, ...] | None = None
    decode: bool = True
    video_decode: Any = None  # a VideoDecodeConfig, or None for VideoRef cells
    torch_dtype: Any = None  # with_format("torch", dtype=...): every numeric tensor's dtype (None: floats as float32)
    output_all_columns: bool = False  # the columns not in `columns` come too, as Python values

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", FORMAT_ALIASES.get(self.type, self.type))
        if self.type not in FORMAT_TYPES:
            raise ValueError(f"unknown format {self.type!r}; choose one of {FORMAT_TYPES} (or the short names "
                             f"{sorted(FORMAT_ALIASES)})")

    @property
    def numpy(self) -> bool:
        return self.type in ("numpy", "torch")


def format_columns(columns: str | Sequence[str] | None, features: Mapping[str, Any]) -> tuple[str, ...] | None:
    """`with_format(columns=)` as Hugging Face takes it: one name or a sequence of top-level column names. A name
    that is not a column is an error; a struct's field (`"nested.foo"`) is not a column there either, and the
    message says which column holds it."""
    if columns is None:
        return None
    names = (columns,) if isinstance(columns, str) else tuple(columns)
    unknown = [c for c in names if c not in features]
    if unknown:
        fields = [c for c in unknown if "." in c and c.split(".", 1)[0] in features]
        hint = (f"; {fields[0]!r} is a field of the struct column {fields[0].split('.', 1)[0]!r}: format that "
                "column, or flatten() the dataset first" if fields else "")
        raise ColumnNotFoundError(f"with_format: no column(s) {unknown}; columns are {list(features)}{hint}")
    return names


def format_of(type: str | None, columns: Any, decode: bool, video_decode: Any, output_all_columns: bool,
              format_kwargs: dict[str, Any]) -> Format:
    """The Format `with_format` asks for; `format_kwargs` as Hugging Face's: `dtype=` for "torch" only."""
    unknown = sorted(set(format_kwargs) - {"dtype"})
    fmt = Format(type or "python", tuple(columns) if columns else None, decode, video_decode,
                 output_all_columns=bool(output_all_columns))
    if unknown or ("dtype" in format_kwargs and fmt.type != "torch"):
        raise TypeError(f"with_format({fmt.type!r}) takes no {unknown or ['dtype']}; `dtype=` is for 'torch' only")
    return dataclasses.replace(fmt, torch_dtype=format_kwargs.get("dtype"))


def formatted_like(view: Any, source: Any | None, keep_transform: bool = True) -> Any:
    """`view` (a StableDataset) in the format of `source`, and its `with_transform` function unless not
    `keep_transform`; format columns `view` lacks are left out. Python rows without a transform when `source`
    is None (Hugging Face's `reset_format`)."""
    fmt = source._format if source is not None else Format()
    if fmt.columns is not None:
        fmt = dataclasses.replace(fmt, columns=tuple(c for c in fmt.columns if c in view.features) or None)
    out = view._derive(format=fmt, keep_transform=False)
    out._transform = source._transform if source is not None and keep_transform else rest_as_python(fmt)
    return out


def format_to_json(fmt: Format) -> dict[str, Any]:
    """A Format as plain JSON, for `save_to_disk` (Hugging Face saves a dataset's format with its rows):
    torch's dtype by name, the video decode config by its fields."""
    return {"type": fmt.type, "columns": list(fmt.columns) if fmt.columns is not None else None,
            "decode": fmt.decode, "output_all_columns": fmt.output_all_columns,
            "dtype": str(fmt.torch_dtype).removeprefix("torch.") if fmt.torch_dtype is not None else None,
            "video_decode": dataclasses.asdict(fmt.video_decode) if fmt.video_decode is not None else None}


def format_from_json(data: dict[str, Any]) -> Format:
    """The Format `format_to_json` wrote (torch is imported only for a saved torch dtype)."""
    video = data.get("video_decode")
    if video is not None:
        resize = video.get("resize")
        video = VideoDecodeConfig(**{**video, "resize": tuple(resize) if isinstance(resize, list) else resize})
    dtype = data.get("dtype")
    return Format(data.get("type") or "python", tuple(data["columns"]) if data.get("columns") else None,
                  bool(data.get("decode", True)), video, getattr(_torch(), dtype) if dtype else None,
                  bool(data.get("output_all_columns", False)))


def _torch():
    try:
        import torch
    except ImportError:
        raise missing_extra("with_format('torch')", "PyTorch", "torch") from None
    return torch


def to_torch(value: Any, dtype: Any = None) -> Any:
    """numpy arrays/scalars -> tensors (copied if read-only; floats as float32 unless `dtype` names every numeric
    tensor's dtype, as Hugging Face's `dtype=`); containers recursively."""
    torch = _torch()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            if dtype is None and value.dtype.kind == "f" and value.dtype != np.float32:
                return torch.from_numpy(value.astype(np.float32))
            if not value.flags.writeable:
                value = value.copy()
            tensor = torch.from_numpy(value)
            return tensor if dtype is None else tensor.to(dtype)
        if value.dtype == object:
            return [to_torch(v, dtype) for v in value]
        return value
    if isinstance(value, (np.generic, int, float, bool)) and not isinstance(value, (np.str_, np.bytes_)):
        if dtype is None and isinstance(value, (float, np.floating)):
            return torch.tensor(value, dtype=torch.float32)
        return torch.tensor(value) if dtype is None else torch.tensor(value, dtype=dtype)
    if isinstance(value, dict):
        return {k: to_torch(v, dtype) for k, v in value.items()}
    if isinstance(value, list):
        converted = [to_torch(v, dtype) for v in value]
        if converted and all(isinstance(v, torch.Tensor) for v in converted):
            shapes = {tuple(v.shape) for v in converted}
            if len(shapes) == 1:
                return torch.stack(converted)
        return converted
    return value


def numpy_row(row: dict[str, Any]) -> dict[str, Any]:
    """A decoded row as Hugging Face's numpy format gives it: a string cell as `np.str_`, a list cell as an
    array (`consolidate`: one array when its items are arrays of one shape, else an object array)."""
    out = {}
    for name, value in row.items():  # arrays and numpy scalars (most cells) pass through untouched
        kind = type(value)
        out[name] = np.str_(value) if kind is str else _numpy_nested(value) if kind in (list, dict) else value
    return out


def numpy_batch(columns: dict[str, Any]) -> dict[str, Any]:
    """Decoded columns as Hugging Face's numpy format gives a batch: each column one array (`<U` for strings,
    stacked when every cell is an array of one shape and dtype, else an object array of the cells)."""
    return {name: _numpy_column(values) for name, values in columns.items()}


def consolidate(values: list[Any]) -> np.ndarray:
    """Hugging Face's numpy rule for a list of cells: stacked into one array when every cell is a numpy array
    or scalar of one shape and dtype (equal-length lists -> a 2-d array), else a 1-d object array of the
    cells (ragged lists, strings, dicts, nulls), never a list."""
    if values and all(isinstance(v, (np.ndarray, np.generic)) and not isinstance(v, (np.str_, np.bytes_))
                      for v in values):
        first = values[0]
        if all(v.shape == first.shape and v.dtype == first.dtype for v in values):
            return np.stack(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _numpy_nested(value: Any) -> Any:
    """Inside a cell: lists become arrays (`consolidate`), Python numbers numpy scalars (so a list of them is a
    typed array), dicts keep their keys; strings stay `str`, as HF's."""
    if isinstance(value, (bool, int, float)):
        return np.asarray(value)[()]
    if isinstance(value, list):
        return consolidate([_numpy_nested(v) for v in value])
    if isinstance(value, dict):
        return {k: _numpy_nested(v) for k, v in value.items()}
    return value


def _numpy_column(values: Any) -> Any:
    if not isinstance(values, list):
        return values  # an array already (numbers, fixed shapes)
    if values and type(values[0]) is str:
        strings = np.array(values)  # a `<U` array when every cell is a string (numpy's own loop)
        if strings.dtype.kind == "U" and strings.shape == (len(values),):
            return strings
    if all(type(v) is np.ndarray for v in values):  # numeric lists decode to arrays already
        return consolidate(values)
    return consolidate([_numpy_nested(v) for v in values])


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
