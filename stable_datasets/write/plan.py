"""What one split's write needs, resolved once by the caller (a builder's `prepare`, or `map`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stable_datasets.features.features import Features


@dataclass(frozen=True)
class WritePlan:
    """Where and how a split is written; nothing below recomputes these from a storage format."""

    target: Path  # the split's published directory
    layout: str  # a module name under stable_datasets.layouts
    options: dict[str, Any]  # layout options, plus "batch_rows" for the encoder
    fingerprint: str
    fingerprint_inputs: dict[str, Any]
    builder_name: str
    config_name: str
    version: str
    split: str
    info: dict[str, Any] = field(default_factory=dict)
    builder_source: str = ""  # the builder's script path or module:qualname (see DatasetBuilder.builder_source)
    features: Features | None = None  # None: the source infers them from its first rows (map)
    resumable: bool = False  # journal finished shards so a killed build continues after them
    media_root: Path | None = None  # where path-stored videos are kept (the fingerprint directory)
    made_by: dict[str, Any] = field(default_factory=dict)  # see CacheMetadata.made_by
    cache_limit: Any = None  # `cache_limit=` (cache.limit); None: $STABLE_DATASETS_CACHE_LIMIT, if set
    #: the bytes the build will write when known before it starts (an in-memory table, a migrated cache, a
    #: rewrite's source): a build that cannot fit under the cache limit is refused first; None: not known
    expected_bytes: int | None = None
    evict: bool = True  # False where the target is not in a cache root (an object-store build's local copy)
    #: what every part's rows depend on besides its own inputs (the fingerprint inputs minus the input files):
    #: with it, parts whose source can identify their inputs are recorded and reused by later builds
    #: (write.reuse); "" builds everything and records nothing
    part_basis: str = ""
    #: False: build every part even when an earlier cache holds it (a forced rebuild); the parts are still recorded
    reuse_parts: bool = True
    #: how many digest ranges a keyed part cuts its sorted keys into: the jobs of the duplicate-key check
    #: across parts (write.key_check); write_split sets it from the runner's parallelism
    key_ranges: int = 1

    @property
    def writer_options(self) -> dict[str, Any]:
        """Layout options minus `batch_rows`, which sizes the encoder's batches, not the files."""
        return {k: v for k, v in self.options.items() if k != "batch_rows"}

    @property
    def batch_rows(self) -> int:
        return int(self.options.get("batch_rows", 1000))


@dataclass
class SplitJobs:
    """A source's jobs, and what a global step before them (e.g. packing) adds to the split."""

    jobs: list[Any]  # one item per part, handed back to ExampleSource.examples
    extra: dict[str, Any] = field(default_factory=dict)  # entries for `_metadata.json` "extra"
    files: dict[str, str | bytes] = field(default_factory=dict)  # small files published with the split
