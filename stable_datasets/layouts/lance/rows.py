"""`lance_rows`: one Lance dataset per split (`data.lance/` inside the cache directory).

Write: see layouts.lance.write (a thread fed through a bounded queue writes fragments, each fsynced, hashed and
journaled; parts are merged by moving their data files and committing every fragment once, in order); this
module re-exports what the layout contract names. Read: `take` for random and batched access, fragment scans
for iteration. Lance handles are not fork-safe, so they are opened lazily and reopened in every new process
(see LayoutBackend.ensure_open).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.arrow.cells import cell_getter, compile_row_builder
from stable_datasets.arrow.tables import index_array
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.errors import CacheError
from stable_datasets.features.features import Features
from stable_datasets.layouts import base
from stable_datasets.layouts.base import StreamUnits, TableBackend
from stable_datasets.layouts.lance import blobs as lance_blobs
from stable_datasets.layouts.lance.access import LanceProxy, lance_read_errors
from stable_datasets.layouts.lance.storage import DATASET_DIR, LanceStorage
from stable_datasets.layouts.lance.write import (  # the layout contract's writing side
    DATA_FILES,
    DEFAULT_OPTIONS,
    FRAGMENT_FILES_KEY,
    VERSION_KEY,
    Writer,
    check_options,
    commit_parts,
    merge_parts,
    seal_part,
)

__all__ = ["DATASET_DIR", "DEFAULT_OPTIONS", "NAME", "Backend", "Writer", "check_options", "commit_parts",
           "merge_parts", "seal_part"]

NAME = "lance_rows"


class Backend(LanceStorage, TableBackend):
    """Rows through Lance's `take` and scans; in caches written with blob columns (`extra.lance_rows_version`
    2) on local disk, blob columns are slices of the mapped data files and small columns are held in
    memory from open (see lance_blobs), so a random batch makes no Lance call at all."""

    @property
    def dataset_dir(self) -> Path:
        # caches of the upstream stable-datasets keep the Lance dataset at the cache root ("dataset_dir": ".")
        return self.directory / self.metadata.extra.get("dataset_dir", DATASET_DIR)

    @property
    def blob_columns(self) -> list[str]:
        """Columns stored with the blob encoding ([] in caches written before it)."""
        if self.metadata.extra.get(VERSION_KEY, 1) < lance_blobs.BLOB_LAYOUT_VERSION:
            return []
        return list(self.metadata.extra.get("blob_columns") or [])

    #: the data file (inside data/) of the one fragment this backend serves, or None: every fragment
    fragment_file: str | None = None

    def read_fragment(self, data_file: str) -> None:
        """Serve only the fragment stored in `data_file`, as rows 0..n: a remote stream downloads one data file at a
        time (storage.remote_stream), so the others the manifest names are absent. `_metadata.json` is then
        that fragment's (its one data file, its rows)."""
        self.fragment_file = data_file

    def serve_unit(self, unit: ShardInfo) -> None:
        self.read_fragment(unit.path[len(DATA_FILES):])

    @classmethod
    def stream_units(cls, metadata: CacheMetadata) -> StreamUnits | None:
        """The fragments' data files in row order (`fragment_files`), with the manifest files beside each; None for
        caches written before `fragment_files` (a stream reads them in place, with ranged GETs)."""
        names = metadata.extra.get(FRAGMENT_FILES_KEY)
        if names is None or metadata.extra_files or not metadata.shards:
            return None
        by_path = {s.path: s for s in metadata.shards}
        units = [by_path.get(f"{DATA_FILES}{name}") for name in names] if isinstance(names, list) else None
        if units is None or None in units or sum(u.num_rows for u in units) != metadata.num_rows:  # type: ignore[union-attr]
            raise CacheError(f"invalid cache metadata: {FRAGMENT_FILES_KEY} {names!r} do not name the Lance data "
                             f"files {METADATA_FILE} lists, holding its {metadata.num_rows} rows")
        shared = [s for s in metadata.shards
                  if s.path.startswith(f"{DATASET_DIR}/") and not s.path.startswith(DATA_FILES)]
        group = int(metadata.layout_options.get("max_rows_per_group", DEFAULT_OPTIONS["max_rows_per_group"]))
        return StreamUnits(units, shared, group)  # type: ignore[arg-type]

    def ray_dataset(self, ray: Any, override_num_blocks: int | None) -> Any | None:
        """Ray's own Lance reader, on disk or in place on the store; None with blob columns (Lance would
        give their descriptions, not their bytes)."""
        if self.metadata.extra.get("blob_columns") or self.fragment_file is not None:
            return None
        if self.lance_base is None and self.origin is not None:  # a remote cache downloaded to this node only
            return None
        uri, options = (f"{self.lance_base[0]}/{DATASET_DIR}", self.lance_base[1]) if self.lance_base else (
            str(self.directory / DATASET_DIR), None)
        return ray.data.read_lance(uri, storage_options=options, override_num_blocks=override_num_blocks)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "fragment_file": self.fragment_file}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if state.get("fragment_file"):
            self.read_fragment(state["fragment_file"])

    def ensure_open(self) -> None:
        """In a forked child, the mapped files and held columns of the parent stay valid: only the Lance
        handle is dropped (its runtime does not survive fork), to be reopened if a read needs it."""
        if self._generation == base._fork_generation:
            return
        if self._generation != -1 and getattr(self, "_blobs", None) is not None:
            self._dataset = None
            self._generation = base._fork_generation
            return
        self._open()
        self._generation = base._fork_generation

    def _lance(self) -> Any:
        if self._dataset is None:
            with lance_read_errors(self.dataset_dir, what="opening it"):
                self._dataset = self.lance_dataset(self.metadata.extra.get("dataset_dir", DATASET_DIR))
        return self._dataset

    def _check_columns(self, stored_schema: pa.Schema) -> None:
        recorded = sorted(self.metadata.features)  # order aside: metadata stored as sorted JSON keeps no order
        if sorted(stored_schema.names) != recorded:  # e.g. a damaged manifest: rows would miss named columns
            raise CacheError(f"{self.dataset_dir}: the Lance dataset holds columns {sorted(stored_schema.names)} but "
                             f"{METADATA_FILE} records {recorded}; the cache is corrupt (rebuild it with "
                             "download_mode='force_rebuild')")

    def _open(self) -> None:
        self._dataset, self._blobs, self._held = None, None, None
        if self.fragment_file is not None:
            self._open_fragment(self.fragment_file)
            return
        with lance_read_errors(self.dataset_dir, what="opening it"):
            dataset = self._lance()
            stored_schema = dataset.schema
            stored = dataset.count_rows()
        self.check_rows(self.directory / DATASET_DIR, stored, self.metadata.num_rows)
        self._check_columns(stored_schema)
        blobs = self.blob_columns
        self._schema = stored_schema
        if not blobs:
            return
        self._schema = lance_blobs.served_schema(stored_schema, Features.from_dict(self.metadata.features).arrow_schema)
        if self.lance_base is not None:
            return  # an object store: nothing to map, Lance reads the bytes (take_with_bytes)
        with lance_read_errors(self.dataset_dir, what="reading the blob descriptions"):
            layout, descriptions = dataset.blob_descriptions(blobs) if isinstance(dataset, LanceProxy) else \
                lance_blobs.blob_descriptions(dataset, blobs)
        prefix = f"{DATASET_DIR}/data/"
        sizes = {s.path[len(prefix):]: s.num_bytes for s in self.metadata.shards if s.path.startswith(prefix)}
        self._blobs = lance_blobs.BlobReader(self.dataset_dir, blobs, layout, descriptions, sizes,
                                             self.metadata.extra.get("blob_digests") or {})
        self.check_rows(self.directory / DATASET_DIR, self._blobs.num_rows, self.metadata.num_rows)
        rest = [name for name in self._schema.names if name not in blobs]
        if rest and self._blobs.file_bytes - self._blobs.blob_bytes <= lance_blobs.HELD_MEMORY:
            with lance_read_errors(self.dataset_dir, what="reading the small columns"):
                self._held = pa.Table.from_batches(list(dataset.to_batches(columns=rest)),
                                                   schema=pa.schema([self._schema.field(n) for n in rest]))
            self._held = self._held.combine_chunks()
            self.check_rows(self.directory / DATASET_DIR, self._held.num_rows, self.metadata.num_rows)
        self._row_getters = None

    def _open_fragment(self, name: str) -> None:
        """One fragment from its local data file: blob columns mapped, the other columns held (one fragment's
        worth, whatever HELD_MEMORY says), so after these two Lance reads its rows need no Lance call."""
        blobs = self.blob_columns
        with lance_read_errors(self.dataset_dir, what=f"reading the fragment in data/{name}"):
            dataset = self._lance()
            stored_schema = dataset.schema
            rest = [n for n in stored_schema.names if n not in blobs]
            descriptions = lance_blobs.fragment_table(dataset, name, blobs) if blobs else pa.table({})
            held = lance_blobs.fragment_table(dataset, name, rest) if rest else None
        self._check_columns(stored_schema)
        logical = Features.from_dict(self.metadata.features).arrow_schema
        self._schema = lance_blobs.served_schema(stored_schema, logical) if blobs else stored_schema
        rows = descriptions.num_rows if blobs else held.num_rows
        self.check_rows(self.dataset_dir / "data" / name, rows, self.metadata.num_rows)
        prefix = f"{DATASET_DIR}/data/"
        sizes = {s.path[len(prefix):]: s.num_bytes for s in self.metadata.shards if s.path.startswith(prefix)}
        self._blobs = lance_blobs.BlobReader(self.dataset_dir, blobs, [(name, rows)], descriptions, sizes,
                                             (self.metadata.extra.get("blob_digests") or {}) if blobs else None)
        if held is not None:
            self.check_rows(self.dataset_dir / "data" / name, held.num_rows, rows)
            self._held = held.combine_chunks()
        self._row_getters = None
        self._dataset = None  # nothing reads through Lance from here on (a fork helper process, if any, ends)

    def rows_in_place(self) -> bool:
        """Blob columns mapped and every other column held: any rows are gathered with no Lance call."""
        self.ensure_open()
        return self._blobs is not None and (self._held is not None or len(self._blobs.names) == len(self._schema))

    def open_before_fork(self) -> None:
        """Open a v2 cache on local disk now, in the process that forks DataLoader workers: they keep its maps
        and held columns and never import or call Lance (an import of lance is also one of pandas, 1-2 s per
        worker). Other caches are opened where they are read: a worker forked from a Lance user reads through
        the helper process of lance.access."""
        if self.blob_columns and self.lance_base is None:
            self.ensure_open()

    def stored_row_counts(self) -> tuple[int, int]:
        self.ensure_open()
        if self.fragment_file is not None:
            return self._blobs.num_rows, self.metadata.num_rows
        with lance_read_errors(self.dataset_dir, what="counting rows"):
            return self._lance().count_rows(), self.metadata.num_rows

    def shard_bounds(self) -> np.ndarray | None:
        """Where each fragment (one data file) begins, then the rows: the shards of a stream's shard window."""
        self.ensure_open()
        if self._blobs is not None:
            return self._blobs.starts.astype(np.int64)
        dataset = self._lance()
        sizes = [f.metadata.physical_rows or 0 for f in dataset.get_fragments()] \
            if hasattr(dataset, "get_fragments") else [self.num_rows]
        return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)

    def block_bounds(self) -> np.ndarray:
        """Fragments, cut every `max_rows_per_group` rows (the unit Lance writes its pages in)."""
        self.ensure_open()
        group = int(self.metadata.layout_options.get("max_rows_per_group", DEFAULT_OPTIONS["max_rows_per_group"]))
        if self._blobs is not None:
            sizes = np.diff(self._blobs.starts).tolist()
        else:
            dataset = self._lance()
            fragments = dataset.get_fragments() if hasattr(dataset, "get_fragments") else []
            sizes = [f.metadata.physical_rows or 0 for f in fragments]
        starts = np.cumsum([0, *sizes])[:-1] if sum(sizes) == self.num_rows else np.zeros(1, np.int64)
        cuts = np.concatenate([np.arange(lo, hi, group) for lo, hi in zip(starts, [*starts[1:], self.num_rows])]
                              or [np.zeros(1, np.int64)])
        return np.unique(np.append(cuts, self.num_rows)).astype(np.int64)

    def _served(self, table: pa.Table) -> pa.Table:
        """A table read through Lance with blob bytes (large_binary) in the served schema."""
        return table.select(self._schema.names).cast(self._schema) if self.blob_columns else table

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        if not len(indices):
            return self._schema.empty_table()
        indices = np.asarray(indices, dtype=np.int64)  # an ndarray is the cheapest form for Lance
        blobs = self._blobs
        if blobs is None:
            with lance_read_errors(self.dataset_dir, indices):
                if self.blob_columns:
                    return self._served(lance_blobs.take_with_bytes(self._lance(), indices, None, self.blob_columns))
                return self._lance().take(indices)
        rest = self._held.take(index_array(indices)) if self._held is not None else None
        if rest is None and len(blobs.names) < len(self._schema):
            with lance_read_errors(self.dataset_dir, indices):
                rest = self._lance().take(indices, columns=[n for n in self._schema.names if n not in blobs.names])
        arrays = [blobs.take(f.name, indices).cast(f.type) if f.name in blobs.names else rest.column(f.name)
                  for f in self._schema]
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def row(self, index: int) -> dict[str, Any]:
        self.ensure_open()
        if self._blobs is None or (self._held is None and len(self._blobs.names) < len(self._schema)):
            return self.rows([index])[0]
        if self._row_getters is None:
            self._row_getters = [self._blobs.cell_getter(f.name) if f.name in self._blobs.names else
                                 cell_getter(self._held.column(f.name).chunk(0)) for f in self._schema]
            self._build_row = compile_row_builder(self._schema.names)
        return self._build_row(self._row_getters, index)

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        self.ensure_open()
        if stop <= start:
            return
        if self._blobs is not None:
            for lo in range(start, stop, batch_rows):
                yield from self.take(np.arange(lo, min(stop, lo + batch_rows), dtype=np.int64)).to_batches()
            return
        options = {"blob_handling": "all_binary"} if self.blob_columns else {}
        with lance_read_errors(self.dataset_dir, range(start, stop)):
            for batch in self._lance().to_batches(offset=start, limit=stop - start, batch_size=batch_rows,
                                                  **options):
                if batch.num_rows:
                    yield self._served(pa.Table.from_batches([batch])).to_batches()[0] if options else batch
