"""`load_dataset("parquet", data_files=...)`: Parquet files read a batch of rows at a time.

Features come from the first file's schema (Hugging Face's or our stored features when the file
carries them, else its Arrow types); `columns=` reads only those columns, as in Hugging Face. A
large file is divided by row groups for `num_proc`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stable_datasets.features.features import Features
from stable_datasets.loaders.base import BATCH_ROWS, FileLoader, FileLoaderConfig, Piece
from stable_datasets.loaders.columns import LoaderError, features_from_schema
from stable_datasets.loaders.compressed import compression_suffix
from stable_datasets.urls import is_url


def _open(path: str, source: Any = None) -> pq.ParquetFile:
    """The Parquet file at `path` (or read through `source`, a file over an object: ranged reads)."""
    try:
        return pq.ParquetFile(path if source is None else source)
    except (pa.ArrowInvalid, OSError) as exc:
        raise LoaderError(f"{path}: not a readable Parquet file ({exc})") from None


@dataclass
class ParquetConfig(FileLoaderConfig):
    columns: list[str] | None = None


class ParquetLoader(FileLoader):
    config: ParquetConfig
    name = "parquet"
    EXTENSIONS = (".parquet",)
    BUILDER_CONFIG_CLASS = ParquetConfig
    REMOTE_RANGES = "reader"

    def _reader(self, path: str) -> pq.ParquetFile:
        """A local file, or a remote one read by ranged GETs (its footer, then the row groups asked for)."""
        return _open(path, self.remote_reader(path) if is_url(path) else None)

    def sample_file(self, path: str) -> str:
        """A remote file's schema is in its footer: the URL itself, read by ranged GETs (nothing copied); a
        compressed one, or one whose server gives no size, is copied whole."""
        if is_url(path) and not compression_suffix(path) and self.remote_bytes(path)[0] > 0:
            return path
        return self.local_file(path)

    def infer_features(self) -> Features:
        path = self.first_file()
        schema = self._reader(path).schema_arrow
        features = features_from_schema(schema, path)
        wanted = self.config.columns
        if wanted is None:
            return features
        wanted = [wanted] if isinstance(wanted, str) else list(wanted)
        unknown = [n for n in wanted if n not in features]
        if unknown:
            raise LoaderError(f"{path}: columns= names {unknown}, which the file does not have; its columns are "
                              f"{schema.names}")
        return Features({n: f for n, f in features.items() if n in wanted})  # in the file's order, as in HF

    def piece_ranges(self, path: str, parts: int) -> list[Piece]:
        groups = self._reader(path).metadata.num_row_groups
        parts = max(1, min(parts, groups))
        bounds = [round(i * groups / parts) for i in range(parts + 1)]
        return [[path, lo, hi] for lo, hi in itertools.pairwise(bounds) if hi > lo]

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        path, start, stop = piece[:3]
        reader = self._reader(path)
        groups = None if start is None else list(range(start, stop))
        present = set(reader.schema_arrow.names)  # `schema_arrow` converts the schema on each access
        columns = [n for n in self.features if n in present] if conform else None
        row = 0
        try:
            for batch in reader.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=columns or None,
                                             use_threads=True):
                table = pa.Table.from_batches([batch])
                yield self.conform(table, path, row) if conform else table
                row += batch.num_rows
        except (pa.ArrowInvalid, OSError) as exc:
            raise LoaderError(f"{path}: cannot read rows after row {row} ({exc})") from None
