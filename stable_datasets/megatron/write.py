"""`write_indexed_dataset`: any source of token ids into Megatron-Core's `.bin`/`.idx` (megatron/indexed.py).

A `StableDataset` is read an Arrow batch at a time (its list column's flat values and offsets go to the file as
whole blocks, nothing per row in Python); a stream or any iterable of token lists (or of rows holding `column`)
is read a document at a time. Either way one row is one document of one sequence. A dataset's output records the
fingerprint of what made it beside the files (`<prefix>.stable-datasets.json`), so the same call again is a cache hit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from loguru import logger

from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.identity.fingerprint import fingerprint
from stable_datasets.megatron.indexed import IndexedDataset, IndexedWriter, optimal_dtype

#: the record beside the files: what made them (and their sizes), for cache hits
RECORD_SUFFIX = ".stable-datasets.json"
#: rows read per Arrow batch
BATCH_ROWS = 16_384
FORMAT_VERSION = 1


def write_indexed_dataset(source: StableDataset | Iterable[Any], output_prefix: str | os.PathLike, *,
                          column: str = "input_ids", dtype: Any = None,
                          append_eod: int | None = None) -> IndexedDataset:
    """Write `source` as `output_prefix.bin` + `output_prefix.idx` and return it opened.

    `dtype` None: uint16 when every id is below 65,500, else int32 (Megatron-Core's rule). `append_eod` is a token
    id appended to every document (Megatron's `--append-eod`). Nothing is visible until both files are whole."""
    prefix = os.fspath(output_prefix)
    if isinstance(source, StableDataset):
        if column not in source.column_names:
            raise KeyError(f"column {column!r} is not in the dataset; columns are {source.column_names}")
        identity = fingerprint({"megatron_indexed": FORMAT_VERSION, "dataset": source.fingerprint, "column": column,
                                "dtype": None if dtype is None else np.dtype(dtype).name, "append_eod": append_eod})
        if _recorded(prefix) == identity:
            logger.info("{}.bin/.idx already hold this dataset's tokens: reused", prefix)
            return IndexedDataset(prefix)
        chosen = dtype if dtype is not None else optimal_dtype(_max_id(source, column, append_eod) + 1)
        writer = IndexedWriter(prefix, chosen)
        try:
            for values, lengths in _arrow_blocks(source, column, append_eod):
                writer.add_block(values, lengths)
            writer.commit()
        except BaseException:
            writer.discard()
            raise
        _record(prefix, identity)
        return IndexedDataset(prefix)
    Path(prefix + RECORD_SUFFIX).unlink(missing_ok=True)  # an iterable has no identity: never a cache hit
    writer = IndexedWriter(prefix, dtype)
    try:
        for number, tokens in enumerate(_documents(source, column)):
            if append_eod is not None:
                tokens = np.append(np.asarray(tokens, dtype=np.int64), append_eod)
            writer.add(tokens, where=f"document {number}")
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    return IndexedDataset(prefix)


def _documents(source: Iterable[Any], column: str) -> Iterator[Any]:
    for item in source:
        yield item[column] if isinstance(item, dict) else item


def _arrow_blocks(ds: StableDataset, column: str, append_eod: int | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(flat token ids, tokens per row) of each Arrow batch of `column`, the EOD inserted vectorized."""
    for table in ds.select_columns([column]).with_format("arrow").iter(batch_size=BATCH_ROWS):
        lists = table.column(column).combine_chunks()
        if lists.null_count:
            row = int(np.argmax(lists.is_null().to_numpy(zero_copy_only=False)))
            raise ValueError(f"column {column!r}: a row holds null instead of token ids (row {row} of a batch)")
        if not (pa.types.is_list(lists.type) or pa.types.is_large_list(lists.type)):
            raise TypeError(f"column {column!r} holds {lists.type}, not lists of token ids")
        offsets = lists.offsets.to_numpy()
        values = lists.values.slice(offsets[0], offsets[-1] - offsets[0]).to_numpy(zero_copy_only=False)
        lengths = np.diff(offsets)
        if append_eod is not None:
            values = np.insert(values.astype(np.int64), offsets[1:] - offsets[0], append_eod)
            lengths = lengths + 1
        yield values, lengths


def _max_id(ds: StableDataset, column: str, append_eod: int | None) -> int:
    """The largest id in the column (and the EOD): Arrow's min/max over each batch's flat values."""
    largest = -1 if append_eod is None else append_eod
    for table in ds.select_columns([column]).with_format("arrow").iter(batch_size=BATCH_ROWS):
        values = pc.list_flatten(table.column(column))
        if len(values):
            largest = max(largest, pc.max(values).as_py())
    return largest


def _recorded(prefix: str) -> str | None:
    """The fingerprint recorded for `prefix`, when both files are there at their recorded sizes."""
    try:
        record = json.loads(Path(prefix + RECORD_SUFFIX).read_text())
        sizes = [os.path.getsize(prefix + ".bin"), os.path.getsize(prefix + ".idx")]
    except (OSError, ValueError):
        return None
    return record.get("fingerprint") if sizes == record.get("sizes") else None


def _record(prefix: str, identity: str) -> None:
    tmp = Path(f"{prefix}{RECORD_SUFFIX}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"fingerprint": identity,
                               "sizes": [os.path.getsize(prefix + ".bin"), os.path.getsize(prefix + ".idx")]}))
    os.replace(tmp, prefix + RECORD_SUFFIX)
