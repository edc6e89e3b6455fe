"""One part: the examples of one job, encoded and written by the layout's Writer into its own
folder of the staging directory. A finished part leaves `_part.json` (its files, rows, media,
the layout's extras), so a build that restarts keeps finished parts and, where the layout
journals shards, continues an unfinished part after its last finished shard.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from stable_datasets.cache.journal import JOURNAL_FILE, ShardJournal
from stable_datasets.cache.media import media_store
from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.errors import EncodingError, ExampleError, StableDatasetsError, add_note
from stable_datasets.features.encoder import DEFAULT_BATCH_ROWS, BatchEncoder
from stable_datasets.features.features import Features
from stable_datasets.layouts import layout_module
from stable_datasets.progress import progress
from stable_datasets.write.coalesce import coalesced
from stable_datasets.write.keys import KeyLog, RangedKeyWriter, range_file_name
from stable_datasets.write.plan import WritePlan
from stable_datasets.write.sources import ExampleSource

PART_PREFIX = ".part-"
PART_FILE = "_part.json"
KEYS_FILE = "_keys.arrow"  # a part's keys in one sorted file (parts an earlier version wrote)
KEY_RANGES_DIR = "_keys"  # a part's keys, one sorted file per digest range (write.keys.RangedKeyWriter)
KEY_RUNS_DIR = ".keys"


def part_dir(staging: Path, index: int) -> Path:
    return staging / f"{PART_PREFIX}{index:05d}"


@dataclass
class PartResult:
    """What a finished part wrote; paths of `shards` are relative to the part's folder."""

    index: int
    num_rows: int
    shards: list[ShardInfo]
    media: list[ShardInfo] = field(default_factory=list)  # relative to the split folder ("../videos/...")
    extra: dict[str, Any] = field(default_factory=dict)  # the layout writer's extra metadata
    features: dict[str, Any] | None = None  # what was written (a transform infers them)
    has_keys: bool = False  # key files list this part's example keys (for the duplicate check)
    #: the keys in each digest range (the duplicate check's jobs), one file per range that has any
    #: (`key_range_file`); [] with `has_keys`: one sorted key file (`keys_file`), as an earlier version wrote
    key_counts: list[int] = field(default_factory=list)
    node: str = ""  # the Ray node that wrote it, when its parts went through the object store
    #: a folder of the staging directory that holds its files instead of its own part folder (the parts an
    #: incremental build links from an earlier cache share one, write.reuse); "" for its part folder
    location: str = ""

    def folder(self, staging: Path) -> Path:
        return staging / self.location if self.location else part_dir(staging, self.index)

    def keys_file(self, staging: Path) -> Path:
        """Where its example keys are in one file (`has_keys` without `key_counts`), one file per part also in a
        shared folder."""
        return self.folder(staging) / (f"{self.index:05d}{KEYS_FILE}" if self.location else KEYS_FILE)

    def key_folder(self, staging: Path) -> Path:
        """Where its example keys are, a file per digest range (`key_counts`), one folder per part also in a
        shared folder."""
        return self.folder(staging) / (f"{self.index:05d}{KEY_RANGES_DIR}" if self.location else KEY_RANGES_DIR)

    def key_range_file(self, staging: Path, index: int) -> Path:
        return self.key_folder(staging) / range_file_name(index)

    def key_paths(self) -> list[str]:
        """Its key files' paths within its own part folder (as they are uploaded with it, write.remote_parts)."""
        if not self.has_keys:
            return []
        if not self.key_counts:
            return [KEYS_FILE]
        return [f"{KEY_RANGES_DIR}/{range_file_name(r)}" for r, count in enumerate(self.key_counts) if count]

    def key_files(self, staging: Path) -> list[Path]:
        """Its key files in digest order: read one after the other, they are one sorted key file."""
        if not self.key_counts:
            return [self.keys_file(staging)]
        return [self.key_range_file(staging, r) for r, count in enumerate(self.key_counts) if count]

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "num_rows": self.num_rows, "shards": [vars(s) for s in self.shards],
                "media": [vars(m) for m in self.media], "extra": self.extra, "features": self.features,
                "has_keys": self.has_keys, "key_counts": self.key_counts, "node": self.node,
                "location": self.location}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartResult:
        return cls(index=int(data["index"]), num_rows=int(data["num_rows"]),
                   shards=[ShardInfo.from_dict(s) for s in data["shards"]],
                   media=[ShardInfo.from_dict(m) for m in data.get("media", [])], extra=data.get("extra", {}),
                   features=data.get("features"), has_keys=bool(data.get("has_keys")),
                   key_counts=[int(c) for c in data.get("key_counts", [])], node=str(data.get("node", "")),
                   location=str(data.get("location", "")))

    def save(self, directory: Path) -> None:
        """Not fsynced: the record only lets a killed build skip this part, and `load` checks that
        the files it lists are there with their sizes (a record lost to a power cut rebuilds the part)."""
        tmp = directory / f".{PART_FILE}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh)
        os.replace(tmp, directory / PART_FILE)

    @classmethod
    def load(cls, directory: Path) -> PartResult | None:
        """A finished part whose files are all still there with their sizes, else None."""
        try:
            result = cls.from_dict(json.loads((directory / PART_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        for shard in result.shards:
            path = directory / shard.path
            if not path.is_file() or path.stat().st_size != shard.num_bytes:
                return None
        return result


def _checked_examples(source: ExampleSource, job: Any, plan: WritePlan, keys: KeyLog,
                      desc: str) -> Iterator[tuple[Any, Any]]:
    """Examples with their keys checked: pairs, hashable, unique within the part."""
    name, split = plan.builder_name, plan.split
    items = iter(progress(source.examples(job), desc=desc, unit=" examples", total=source.expected_rows(job)))
    key: Any = None
    count = 0
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except (Exception, SystemExit) as exc:
            located = any(str(n).startswith("raised by ") for n in getattr(exc, "__notes__", ()))
            if not isinstance(exc, StableDatasetsError) and not located:  # user code: say where it stopped
                last = f"example key {key!r}" if source.keyed else f"example {count - 1}"
                after = "before its first example" if not count else f"after {last}"
                who = f"builder '{name}'" if source.keyed else source.describe()
                add_note(exc, f"raised by {who} generating split '{split}', {after}")
            raise
        count += 1
        if not source.keyed:
            yield item
            continue
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ExampleError(name, split, None, None,
                               f"_generate_examples must yield (key, example) pairs, got {type(item).__name__}")
        key = item[0]
        try:
            fresh = keys.add(key)
        except TypeError:
            raise ExampleError(name, split, key, None, f"example key must be hashable, got {type(key).__name__}") \
                from None
        if not fresh:
            raise ExampleError(name, split, key, None, "duplicate example key within the split")
        yield item


#: at most this many first examples are held to infer the features when a column is None in all of them
INFER_MAX_ROWS = 100_000


def _all_none_column(pending: list[tuple[Any, Any]]) -> bool:
    """Whether some column is None in every example held (a map whose first results are None)."""
    if not pending or not isinstance(pending[0][1], dict):
        return False
    return any(all(e.get(name) is None for _, e in pending) for name in pending[0][1])


def _open_part_folder(plan: WritePlan, layout: Any, directory: Path
                      ) -> tuple[ShardJournal | None, tuple[list[ShardInfo], int] | None]:
    """The part's folder, ready to write, with its shard journal (when the layout keeps one) and what a stopped
    run finished in it (its shards and rows) to resume after; anything else a stopped run left is cleared."""
    resume: tuple[list[ShardInfo], int] | None = None
    journal = None
    if plan.resumable and layout.Writer.supports_resume:
        journal = ShardJournal(directory)
        if (directory / JOURNAL_FILE).is_file():
            shards, rows_done = journal.recover()
            resume = (shards, rows_done) if shards else None
    if resume is None and directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return journal, resume


class _PartWriter:
    """The encoder and the layout's Writer of one part, started once the features are known (the plan's, or
    inferred from the first examples, held until then); `num_rows` counts the rows written, resumed ones too."""

    def __init__(self, plan: WritePlan, source: ExampleSource, layout: Any, directory: Path,
                 journal: ShardJournal | None, resume: tuple[list[ShardInfo], int] | None) -> None:
        self.plan, self.source, self.layout, self.directory = plan, source, layout, directory
        self.journal, self.resume = journal, resume
        self.encoder: BatchEncoder | None = None
        self.writer: Any = None
        self.num_rows = resume[1] if resume else 0
        self.pending: list[tuple[Any, Any]] = []  # first examples, held until features are inferred

    def start(self, features: Features) -> None:
        self.encoder = BatchEncoder(features, batch_rows=self.plan.batch_rows)
        self.writer = self.layout.Writer(self.directory, self.encoder.schema, self.plan.writer_options)
        if self.journal is not None:
            if self.resume is not None:
                self.writer.resume_from(self.resume[0], self.journal)
            else:
                self.writer.journal = self.journal

    def add(self, key: Any, example: Any) -> None:
        try:
            self.encoder.add(example)
        except EncodingError as exc:
            raise ExampleError(self.plan.builder_name, self.plan.split, key, exc.field,
                               exc.message + self.source.encoding_hint) from None
        if self.encoder.full:
            self.num_rows += self.encoder.num_pending
            self.writer.write(self.encoder.flush())

    def _start_with_held(self, features: Features) -> None:
        self.start(features)
        for held in self.pending:
            self.add(*held)
        self.pending.clear()

    def write_examples(self, examples: Iterator[tuple[Any, Any]], skip: int) -> None:
        """Write `examples` after the first `skip` (in a journaled shard already; their keys still count)."""
        for position, (key, example) in enumerate(examples):
            if position < skip:
                continue
            if self.encoder is None:
                if self.plan.features is None:  # infer from a batch of first examples, then write them
                    self.pending.append((key, example))
                    if len(self.pending) % self.plan.batch_rows or (len(self.pending) < INFER_MAX_ROWS
                                                                    and _all_none_column(self.pending)):
                        continue  # a column that is None in every example so far: its type is further on
                    self._start_with_held(self.source.infer_features([e for _, e in self.pending]))
                    continue
                self.start(self.plan.features)
            self.add(key, example)

    def ensure_started(self) -> None:
        """Start a part that saw fewer examples than a batch (or none): features from those held, else empty."""
        if self.encoder is None:
            features = self.plan.features
            if features is None:
                features = self.source.infer_features([e for _, e in self.pending]) if self.pending \
                    else self.source.empty_features()
            self._start_with_held(features)

    def close(self) -> list[ShardInfo]:
        """Flush the last rows (an empty part still writes its empty batch) and close the Writer: its shards."""
        if self.encoder.num_pending or self.num_rows == 0:
            self.num_rows += self.encoder.num_pending
            self.writer.write(self.encoder.flush())
        return self.writer.close()


def write_part(plan: WritePlan, source: ExampleSource, job: Any, index: int, num_parts: int,
               staging: Path) -> PartResult:
    """Write one job's examples into its part folder (or return the part a previous run finished)."""
    directory = part_dir(staging, index)
    finished = PartResult.load(directory)
    if finished is not None:
        return finished
    layout = layout_module(plan.layout)
    part = _PartWriter(plan, source, layout, directory, *_open_part_folder(plan, layout, directory))
    skip = part.num_rows
    keys = KeyLog(directory / KEY_RUNS_DIR)
    desc = source.describe() + (f" [part {index + 1}/{num_parts}]" if num_parts > 1 else "")
    try:
        with media_store(plan.media_root or plan.target.parent) as store:
            if source.columnar:
                part.start(plan.features)
                part.num_rows += write_record_batches(source.examples(job), part.writer, part.encoder.schema, skip,
                                                      desc, source.expected_rows(job), plan.batch_rows)
            else:
                part.write_examples(_checked_examples(source, job, plan, keys, desc), skip)
            part.ensure_started()
            has_keys = source.keyed and num_parts > 1  # for the check across parts (write.key_check)
            ranged = RangedKeyWriter(directory / KEY_RANGES_DIR, plan.key_ranges) if has_keys else None
            duplicate = keys.finish(ranged)  # within the part, past the dict
            if duplicate is not None:
                raise ExampleError(plan.builder_name, plan.split, duplicate, None,
                                   "duplicate example key within the split")
            shards = part.close()
    except BaseException:
        if part.writer is not None:
            part.writer.abort()
        raise
    media = [ShardInfo(path=f"../{relative}", num_rows=0, num_bytes=size, sha256=Path(relative).name.split(".")[0])
             for relative, size in sorted(store.used.items())]
    result = PartResult(index=index, num_rows=part.num_rows, shards=shards, media=media,
                        extra=part.writer.extra_metadata(), features=part.encoder.features.to_dict(),
                        has_keys=has_keys, key_counts=ranged.counts if ranged is not None else [])
    result.save(directory)
    return result


def write_record_batches(batches: Iterator[pa.RecordBatch], writer: Any, schema: pa.Schema, skip: int,
                         desc: str, total: int | None = None, batch_rows: int = DEFAULT_BATCH_ROWS) -> int:
    """Write a columnar source's batches (after the first `skip` rows, which a journaled shard holds
    already), small ones joined up to `batch_rows` rows (write.coalesce: a loader over many small files
    reads one batch per file); returns the rows written."""

    def checked() -> Iterator[pa.RecordBatch]:
        nonlocal skip
        for batch in batches:
            if not batch.schema.equals(schema, check_metadata=False):
                raise StableDatasetsError(f"{desc}: a record batch has schema {batch.schema.to_string()} where the "
                                          f"features give {schema.to_string(show_schema_metadata=False)}")
            if skip:
                dropped = min(skip, batch.num_rows)
                batch, skip = batch.slice(dropped), skip - dropped
            if batch.num_rows:
                yield batch.replace_schema_metadata(schema.metadata)  # from_arrays wraps each column

    written = 0
    with progress(None, desc=desc, unit=" rows", total=None if total is None else max(total - skip, 0)) as bar:
        for batch in coalesced(checked(), batch_rows):
            writer.write(batch)
            written += batch.num_rows
            bar.update(batch.num_rows)
    return written
