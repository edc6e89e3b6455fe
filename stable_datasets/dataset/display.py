"""How datasets and rows look in a REPL and a notebook.

`print(ds[0])` of a 32x32 image used to print a thousand characters of numpy; a row now
prints `{'image': Image(32x32 RGB), 'label': 3}` and shows thumbnails in a notebook. Rows
are still dicts (`DisplayRow` only adds the two reprs, and pickles as a plain dict), so code
that reads them is unaffected. `rows_html` / `dataset_html` are what `_repr_html_` returns.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import numpy as np

from stable_datasets.dataset.thumbnails import image_thumbnail, video_strip
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence as SequenceFeature
from stable_datasets.features.video import Video, VideoRef, VideoWindow

TEXT_CHARS = 80  # longer strings are cut in a repr (the value itself is whole)
LIST_ITEMS = 8
HTML_ROWS = 5  # rows a dataset's notebook view shows
MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def _size(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if num < 1024 or unit == "GiB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return f"{num:.1f} GiB"


class _Text:
    """A repr that prints as its text, unquoted (`Image(32x32 RGB)` inside a dict's repr)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def image_label(array: np.ndarray) -> str:
    """`Image(32x32 RGB)`: width x height and mode."""
    channels = 1 if array.ndim == 2 else array.shape[2]
    return f"Image({array.shape[1]}x{array.shape[0]} {MODES.get(channels, f'{channels}ch')})"


def cell_text(value: Any, feature: Any = None) -> str:
    """A short, honest text for one decoded cell."""
    if isinstance(value, VideoRef):
        return f"Video({value.extension}, {_size(value.size)})"
    if isinstance(value, np.ndarray):
        if isinstance(feature, Image) or (feature is None and value.dtype == np.uint8 and value.ndim in (2, 3)
                                          and (value.ndim == 2 or value.shape[2] in (1, 3, 4))):
            return image_label(value)
        if isinstance(feature, (Video, VideoWindow)) and value.ndim == 4:
            return f"Video({value.shape[0]} frames {value.shape[2]}x{value.shape[1]})"
        if value.size <= LIST_ITEMS:
            return repr(value.tolist())
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # a tensor
        return f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype})"
    if isinstance(value, str):
        return repr(value) if len(value) <= TEXT_CHARS else repr(value[:TEXT_CHARS]) + f"... ({len(value):,} chars)"
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value):,} bytes>"
    if isinstance(value, Mapping):
        inner = feature if isinstance(feature, Mapping) else {}
        return "{" + ", ".join(f"{k!r}: {cell_text(v, inner.get(k))}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        item = feature.feature if isinstance(feature, SequenceFeature) else None
        shown = ", ".join(cell_text(v, item) for v in value[:LIST_ITEMS])
        return f"[{shown}, ... ({len(value):,} items)]" if len(value) > LIST_ITEMS else f"[{shown}]"
    return repr(value)


def _png_img(png: bytes, title: str) -> str:
    data = base64.b64encode(png).decode()
    return (f'<img src="data:image/png;base64,{data}" title="{escape(title)}" '
            f'style="min-width:32px;max-height:96px;image-rendering:pixelated">')


def cell_html(value: Any, feature: Any = None) -> str:
    """A cell as HTML: images and video windows as inline thumbnails, the rest as its text."""
    try:
        if isinstance(value, np.ndarray) and isinstance(feature, Image):
            return _png_img(image_thumbnail(value), image_label(value))
        if isinstance(value, np.ndarray) and isinstance(feature, (Video, VideoWindow)) and value.ndim == 4:
            return _png_img(video_strip(value), cell_text(value, feature))
        if isinstance(value, list) and isinstance(feature, SequenceFeature) and isinstance(feature.feature, Image):
            return " ".join(cell_html(v, feature.feature) if v is not None else "None" for v in value[:LIST_ITEMS])
    except ValueError:  # an array that is no picture after all: its text
        pass
    return escape(cell_text(value, feature))


class DisplayRow(dict):
    """A row (a plain dict to every reader) that prints its media compactly and shows them in a notebook.

    The features live on a subclass made once per dataset (`for_features`), so making a row is
    dict's own C constructor: `ds[i]` stays as fast as returning a plain dict.
    """

    __slots__ = ()
    _features: Mapping[str, Any] = {}

    @classmethod
    def for_features(cls, features: Mapping[str, Any]) -> type[DisplayRow]:
        return type("Row", (cls,), {"__slots__": (), "_features": features})

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {cell_text(v, self._features.get(k))}" for k, v in self.items()) + "}"

    def _repr_html_(self) -> str:
        return rows_html([self], self._features)

    def __reduce__(self) -> Any:  # workers and pickles get the plain dict
        return dict, (dict(self),)


class RowsPreview(list):
    """The first rows of a dataset (`ds.head()`): a list of rows that prints as a table."""

    def __init__(self, rows: Sequence[dict[str, Any]], features: Mapping[str, Any], start: int = 0):
        row_type = DisplayRow.for_features(features)
        super().__init__(row_type(r) for r in rows)
        self._features = features
        self._start = start

    def __repr__(self) -> str:
        header = ["", *self._features]
        rows = [[str(self._start + i), *(cell_text(r.get(k), self._features.get(k)) for k in self._features)]
                for i, r in enumerate(self)]
        widths = [max(len(c) for c in col) for col in zip(header, *rows)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows])

    def _repr_html_(self) -> str:
        return rows_html(self, self._features, self._start)

    def __reduce__(self) -> Any:
        return list, ([dict(r) for r in self],)


def rows_html(rows: Sequence[Mapping[str, Any]], features: Mapping[str, Any], start: int = 0) -> str:
    """A table of rows, one column per feature, media as thumbnails."""
    head = "".join(f"<th>{escape(str(k))}</th>" for k in features)
    body = "".join(f"<tr><th>{start + i}</th>" + "".join(f"<td>{cell_html(r.get(k), features.get(k))}</td>"
                                                        for k in features) + "</tr>" for i, r in enumerate(rows))
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>"


def features_html(features: Mapping[str, Any]) -> str:
    items = "".join(f"<li><code>{escape(str(k))}</code>: {escape(repr(v))}</li>" for k, v in features.items())
    return f"<ul>{items}</ul>"


def dataset_html(title: str, num_rows: int, num_bytes: int | None, features: Mapping[str, Any],
                 rows: Sequence[Mapping[str, Any]]) -> str:
    """A dataset's notebook view: what it is, its features, its first rows."""
    size = f", {_size(num_bytes)}" if num_bytes is not None else ""
    return (f"<div><p><b>{escape(title)}</b>: {num_rows:,} rows{size}</p>{features_html(features)}"
            f"{rows_html(rows, features)}</div>")
