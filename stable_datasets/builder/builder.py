"""`DatasetBuilder` / `GeneratorBasedBuilder`: the contract a dataset script implements.

A script defines `_info()` (features and description), `_split_generators(dl_manager)`
(what files each split needs) and `_generate_examples(**gen_kwargs)` yielding
`(key, example)`. `prepare()` turns one split into a fingerprinted, atomically published
cache; a valid cache is reused without calling any of the three.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import functools
import itertools
import json
import multiprocessing
import os
import re
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from loguru import logger

from stable_datasets.builder.config import BuilderConfig, Version
from stable_datasets.builder.info import DatasetInfo, SplitGenerator
from stable_datasets.builder.input_identity import input_files_identity
from stable_datasets.builder.source_identity import builder_source_text
from stable_datasets.cache.fingerprint import CACHE_FORMAT_VERSION, fingerprint, hash_text, to_jsonable
from stable_datasets.cache.journal import JOURNAL_FILE, ShardJournal
from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.media import media_store
from stable_datasets.cache.metadata import METADATA_FILE, CacheMetadata, ShardInfo
from stable_datasets.cache.paths import cache_root, downloads_dir, fingerprint_dir, safe_name
from stable_datasets.cache.publish import OWNER_FILE, STAGING_PREFIX, discard, publish
from stable_datasets.download.manager import DownloadManager
from stable_datasets.errors import CacheError, EncodingError, ExampleError, StableDatasetsError
from stable_datasets.features.encoder import DEFAULT_BATCH_ROWS, BatchEncoder
from stable_datasets.features.features import Features
from stable_datasets.layouts import layout_for, layout_module
from stable_datasets.layouts.base import require_positive_ints
from stable_datasets.progress import progress

DOWNLOAD_MODES = ("reuse_dataset_if_exists", "force_rebuild", "force_redownload")
VERIFICATION_MODES = ("basic_checks", "all_checks", "no_checks")
SPLITS_FILE = "_splits.json"


_FORKED_JOBS: list[Any] = []


def _run_forked_job(index: int) -> Any:
    return _FORKED_JOBS[index]()


def _has_path_videos(features: Features) -> bool:
    """Path-stored videos register media files as they encode, so their builds restart instead of resuming."""
    from stable_datasets.features.video import Video

    return any(isinstance(f, Video) and f.storage == "path" for f in features.values())


def split_gen_kwargs(gen_kwargs: dict[str, Any], num_jobs: int) -> list[dict[str, Any]]:
    """Divide the list-valued gen_kwargs into at most `num_jobs` contiguous, ordered groups.

    Lists must all have the same length (they describe the same items, e.g. files and their
    labels); other values are passed to every job unchanged.
    """
    lists = {k: v for k, v in gen_kwargs.items() if isinstance(v, list)}
    if num_jobs <= 1 or not lists:
        return [gen_kwargs]
    lengths = {k: len(v) for k, v in lists.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"to build with num_proc, list gen_kwargs must have equal lengths, got {lengths}")
    n = next(iter(lengths.values()))
    num_jobs = min(num_jobs, n)
    if num_jobs <= 1:
        return [gen_kwargs]
    bounds = [round(i * n / num_jobs) for i in range(num_jobs + 1)]
    return [{**gen_kwargs, **{k: v[lo:hi] for k, v in lists.items()}} for lo, hi in itertools.pairwise(bounds)]


def _writer_options(options: dict[str, Any]) -> dict[str, Any]:
    """Layout options minus `batch_rows`, which sizes the encoder's batches, not the files."""
    return {k: v for k, v in options.items() if k != "batch_rows"}


