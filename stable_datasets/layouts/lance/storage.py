"""`LanceStorage`: what the two Lance layouts share about where their Lance dataset lies.

A Lance dataset sits in `data.lance/` inside the cache folder, on disk or, for a cache on an object
store, read in place there (Lance speaks S3/GCS itself), so random access need not download it.
Keeping this in one mixin means no other backend carries Lance attributes and no caller outside
`layouts/` needs to know which layouts store Lance data.
"""

from __future__ import annotations

from typing import Any

from stable_datasets.cache.metadata import CacheMetadata, ShardInfo
from stable_datasets.layouts.lance.access import open_lance

DATASET_DIR = "data.lance"


class LanceStorage:
    """Mixin for a backend whose rows live in the cache's Lance dataset (list it before the backend base)."""

    #: (URI, storage options) of the cache folder on an object store when its Lance data is read in place there
    lance_base: tuple[str, dict[str, str]] | None = None

    @classmethod
    def in_place_files(cls, metadata: CacheMetadata) -> list[ShardInfo]:
        """The Lance dataset's files: read in place on an object store, never downloaded for random access."""
        return [s for s in metadata.shards if s.path.startswith(f"{DATASET_DIR}/")]

    def read_in_place(self, uri: str, storage_options: dict[str, str]) -> None:
        self.lance_base = (uri.rstrip("/"), dict(storage_options))

    def lance_dataset(self, relative: str) -> Any:
        """The Lance dataset at `relative` inside the cache: on disk, or on its object store."""
        if self.lance_base is None:
            return open_lance(str(self.directory / relative))  # type: ignore[attr-defined]
        uri, storage_options = self.lance_base
        return open_lance(f"{uri}/{relative}", storage_options)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "lance_base": self.lance_base}  # type: ignore[misc]

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        if state.get("lance_base"):
            self.read_in_place(*state["lance_base"])
