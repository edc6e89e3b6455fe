"""`load_dataset("arrow", data_files=...)`: Arrow IPC files, in the file or the stream format
(Hugging Face writes streams), read a record batch at a time.

pyarrow maps a batch without checking its offsets and lengths, and a damaged one then crashes the
process in a writer or is copied into the cache; so each batch is validated in full first (one
pass over its offsets, as the Arrow layout does when it maps a shard)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from stable_datasets.features.features import Features
from stable_datasets.loaders.base import FileLoader, Piece
from stable_datasets.loaders.columns import LoaderError, features_from_schema


def open_ipc(path: str) -> tuple[Any, pa.Schema, Iterator[pa.RecordBatch]]:
    """(the open source, schema, batches) of an Arrow IPC file or stream."""
    source = pa.memory_map(path)
    try:
        reader = pa.ipc.open_file(source)
        return source, reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except (pa.ArrowException, OSError):
        source.seek(0)
    try:
        stream = pa.ipc.open_stream(source)
        return source, stream.schema, iter(stream)
    except (pa.ArrowException, OSError) as exc:
        source.close()
        raise LoaderError(f"{path}: not an Arrow IPC file or stream ({exc})") from None


class ArrowLoader(FileLoader):
    name = "arrow"
    EXTENSIONS = (".arrow",)

    def infer_features(self) -> Features:
        path = self.first_file()
        source, schema, _ = open_ipc(path)
        source.close()
        return features_from_schema(schema, path)

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        path = piece[0]
        source, _, batches = open_ipc(path)
        row = 0
        try:
            for number, batch in enumerate(batches):
                try:
                    batch.validate(full=True)
                except pa.ArrowException as exc:
                    raise LoaderError(f"{path}: record batch {number} (rows {row}-{row + batch.num_rows - 1}) is "
                                      f"damaged ({exc})") from None
                table = pa.Table.from_batches([batch])
                yield self.conform(table, path, row) if conform else table
                row += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise LoaderError(f"{path}: cannot read record batches after row {row} ({exc})") from None
        finally:
            source.close()
