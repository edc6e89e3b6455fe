"""Hugging Face `datasets` <-> `StableDataset`, column by column in Arrow.

`from_hf` reads the Hugging Face dataset's rows as one Arrow table (its storage: images as
`{bytes, path}` structs, fixed-shape arrays as nested lists) and builds a cache through
`from_arrow`'s path, with the features mapped (features/hf.py). `to_hf` does the reverse:
our storage turned into Hugging Face's (images into `{bytes, path}` structs, flat fixed-size
lists into nested lists) and handed to `datasets.Dataset` in memory.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from stable_datasets.dataset.in_memory import from_columns
from stable_datasets.errors import missing_extra
from stable_datasets.features.array import _ArrayND
from stable_datasets.features.base import FeatureType
from stable_datasets.features.columnar import table_columns
from stable_datasets.features.features import Features
from stable_datasets.features.hf import from_hf_features, to_hf_features
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise missing_extra("Hugging Face interop", "the datasets package", "hf") from None
    return datasets


def from_hf(cls: Any, hf_dataset: Any, features: Features | dict[str, Any] | None = None, split: str | None = None,
            *, storage_format: str = "arrow", cache_dir: str | os.PathLike | None = None) -> StableDataset:
    """A cached `StableDataset` of a Hugging Face `datasets.Dataset` (its rows in their order,
    after any select/shuffle), with its features mapped; cached by content like `from_arrow`."""

    datasets = _datasets()
    if not isinstance(hf_dataset, datasets.Dataset):
        raise TypeError(f"from_hf takes a datasets.Dataset (one split; index a DatasetDict by split name), got "
                        f"{type(hf_dataset).__name__}")
    table = hf_dataset.with_format("arrow")[:] if len(hf_dataset) else hf_dataset.data.table.slice(0, 0)
    resolved = features if features is not None else from_hf_features(hf_dataset.features)
    info = {"description": hf_dataset.info.description or "", "homepage": hf_dataset.info.homepage or "",
            "citation": hf_dataset.info.citation or "", "license": hf_dataset.info.license or ""}
    return from_columns(table_columns(table), "from_hf", features=resolved, storage_format=storage_format,
                        cache_dir=cache_dir, split=split or str(hf_dataset.split or "train"), info=info)


def to_hf(ds: StableDataset) -> Any:
    """A `datasets.Dataset` (in memory) holding the rows of `ds` with its features mapped."""
    datasets = _datasets()
    hf_features = to_hf_features(ds.features)
    table = ds.to_arrow()
    columns = [hf_storage(feature, table.column(name)) for name, feature in ds.features.items()]
    hf_table = pa.Table.from_arrays(columns, names=list(ds.features))
    hf_table = datasets.table.table_cast(hf_table, hf_features.arrow_schema)
    info = datasets.DatasetInfo(features=hf_features, description=ds.info.description, homepage=ds.info.homepage,
                                citation=ds.info.citation, license=ds.info.license)
    split = str(ds.split).split("[")[0] if ds.split else None
    return datasets.Dataset(datasets.table.InMemoryTable(hf_table), info=info, split=split)


def hf_storage(feature: FeatureType, column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column of ours in the storage Hugging Face's matching feature uses."""
    if isinstance(feature, Image):
        struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        return pa.chunked_array([pa.StructArray.from_arrays([chunk, pa.nulls(len(chunk), pa.string())],
                                                            names=["bytes", "path"], mask=chunk.is_null())
                                 for chunk in column.chunks], type=struct)
    if isinstance(feature, _ArrayND):
        return pa.chunked_array([nested_lists(chunk, feature.shape) for chunk in column.chunks])
    if isinstance(feature, Sequence) and _needs_conversion(feature.feature):
        chunks = []
        for chunk in column.chunks:
            inner = hf_storage(feature.feature, pa.chunked_array([chunk.flatten()], type=chunk.type.value_type))
            chunks.append(pa.ListArray.from_arrays(chunk.offsets, inner.combine_chunks(), mask=chunk.is_null()))
        return pa.chunked_array(chunks)
    if isinstance(feature, Features) and any(_needs_conversion(f) for f in feature.values()):
        chunks = []
        for chunk in column.chunks:
            fields = [hf_storage(f, pa.chunked_array([chunk.field(n)], type=chunk.type.field(n).type)).combine_chunks()
                      for n, f in feature.items()]
            chunks.append(pa.StructArray.from_arrays(fields, names=list(feature), mask=chunk.is_null()))
        return pa.chunked_array(chunks)
    return column


def _needs_conversion(feature: FeatureType) -> bool:
    if isinstance(feature, (Image, _ArrayND)):
        return True
    if isinstance(feature, Sequence):
        return _needs_conversion(feature.feature)
    if isinstance(feature, Features):
        return any(_needs_conversion(f) for f in feature.values())
    return False


def nested_lists(chunk: pa.FixedSizeListArray, shape: tuple[int, ...]) -> pa.Array:
    """Flat fixed-size lists of prod(shape) values -> lists of lists (of lists...) of `shape`."""
    if chunk.null_count:
        return pa.array([None if cell is None else np.asarray(cell).reshape(shape).tolist()
                         for cell in chunk.to_pylist()])
    values = chunk.flatten()
    rows = len(chunk)
    for depth in range(len(shape) - 1, -1, -1):
        count = rows * int(np.prod(shape[:depth])) if depth else rows
        offsets = pa.array(np.arange(count + 1, dtype=np.int32) * shape[depth])
        values = pa.ListArray.from_arrays(offsets, values)
    return values
