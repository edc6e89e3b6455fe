"""Examples in, validated Arrow record batches out, holding at most one batch in memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.errors import EncodingError
from stable_datasets.features.base import describe
from stable_datasets.features.features import Features, check_keys, column_to_arrow
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import Value

DEFAULT_BATCH_ROWS = 1000
DEFAULT_BATCH_BYTES = 64 << 20


class BatchEncoder:
    """Accumulates encoded examples column by column; `flush()` returns one RecordBatch."""

    def __init__(self, features: Features, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                 batch_bytes: int = DEFAULT_BATCH_BYTES):
        self.features = features
        self.schema = features.arrow_schema
        self.batch_rows = batch_rows
        self.batch_bytes = batch_bytes
        self._items = list(features.items())
        self._sized = [i for i, (_, f) in enumerate(self._items)
                       if isinstance(f, Image) or (isinstance(f, Value) and f.numpy_dtype is None)]
        #: numeric lists arrive as arrays (a list of lists as one 2-d array): their bytes count towards a batch too
        self._arrays = [i for i, (_, f) in enumerate(self._items) if isinstance(f, Sequence)]
        self._encoders = [f.encode_rows if isinstance(f, Sequence) else f.encode for _, f in self._items]
        self._reset()

    def _reset(self) -> None:
        self._columns: list[list[Any]] = [[] for _ in self._items]
        self._rows = 0
        self._bytes = 0

    def add(self, example: Mapping[str, Any]) -> None:
        """Validate and buffer one example; raises EncodingError naming the field."""
        if type(example) is not dict and not isinstance(example, Mapping):
            raise EncodingError("", f"an example must be a dict, got {describe(example)}")
        check_keys(self.features, example)
        encoded = [encode(example[name], name) for (name, _), encode in zip(self._items, self._encoders)]
        for column, value in zip(self._columns, encoded):
            column.append(value)
        for i in self._sized:
            if encoded[i] is not None:
                self._bytes += len(encoded[i])
        for i in self._arrays:
            if isinstance(encoded[i], np.ndarray):
                self._bytes += encoded[i].nbytes
        self._rows += 1

    @property
    def num_pending(self) -> int:
        return self._rows

    @property
    def full(self) -> bool:
        return self._rows >= self.batch_rows or self._bytes >= self.batch_bytes

    def flush(self) -> pa.RecordBatch:
        arrays = [column_to_arrow(feature, column) for (_, feature), column in zip(self._items, self._columns)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch
