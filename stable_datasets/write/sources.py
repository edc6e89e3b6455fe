"""Where examples come from. A source is handed to worker processes or Ray tasks, so it holds
only what a worker needs (a builder, or a dataset's paths and a function), never open files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from stable_datasets.features.features import Features
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.plan import SplitJobs


class ExampleSource:
    """Base class: a builder's split, or a transform's input rows."""

    #: check that examples come as (key, example) pairs with unique, hashable keys
    keyed = True
    #: appended to the message when an example does not fit the features
    encoding_hint = ""
    #: `examples(job)` yields Arrow record batches already in the plan's schema (files read by
    #: pyarrow's own readers: CSV, JSON, Parquet) instead of (key, example) pairs; no per-row encoding
    columnar = False
    #: parts of an earlier build may be reused by a later one (`part_identity`); where they cannot be (an
    #: object-store root), the build says it is whole
    incremental = False

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        """Divide the work into at most `num_jobs` jobs, in order. `run` runs functions in parallel
        (for a global step before the parts, such as tokenizing before packing); `workdir` is a
        scratch folder inside the staging directory that every worker can reach."""
        raise NotImplementedError

    def examples(self, job: Any) -> Iterator[tuple[Any, Any]]:
        """The (key, example) pairs of one job, in order (record batches for a `columnar` source)."""
        raise NotImplementedError

    def expected_rows(self, job: Any) -> int | None:
        """How many rows `examples(job)` yields, when known beforehand (progress bars then show a total
        and an ETA); None when only reading tells."""
        return None

    def infer_features(self, examples: list[dict[str, Any]]) -> Features:
        """Features from the first examples, for plans without features."""
        raise NotImplementedError(f"{type(self).__name__} needs features in its WritePlan")

    def empty_features(self) -> Features:
        """Features of an output with no rows, for plans without features."""
        raise NotImplementedError(f"{type(self).__name__} needs features in its WritePlan")

    def part_identity(self, job: Any) -> Any | None:
        """What the rows of `job` depend on besides the plan (its input files by path and identity), as plain
        JSON; None when that is not known (the part is always built). Two jobs with the same identity under
        the same `WritePlan.part_basis` write the same rows, so a later build reuses such a part (write.reuse)."""
        return None

    def check_before_publish(self, num_rows: int) -> None:
        """Called once every row is written (`num_rows` of them), before anything is published: raise to publish
        nothing (a builder whose input files changed while they were read, or that yielded another row count
        than its info promises)."""

    def describe(self) -> str:
        """A short label for progress bars and logs."""
        return type(self).__name__

    def code_modules(self) -> list[ModuleType]:
        """Modules a Ray worker cannot import by name (builder scripts, user code); sent by value."""
        return []
