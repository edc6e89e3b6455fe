"""`load_dataset("megatron_indexed", data_files="corpus_text_document")`: Megatron-Core's indexed `.bin/.idx`
pairs, one row per document (`{"input_ids": [...]}`, its sequences joined), so the viewer, streams, mixing and
resume serve Megatron data as any other.

`data_files` names prefixes (or `.idx`/`.bin` paths, or globs of them: `"tokens/*_document"`), local or in an
object store; both files of each pair enter the fingerprint. The ids keep the file's dtype. A pair is read through
`megatron.IndexedDataset`, which checks the whole index against the `.bin` before a token is served (a damaged or
truncated pair is an error naming the file and the offset); an object-store pair is read with ranged GETs (the
`.idx` whole, the `.bin` a run of documents at a time), never copied whole. Parallel builds cut a pair into runs of
documents.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.builder.data_files import normalize_data_files
from stable_datasets.builder.info import SplitGenerator
from stable_datasets.download.inputs import object_range, options_for
from stable_datasets.features.features import Features
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import Value
from stable_datasets.loaders.base import FileLoader, Piece
from stable_datasets.megatron.indexed import (
    DTYPE_CODES,
    HEADER_BYTES,
    INDEX_HEADER,
    IndexedDataset,
    IndexedFormatError,
)

#: documents per record batch
BATCH_DOCUMENTS = 4096
COLUMN = "input_ids"


class MegatronIndexedLoader(FileLoader):
    name = "megatron_indexed"
    EXTENSIONS = (".idx",)
    INFERS_FROM_FIRST_FILE = False  # the features come from 34 bytes of the first index header
    REMOTE_RANGES = "reader"  # object-store pairs are read in place by ranges (IndexedDataset)

    def data_files(self) -> dict[str, list[str]]:
        """split -> [a.idx, a.bin, b.idx, b.bin, ...]: each prefix's pair, so both files are identified."""
        if self._files is None:
            given = self.config.data_files
            if not given:
                raise ValueError("the 'megatron_indexed' loader needs data_files= (prefixes of .bin/.idx pairs)")
            as_index = {s: [_index_name(p) for p in _listed(v)] for s, v in
                        (given.items() if isinstance(given, dict) else [("train", given)])}
            indexes = normalize_data_files(as_index, self.builder_name(), input_options=self.input_storage_options)
            self._files = {split: [f for idx in paths for f in (idx, idx[:-4] + ".bin")]
                           for split, paths in indexes.items()}
        return self._files

    def is_companion(self, path: str) -> bool:
        return path.endswith(".bin")  # read with its .idx, never alone

    def local_piece(self, piece: Piece) -> Piece:
        return piece  # read in place: IndexedDataset maps a local pair and ranges an object-store one

    def _split_generators(self, dl_manager: Any) -> list[SplitGenerator]:
        return [SplitGenerator(split, {"pieces": [[p, None, None] for p in paths if p.endswith(".idx")]})
                for split, paths in self.data_files().items()]

    def piece_size(self, path: str) -> int:
        return super().piece_size(path[:-4] + ".bin")  # the work is in the tokens

    def _header(self, idx: str) -> tuple[int, int]:
        """(dtype code, document count) from the index header: one small read."""
        if self.travels(idx):
            head = object_range(idx, 0, HEADER_BYTES, options_for(idx, self.input_storage_options))
        else:
            with open(idx, "rb") as fh:
                head = fh.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES or head[:len(INDEX_HEADER)] != INDEX_HEADER:
            raise IndexedFormatError(f"{idx}: not a Megatron indexed dataset index (header at offset 0)")
        _, code, _, documents = struct.unpack_from("<QBQQ", head, len(INDEX_HEADER))
        if code not in DTYPE_CODES:
            raise IndexedFormatError(f"{idx}: unknown dtype code {code} at offset {len(INDEX_HEADER) + 8}")
        return code, documents - 1

    def infer_features(self) -> Features:
        first = next((p for paths in self.data_files().values() for p in paths if p.endswith(".idx")), None)
        if first is None:
            raise FileNotFoundError(f"the 'megatron_indexed' loader found no .idx in {self.config.data_files}")
        code, _ = self._header(first)
        return Features({COLUMN: Sequence(Value(np.dtype(DTYPE_CODES[code]).name))})

    def piece_ranges(self, path: str, parts: int) -> list[Piece]:
        documents = self._header(path)[1]
        bounds = sorted({documents * k // parts for k in range(parts + 1)})
        return [[path, lo, hi] for lo, hi in itertools.pairwise(bounds)] or [[path, None, None]]

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        path, start, stop = piece[:3]
        options = options_for(path, self.input_storage_options) if self.travels(path) else None
        data = IndexedDataset(path[:-4], storage_options=options)
        documents = data.document_indices
        start = 0 if start is None else start
        stop = data.document_count if stop is None else stop
        ends = np.concatenate([[0], np.cumsum(data.sequence_lengths, dtype=np.int64)])  # tokens before each seq
        value_type = pa.from_numpy_dtype(data.dtype)
        for lo in range(start, stop, BATCH_DOCUMENTS):
            hi = min(stop, lo + BATCH_DOCUMENTS)
            first, last = int(documents[lo]), int(documents[hi])
            values = data.tokens(first, last)
            offsets = (ends[documents[lo:hi + 1]] - ends[first]).astype(np.int32)
            lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=value_type))
            yield pa.table({COLUMN: lists})


def _listed(value: Any) -> list[str]:
    return [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(v) for v in value]


def _index_name(path: str) -> str:
    """A prefix, `.bin` or `.idx` path (or glob) as the `.idx` path it names."""
    for suffix in (".idx", ".bin"):
        if path.endswith(suffix):
            path = path[:-len(suffix)]
    return path + ".idx"
