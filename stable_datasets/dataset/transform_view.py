"""Reading through a user's transform (`with_transform` / `set_transform`), as Hugging Face does:
the transform takes a batch (a dict of columns) and returns one; a row is a batch of one."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stable_datasets.errors import ColumnNotFoundError

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset

Transform = tuple[Callable[[dict[str, Any]], Any], tuple[str, ...] | None, bool]


def check_transform(ds: StableDataset, transform: Callable[[dict[str, Any]], Any] | None,
                    columns: Sequence[str] | None, output_all_columns: bool) -> Transform | None:
    if transform is None:
        return None
    if not callable(transform):
        raise TypeError(f"with_transform needs a callable, got {type(transform).__name__}")
    if columns is not None:
        columns = [columns] if isinstance(columns, str) else list(columns)
        unknown = [c for c in columns if c not in ds.features]
        if unknown:
            raise ColumnNotFoundError(f"with_transform: no column(s) {unknown}; columns are {ds.column_names}")
    return transform, tuple(columns) if columns is not None else None, output_all_columns


def _formatted(batch: dict[str, Any]) -> dict[str, Any]:
    """The transform of `with_format(columns=..., output_all_columns=True)`: the formatted columns as they are."""
    return batch


def rest_as_python(fmt: Any) -> Transform | None:
    """For a Format with `output_all_columns` and `columns`: a transform serving its columns formatted and the
    others as Python values, as Hugging Face's formatter does; None otherwise (no transform)."""
    if not (fmt.output_all_columns and fmt.columns):
        return None
    return _formatted, fmt.columns, True


def _plain(ds: StableDataset) -> StableDataset:
    return ds._derive(keep_transform=False)


def _apply(ds: StableDataset, batch_of: Callable[[StableDataset], dict[str, Any]]) -> dict[str, Any]:
    transform, columns, output_all = ds._transform
    plain = _plain(ds)
    fmt = plain.format
    given = batch_of(plain.with_format(fmt["type"], columns, fmt["decode"]) if columns else plain)
    out = transform(given)
    if not isinstance(out, dict):
        raise TypeError(f"the transform must return a dict of columns, got {type(out).__name__}")
    if output_all and columns:
        rest = [c for c in ds.column_names if c not in columns]
        if rest:
            rest_type = "python" if transform is _formatted else fmt["type"]
            others = batch_of(plain.with_format(rest_type, rest, fmt["decode"]))
            out = {**out, **others}  # as Hugging Face: the transform's columns first, then the rest (which win)
    return out


def _unbatch(batch: dict[str, Any]) -> list[dict[str, Any]]:
    names = list(batch)
    if not names:
        return []
    return [dict(zip(names, cells)) for cells in zip(*batch.values())]


def transformed_item(ds: StableDataset, key: Any) -> Any:
    if isinstance(key, (bool, np.bool_)):
        raise TypeError("cannot index a dataset with a bool; use an int, or a boolean mask as a list or array")
    if isinstance(key, (int, np.integer)):
        position = int(key) + len(ds) if int(key) < 0 else int(key)
        if not 0 <= position < len(ds):
            raise IndexError(f"index {key} is out of range for a dataset of {len(ds)} rows")
        rows = _unbatch(_apply(ds, lambda view: view[[position]]))
        return rows[0] if rows else {}
    if isinstance(key, str):
        return _apply(ds, lambda view: view[:])[key]
    return _apply(ds, lambda view: view[key])


def transformed_rows(ds: StableDataset, keys: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
    keys = list(np.asarray(keys, dtype=np.int64))
    return _unbatch(_apply(ds, lambda view: view[keys]))


def transformed_iter(ds: StableDataset, batch_size: int = 1000) -> Iterator[dict[str, Any]]:
    for start in range(0, len(ds), batch_size):
        yield from transformed_rows(ds, np.arange(start, min(start + batch_size, len(ds))))
