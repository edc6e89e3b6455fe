"""The one write path: examples -> parts -> the layout's merge -> `_metadata.json` -> publish.

Builders (`DatasetBuilder.prepare`) and dataset transforms (`map`) both hand this package a
`WritePlan` (what to write and where, resolved once) and an `ExampleSource` (where examples
come from, split into jobs). Each job is written as a part in the split's staging directory,
in this process, in forked processes, or as Ray tasks (`engines`); keys two parts both wrote
are found by jobs of the same runner, one per digest range (`key_check`); the layout merges the
parts in order; the metadata is written last and the staging directory is published.
`build_once` (write.once) wraps it in the split's lock, so concurrent callers write it once.
"""

from stable_datasets.write.engines import ENGINES, JobRunner
from stable_datasets.write.once import build_once
from stable_datasets.write.parts import PartResult
from stable_datasets.write.plan import SplitJobs, WritePlan
from stable_datasets.write.sources import ExampleSource
from stable_datasets.write.split import write_split, write_split_for_store

__all__ = ["ENGINES", "ExampleSource", "build_once", "JobRunner", "PartResult", "SplitJobs", "WritePlan", "write_split",
           "write_split_for_store"]
