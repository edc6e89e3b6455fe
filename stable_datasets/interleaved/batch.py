"""`InterleavedBatch`: an Arrow table of interleaved rows, with document-level helpers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stable_datasets.arrow.cells import primitive_view
from stable_datasets.interleaved.schema import MODALITIES, REQUIRED_COLUMNS, SchemaError, parse_source_ref


@dataclass
class InterleavedBatch:
    table: pa.Table
    source_files: Sequence[str] = field(default_factory=tuple)

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def num_items(self) -> int:
        """Distinct samples (documents) in the batch."""
        return len(pc.unique(self.table.column("sample_id"))) if self.table.num_rows else 0

    def count(self, modality: str | None = None) -> int:
        if modality is None:
            return self.table.num_rows
        return int(pc.sum(pc.equal(self.table.column("modality"), modality)).as_py() or 0)

    def validate(self) -> InterleavedBatch:
        """Check required columns, known modalities, and unique (position, frame) per sample."""
        for name in REQUIRED_COLUMNS:
            if name not in self.table.column_names:
                raise SchemaError(f"missing required column {name!r}")
            if self.table.column(name).null_count:
                raise SchemaError(f"required column {name!r} has nulls")
        modalities = set(pc.unique(self.table.column("modality")).to_pylist())
        unknown = modalities - set(MODALITIES)
        if unknown:
            raise SchemaError(f"unknown modalities {sorted(unknown)}; known: {MODALITIES}")
        seen: set[tuple] = set()
        refs = self.table.column("source_ref").to_pylist() if "source_ref" in self.table.column_names else \
            [None] * self.num_rows
        for sid, pos, mod, ref in zip(self.table.column("sample_id").to_pylist(),
                                      self.table.column("position").to_pylist(),
                                      self.table.column("modality").to_pylist(), refs):
            if (mod == "metadata") != (pos == -1):
                raise SchemaError(f"sample {sid!r}: metadata rows have position -1 and only they do "
                                  f"(got {mod} at {pos})")
            key = (sid, pos, parse_source_ref(ref).get("frame_index"))
            if key in seen:
                raise SchemaError(f"sample {sid!r} has two items at position {pos}")
            seen.add(key)
        return self

    def samples(self) -> Iterator[pa.Table]:
        """One table per sample, in order of first appearance; rows sorted by position."""
        if not self.table.num_rows:
            return
        ids = self.table.column("sample_id").combine_chunks()
        codes = primitive_view(pc.dictionary_encode(ids).indices)
        order = np.argsort(codes, kind="stable")
        firsts = np.unique(codes, return_index=True)[1]
        for code in codes[np.sort(firsts)]:
            rows = order[np.searchsorted(codes[order], code, "left"):np.searchsorted(codes[order], code, "right")]
            sample = self.table.take(pa.array(rows))
            yield sample.take(pc.sort_indices(sample, [("position", "ascending")]))

    def __iter__(self) -> Iterator[pa.Table]:
        return self.samples()

    def __len__(self) -> int:
        return self.num_items
