"""Column statistics in one bounded pass: what `ds.describe()` shows and the viewer serves.

The rule: never read a whole large cache to summarize it. At most `sample_size` rows are
read, evenly spread over the dataset (every row when it is smaller), in one ordered take of
the stored Arrow cells; media cells are not decoded. The result says how many rows it saw.
Per column: nulls, and by kind a numeric histogram (min, max, mean), label counts (ClassLabel,
bool), text or sequence length histograms; images and videos count only their nulls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.arrow.types import is_list_type
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import ClassLabel, Value

#: rows a summary reads at most, unless asked otherwise
DEFAULT_SAMPLE_SIZE = 10_000
HISTOGRAM_BINS = 20
TOP_LABELS = 50


def sample_positions(num_rows: int, sample_size: int) -> np.ndarray:
    """Row positions a summary reads: all when they fit, else `sample_size` evenly spread (sorted, unique)."""
    if sample_size < 1:
        raise ValueError(f"sample_size must be at least 1, got {sample_size}")
    if num_rows <= sample_size:
        return np.arange(num_rows, dtype=np.int64)
    return np.unique(np.linspace(0, num_rows - 1, sample_size).round().astype(np.int64))


def histogram(values: np.ndarray, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
    """Counts over equal-width bins between min and max (one bin when every value is equal)."""
    values = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if values.size == 0:
        return {"counts": [], "edges": []}
    lo, hi = float(values.min()), float(values.max())
    if lo == hi:
        return {"counts": [int(values.size)], "edges": [lo, hi]}
    counts, edges = np.histogram(values.astype(np.float64), bins=bins, range=(lo, hi))
    return {"counts": counts.tolist(), "edges": [float(e) for e in edges]}


def _numeric(values: np.ndarray) -> dict[str, Any]:
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    out: dict[str, Any] = {"kind": "numeric", "histogram": histogram(values)}
    if finite.size:
        out |= {"min": finite.min().item(), "max": finite.max().item(), "mean": float(finite.mean())}
    return out


def _lengths(kind: str, lengths: pa.Array) -> dict[str, Any]:
    values = lengths.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
    out: dict[str, Any] = {"kind": kind, "length_histogram": histogram(values)}
    if values.size:
        out |= {"min_length": int(values.min()), "max_length": int(values.max()), "mean_length": float(values.mean())}
    return out


def _counts(labels: list[Any]) -> list[list[Any]]:
    keys, counts = np.unique(np.asarray(labels, dtype=object).astype(str), return_counts=True)
    order = np.lexsort((keys, -counts))[:TOP_LABELS]
    return [[str(keys[i]), int(counts[i])] for i in order]


def column_stats(column: pa.ChunkedArray | pa.Array, feature: Any) -> dict[str, Any]:
    """The statistics of one column's stored cells."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    stats: dict[str, Any] = {"nulls": int(array.null_count), "count": len(array)}
    present = array.drop_null()
    if isinstance(feature, ClassLabel):
        ids = present.to_numpy(zero_copy_only=False)
        names = [feature.names[int(i)] if 0 <= int(i) < len(feature.names) else str(int(i)) for i in ids]
        return stats | {"kind": "labels", "counts": _counts(names)}
    if isinstance(feature, (Image,)) or type(feature).__name__ in ("Video", "VideoWindow"):
        return stats | {"kind": "media"}
    arrow_type = array.type
    if pa.types.is_boolean(arrow_type):
        return stats | {"kind": "labels", "counts": _counts(present.to_pylist())}
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return stats | _numeric(present.to_numpy(zero_copy_only=False))
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return stats | _lengths("text", pc.utf8_length(array))
    if isinstance(feature, Sequence) or is_list_type(arrow_type):
        return stats | _lengths("sequence", pc.list_value_length(array))
    if isinstance(feature, Value) and (pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)):
        return stats | _lengths("bytes", pc.binary_length(array))
    return stats | {"kind": "other"}


@dataclass
class DatasetSummary:
    """What `describe()` returns: the rows seen and each column's statistics; prints as a table."""

    num_rows: int
    sample_size: int
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def sampled(self) -> bool:
        return self.sample_size < self.num_rows

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.num_rows, "sample_size": self.sample_size, "sampled": self.sampled,
                "columns": self.columns}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetSummary:
        return cls(int(data["rows"]), int(data["sample_size"]), dict(data["columns"]))

    def _lines(self) -> list[list[str]]:
        rows = []
        for name, s in self.columns.items():
            if s["kind"] == "numeric" and "min" in s:
                detail = f"min {s['min']:g}  max {s['max']:g}  mean {s['mean']:.4g}"
            elif s["kind"] == "labels":
                detail = ", ".join(f"{k}: {v}" for k, v in s["counts"][:5]) + (" ..." if len(s["counts"]) > 5 else "")
            elif "min_length" in s:
                detail = f"length {s['min_length']}..{s['max_length']}  mean {s['mean_length']:.4g}"
            else:
                detail = ""
            rows.append([name, s["kind"], str(s["nulls"]), detail])
        return rows

    def __str__(self) -> str:
        seen = f"a sample of {self.sample_size:,} of {self.num_rows:,} rows" if self.sampled else \
            f"all {self.num_rows:,} rows"
        rows = self._lines()
        header = ["column", "kind", "nulls", "summary"]
        widths = [max(len(c) for c in col) for col in zip(header, *rows)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
        return f"statistics of {seen}\n" + "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from html import escape

        seen = f"a sample of {self.sample_size:,} of {self.num_rows:,} rows" if self.sampled else \
            f"all {self.num_rows:,} rows"
        body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in self._lines())
        return (f"<div><p>statistics of {seen}</p><table><thead><tr><th>column</th><th>kind</th><th>nulls</th>"
                f"<th>summary</th></tr></thead><tbody>{body}</tbody></table></div>")


def summarize(table: pa.Table, features: Any, num_rows: int) -> DatasetSummary:
    """The summary of `table`, the stored cells of a sample of a dataset of `num_rows` rows."""
    columns = {name: column_stats(table.column(name), features[name]) for name in features if name in
               table.column_names}
    return DatasetSummary(num_rows, table.num_rows, columns)