def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class DatasetBuilder:
    """Base class of every builder. See the module docstring for the three methods to write."""

    VERSION: ClassVar[Version | str] = Version("1.0.0")
    BUILDER_CONFIG_CLASS: ClassVar[type[BuilderConfig]] = BuilderConfig
    BUILDER_CONFIGS: ClassVar[list[BuilderConfig]] = []
    DEFAULT_CONFIG_NAME: ClassVar[str | None] = None
    DEFAULT_WRITER_BATCH_SIZE: ClassVar[int | None] = None
    #: Set by the registry when the class comes from a script file.
    name: ClassVar[str | None] = None
    _script_path: ClassVar[str | None] = None

    def __init__(self, config_name: str | None = None, *, config: BuilderConfig | None = None,
                 cache_dir: str | os.PathLike | None = None, **config_kwargs: Any):
        self.config = self._resolve_config(config_name, config, config_kwargs)
        self.cache_root = cache_root(cache_dir)
        self._info_cache: DatasetInfo | None = None

    # -- identity ------------------------------------------------------------------------
    @classmethod
    def builder_name(cls) -> str:
        if cls.name:
            return cls.name
        if cls._script_path:
            return Path(cls._script_path).stem
        return _snake_case(cls.__name__.removesuffix("Builder") or cls.__name__)

    @classmethod
    def _resolve_config(cls, config_name: str | None, config: BuilderConfig | None,
                        kwargs: dict[str, Any]) -> BuilderConfig:
        if config is None:
            configs = {c.name: c for c in cls.BUILDER_CONFIGS}
            name = config_name or cls.DEFAULT_CONFIG_NAME
            if configs:
                if name is None:
                    if len(configs) > 1:
                        raise ValueError(f"builder '{cls.builder_name()}' has several configs "
                                         f"{sorted(configs)}; pass name=...")
                    name = next(iter(configs))
                if name not in configs:
                    raise ValueError(f"builder '{cls.builder_name()}' has no config {name!r}; "
                                     f"configs are {sorted(configs)}")
                config = configs[name]
            else:
                config = cls.BUILDER_CONFIG_CLASS(name=name or "default")
        if kwargs:
            try:
                config = config.replace(**kwargs)
            except ValueError as exc:
                raise ValueError(f"builder '{cls.builder_name()}': {exc}") from None
        return config

    @property
    def version(self) -> Version:
        return Version(self.config.version or self.VERSION)

    @property
    def info(self) -> DatasetInfo:
        if self._info_cache is None:
            self._info_cache = self._info()
        return self._info_cache

    @property
    def features(self) -> Features:
        return self.info.features  # type: ignore[return-value]

    def source_text(self) -> str:
        """The builder's code (script and local modules, or methods and globals without a file): editing it
        changes the fingerprint."""
        return builder_source_text(type(self))

    # -- the three methods a script writes ---------------------------------------------
    def _info(self) -> DatasetInfo:
        raise NotImplementedError(f"{type(self).__name__} must implement _info()")

    def _split_generators(self, dl_manager: DownloadManager) -> list[SplitGenerator]:
        raise NotImplementedError(f"{type(self).__name__} must implement _split_generators(dl_manager)")

    def _generate_examples(self, **gen_kwargs: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
        raise NotImplementedError(f"{type(self).__name__} must implement _generate_examples(**gen_kwargs)")

    def _fingerprint_extra(self) -> dict[str, Any]:
        """Hook for subclasses with more inputs (e.g. a tokenizer identity)."""
        return {}

    def _split_extra(self, split: str) -> dict[str, Any]:
        """Hook: entries for the split's `_metadata.json` "extra", read after its examples are written."""
        return {}

    def _split_files(self, split: str) -> dict[str, str | bytes]:
        """Hook: small files (name -> content) published inside the split's cache and checked like shards."""
        return {}

    # -- fingerprint and directories -----------------------------------------------------
    def layout_name(self, storage_format: str) -> str:
        """The layout a storage format maps to; a Video(storage="frames") column implies video frames."""
        return layout_for(self.features, storage_format)

    def layout_options(self, storage_format: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        layout = layout_module(self.layout_name(storage_format))
        options = {**layout.DEFAULT_OPTIONS, "batch_rows": self.DEFAULT_WRITER_BATCH_SIZE or DEFAULT_BATCH_ROWS}
        unknown = sorted(set(overrides or {}) - set(options))
        if unknown:
            raise ValueError(f"unknown layout option(s) {unknown} for storage_format={storage_format!r}; "
                             f"options are {sorted(options)}")
        options = {**options, **(overrides or {})}
        require_positive_ints(options, "batch_rows")
        layout.check_options(options)
        return options

    def fingerprint_inputs(self, storage_format: str = "arrow",
                           layout_options: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "builder": self.builder_name(),
            "source_sha256": hash_text(self.source_text()),
            "config_name": self.config.name,
            "config": to_jsonable(self.config, "config"),
            "version": str(self.version),
            "features": self.features.to_dict(),
            "storage_format": storage_format,
            "layout": self.layout_name(storage_format),
            "layout_options": self.layout_options(storage_format, layout_options),
            "cache_format_version": CACHE_FORMAT_VERSION,
            "extra": to_jsonable(self._fingerprint_extra(), "fingerprint extra"),
            "input_files": input_files_identity(self.config, self.cache_root, self.builder_name()),
        }

    def fingerprint(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None) -> str:
        return fingerprint(self.fingerprint_inputs(storage_format, layout_options))

    def cache_dir(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None) -> Path:
        """The fingerprint directory; each split is a published folder inside it."""
        return fingerprint_dir(self.cache_root, self.builder_name(), self.config.name, str(self.version),
                               self.fingerprint(storage_format, layout_options))

    # -- building ------------------------------------------------------------------------
    def split_names(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None,
                    dl_manager: DownloadManager | None = None) -> list[str]:
        """Split names, from the record of an earlier build when there is one."""
        recorded = self.cache_dir(storage_format, layout_options) / SPLITS_FILE
        if recorded.is_file():
            return json.loads(recorded.read_text())
        return [g.name for g in self._generators(storage_format, layout_options, dl_manager)]

    def _generators(self, storage_format: str, layout_options: dict[str, Any] | None,
                    dl_manager: DownloadManager | None) -> list[SplitGenerator]:
        generators = list(self._split_generators(dl_manager or self._download_manager()))
        names = [g.name for g in generators]
        if len(set(names)) != len(names):
            raise StableDatasetsError(f"builder '{self.builder_name()}' returned duplicate split names {names}")
        directory = self.cache_dir(storage_format, layout_options)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{SPLITS_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(names))
        os.replace(tmp, directory / SPLITS_FILE)
        return generators

    def _download_manager(self, download_mode: str = "reuse_dataset_if_exists",
                          verification_mode: str = "basic_checks") -> DownloadManager:
        return DownloadManager(downloads_dir(self.cache_root),
                               force_download=download_mode == "force_redownload",
                               verify_checksums=verification_mode != "no_checks")

    def is_prepared(self, split: str, storage_format: str = "arrow",
                    layout_options: dict[str, Any] | None = None) -> bool:
        directory = self.cache_dir(storage_format, layout_options) / safe_name(split)
        return self._valid_cache(directory, self.fingerprint(storage_format, layout_options))

    @staticmethod
    def _valid_cache(directory: Path, expected_fingerprint: str) -> bool:
        if not (directory / METADATA_FILE).is_file():
            return False
        try:
            metadata = CacheMetadata.read(directory)
            metadata.check_shard_sizes(directory)
        except CacheError as exc:
            logger.warning("ignoring unusable cache {}: {}", directory, exc)
            return False
        return metadata.fingerprint == expected_fingerprint

    def prepare(self, splits: str | Iterable[str] | None = None, storage_format: str = "arrow", *,
                download_mode: str = "reuse_dataset_if_exists", verification_mode: str = "basic_checks",
                layout_options: dict[str, Any] | None = None, lock_timeout: float | None = None,
                soft_lock: bool | None = None, num_proc: int | None = None) -> dict[str, Path]:
        """Make sure each split has a valid published cache; return split -> cache directory."""
        if download_mode not in DOWNLOAD_MODES:
            raise ValueError(f"download_mode must be one of {DOWNLOAD_MODES}, got {download_mode!r}")
        if verification_mode not in VERIFICATION_MODES:
            raise ValueError(f"verification_mode must be one of {VERIFICATION_MODES}, got {verification_mode!r}")
        options = self.layout_options(storage_format, layout_options)
        fp = self.fingerprint(storage_format, options)
        base = self.cache_dir(storage_format, options)
        force = download_mode != "reuse_dataset_if_exists"
        dl_manager = self._download_manager(download_mode, verification_mode)
        generators: dict[str, SplitGenerator] | None = None

        def all_generators() -> dict[str, SplitGenerator]:
            nonlocal generators
            if generators is None:
                generators = {g.name: g for g in self._generators(storage_format, options, dl_manager)}
            return generators

        if splits is None:
            wanted = self.split_names(storage_format, options, dl_manager)
        else:
            wanted = [splits] if isinstance(splits, str) else list(splits)
        result: dict[str, Path] = {}
        for split in wanted:
            directory = base / safe_name(split)
            if not force and self._valid_cache(directory, fp):
                result[split] = directory
                continue
            if split not in all_generators():
                raise ValueError(f"builder '{self.builder_name()}' has no split {split!r}; "
                                 f"splits are {sorted(all_generators())}")
            with exclusive_lock(base / f".{safe_name(split)}.lock", timeout=lock_timeout, soft=soft_lock):
                if force or not self._valid_cache(directory, fp):
                    self._build_split(all_generators()[split], directory, storage_format, options, fp, num_proc)
            result[split] = directory
        return result

    def _build_split(self, generator: SplitGenerator, directory: Path, storage_format: str,
                     options: dict[str, Any], fp: str, num_proc: int | None = None) -> None:
        layout_name = self.layout_name(storage_format)
        name, split = self.builder_name(), generator.name
        logger.info("building {} [{}] split '{}' into {}", name, self.config.name, split, directory)
        jobs = split_gen_kwargs(generator.gen_kwargs, num_proc or 1)
        if num_proc and num_proc > 1 and len(jobs) == 1:
            logger.info("num_proc={} ignored: the gen_kwargs of split '{}' have no list to divide", num_proc, split)
        resumable = (len(jobs) == 1 and layout_module(layout_name).Writer.supports_resume
                     and not _has_path_videos(self.features))
        staging, resume = self._claim_staging(directory, resumable)
        journal = ShardJournal(staging) if resumable else None
        try:
            if len(jobs) == 1:
                shards, media, num_rows, extra, _ = self._write_part(split, jobs[0], staging, layout_name, options,
                                                                     directory.parent, resume, journal)
            else:
                shards, media, num_rows, extra = self._write_parts_in_parallel(split, jobs, staging, layout_name,
                                                                               options)
            from stable_datasets import __version__

            for file_name, content in self._split_files(split).items():  # files a builder ships with the split
                data = content.encode() if isinstance(content, str) else content
                (staging / file_name).write_bytes(data)
                media.append(ShardInfo(path=file_name, num_rows=0, num_bytes=len(data), sha256=hash_text(data)))
            extra = {**extra, **self._split_extra(split)}
            CacheMetadata(
                layout=layout_name, features=self.features.to_dict(), num_rows=num_rows, shards=shards,
                fingerprint=fp, fingerprint_inputs=self.fingerprint_inputs(storage_format, options),
                builder_name=name, config_name=self.config.name, version=str(self.version), split=split,
                layout_options=_writer_options(options), info=self.info.to_dict(), extra=extra, extra_files=media,
                cache_format_version=CACHE_FORMAT_VERSION, library_version=__version__,
                created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            ).write(staging)
            for bookkeeping in (JOURNAL_FILE, OWNER_FILE):
                (staging / bookkeeping).unlink(missing_ok=True)
            publish(staging, directory)
        except BaseException as exc:
            # An interrupt or a full disk keeps the journaled shards for the next run; bad data does not.
            if not (resumable and isinstance(exc, (KeyboardInterrupt, OSError))):
                discard(staging)
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise CacheError(f"no space left on device while building {name} '{split}' in {staging}; nothing "
                                 "was published. Free space (or point STABLE_DATASETS_CACHE_DIR elsewhere) and run "
                                 "again: finished shards are journaled and will be reused") from exc
            raise
        logger.info("published {} rows of {} '{}' to {}", num_rows, name, split, directory)

    @staticmethod
    def _claim_staging(directory: Path, resumable: bool) -> tuple[Path, tuple[list[ShardInfo], int] | None]:
        """The split's staging dir (we hold its build lock); what a killed build left is resumed or cleared."""
        staging = directory.parent / f"{STAGING_PREFIX}{directory.name}"
        resume = None
        if staging.exists():
            if resumable and (staging / JOURNAL_FILE).exists():
                shards, rows_done = ShardJournal(staging).recover()
                if shards:
                    resume = (shards, rows_done)
                    logger.info("resuming the build in {} after {} rows in {} shards", staging, rows_done,
                                len(shards))
            if resume is None:
                discard(staging)
        staging.mkdir(parents=True, exist_ok=True)
        (staging / OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                      "started": time.time()}))
        return staging, resume

    def _write_part(self, split: str, gen_kwargs: dict[str, Any], directory: Path, layout_name: str,
                    options: dict[str, Any], media_root: Path, resume: tuple[list[ShardInfo], int] | None = None,
                    journal: ShardJournal | None = None) -> tuple[list[ShardInfo], list[ShardInfo], int,
                                                                  dict[str, Any], set[Any]]:
        """Encode and write the examples of one set of gen_kwargs.

        Returns shards, extra files (media that path-stored videos placed in the shared store,
        relative to the split directory, so opening and verifying the cache checks them), row
        count, layout extras and the example keys seen.
        """
        name = self.builder_name()
        encoder = BatchEncoder(self.features, batch_rows=options["batch_rows"])
        writer = layout_module(layout_name).Writer(directory, encoder.schema, _writer_options(options))
        seen: set[Any] = set()
        num_rows = skip = 0
        if journal is not None:
            if resume is not None:
                writer.resume_from(resume[0], journal)
                num_rows = skip = resume[1]
            else:
                writer.journal = journal
        try:
            with media_store(media_root) as store:
                for index, (key, example) in enumerate(self._keyed_examples(gen_kwargs, name, split, seen)):
                    if index < skip:  # already in a journaled shard; the key still counts for duplicates
                        continue
                    try:
                        encoder.add(example)
                    except EncodingError as exc:
                        raise ExampleError(name, split, key, exc.field, exc.message) from None
                    if encoder.full:
                        num_rows += encoder.num_pending
                        writer.write(encoder.flush())
                if encoder.num_pending or num_rows == 0:
                    num_rows += encoder.num_pending
                    writer.write(encoder.flush())
            shards = writer.close()
        except BaseException:
            writer.abort()
            raise
        media = [ShardInfo(path=f"../{relative}", num_rows=0, num_bytes=size, sha256=Path(relative).name.split(".")[0])
                 for relative, size in sorted(store.used.items())]
        return shards, media, num_rows, writer.extra_metadata(), seen

    def _write_parts_in_parallel(self, split: str, jobs: list[dict[str, Any]], staging: Path, layout_name: str,
                                 options: dict[str, Any]) -> tuple[list[ShardInfo], list[ShardInfo], int,
                                                                   dict[str, Any]]:
        """Each job writes into its own folder in a forked worker; shards are then renumbered in order."""
        global _FORKED_JOBS
        folders = [staging / f".job-{i:05d}" for i in range(len(jobs))]
        for folder in folders:
            folder.mkdir()
        # Forked workers inherit the jobs, so builders defined in notebooks need no pickling.
        _FORKED_JOBS = [functools.partial(self._write_part, split, kw, folder, layout_name, options, staging.parent)
                        for kw, folder in zip(jobs, folders)]
        try:
            with multiprocessing.get_context("fork").Pool(len(jobs)) as pool:
                results = pool.map(_run_forked_job, range(len(jobs)))
        finally:
            _FORKED_JOBS = []
        shards: list[ShardInfo] = []
        media: dict[str, ShardInfo] = {}
        seen: set[Any] = set()
        for folder, (part_shards, part_media, _, _, keys) in zip(folders, results):
            duplicate = next(iter(seen & keys), None)
            if duplicate is not None:
                raise ExampleError(self.builder_name(), split, duplicate[1] if isinstance(duplicate, tuple)
                                   else duplicate, None, "duplicate example key within the split")
            seen |= keys
            media.update({m.path: m for m in part_media})
            for shard in part_shards:
                renamed = re.sub(r"\d+", f"{len(shards):05d}", shard.path, count=1)
                os.replace(folder / shard.path, staging / renamed)
                shards.append(dataclasses.replace(shard, path=renamed))
            folder.rmdir()
        return shards, sorted(media.values(), key=lambda m: m.path), sum(r[2] for r in results), results[0][3]

    def _keyed_examples(self, gen_kwargs: dict[str, Any], name: str, split: str,
                        seen: set[Any]) -> Iterator[tuple[Any, Any]]:
        """Examples with their keys checked: pairs, hashable, unique within the split."""
        examples = self._generate_examples(**gen_kwargs)
        for item in progress(examples, desc=f"{name} {split}", unit=" examples"):
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ExampleError(name, split, None, None,
                                   f"_generate_examples must yield (key, example) pairs, got {type(item).__name__}")
            key, example = item
            try:
                marker = (type(key).__name__, key) if not isinstance(key, (int, str)) else key
                duplicate = marker in seen
            except TypeError:
                raise ExampleError(name, split, key, None, f"example key must be hashable, got {type(key).__name__}") \
                    from None
            if duplicate:
                raise ExampleError(name, split, key, None, "duplicate example key within the split")
            seen.add(marker)
            yield key, example

    # -- reading -------------------------------------------------------------------------
    def as_dataset(self, split: str, storage_format: str = "arrow", **prepare_kwargs: Any):
        """Prepare one split (if needed) and open it."""
        from stable_datasets.load import open_cache

        directory = self.prepare(split, storage_format, **prepare_kwargs)[split]
        return open_cache(directory)

    def __repr__(self) -> str:
        fields = {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config)}
        return f"{type(self).__name__}(name={self.builder_name()!r}, config={fields})"


class GeneratorBasedBuilder(DatasetBuilder):
    """A builder whose examples come from `_generate_examples` (the usual kind)."""
