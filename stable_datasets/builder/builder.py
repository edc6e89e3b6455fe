"""`DatasetBuilder` / `GeneratorBasedBuilder`: the contract a dataset script implements.

A script defines `_info()` (features and description), `_split_generators(dl_manager)`
(what files each split needs) and `_generate_examples(**gen_kwargs)` yielding
`(key, example)`. `prepare()` turns one split into a fingerprinted, atomically published
cache; a valid cache is reused without calling any of the three.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from stable_datasets.builder.config import BuilderConfig, Version
from stable_datasets.builder.data_files import normalize_data_files
from stable_datasets.builder.file_groups import TARGET_BYTES, incremental_groups
from stable_datasets.builder.info import DatasetInfo, SplitGenerator
from stable_datasets.builder.local_modules import local_modules
from stable_datasets.builder.options import BuildOptions
from stable_datasets.builder.provenance import absolute_paths, builder_made_by
from stable_datasets.builder.source_identity import builder_source_text
from stable_datasets.builder.split_record import record_split_names, recorded_split_names
from stable_datasets.cache.paths import downloads_dir, fingerprint_dir, root_errors, split_folder_name
from stable_datasets.dataset.open import dataset_of
from stable_datasets.download.inputs import fetch_http_input, fetch_object, is_object_url, options_for
from stable_datasets.download.manager import DownloadManager
from stable_datasets.errors import InputChangedError, SplitRowsError, StableDatasetsError, UnknownSplitError
from stable_datasets.features.encoder import DEFAULT_BATCH_ROWS
from stable_datasets.features.features import Features
from stable_datasets.features.video import has_path_videos
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION, fingerprint, hash_text, to_jsonable
from stable_datasets.identity.inputs import (
    changed_input,
    identity_of,
    input_entries,
    local_entries,
    object_store_versions,
)
from stable_datasets.layouts import layout_for, layout_module
from stable_datasets.layouts.base import require_positive_ints
from stable_datasets.roots import CacheRoot, resolve_root
from stable_datasets.write import ExampleSource, JobRunner, SplitJobs, WritePlan
from stable_datasets.write.engines import user_modules

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset





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
                 cache_dir: str | os.PathLike | None = None, storage_options: dict[str, Any] | None = None,
                 download_dir: str | os.PathLike | None = None, **config_kwargs: Any):
        self.config = self._resolve_config(config_name, config, config_kwargs)
        #: where downloaded source files go (default: the cache root's downloads folder); not in the fingerprint
        self.download_dir: Path | None = None if download_dir is None else Path(download_dir).expanduser()
        #: where caches are published (roots.CacheRoot: a local folder or an object store), resolved once
        self.root: CacheRoot = resolve_root(cache_dir, storage_options)
        #: local folder of caches; for an object-store root, this node's work folder for it (staging, downloads)
        self.cache_root: Path = self.root.local_dir
        self._inputs_read: dict[str, Any] | None = None  # local input entries the last fingerprint identified
        #: {url: [size, version]} of the object-store data files the last fingerprint identified: a part reading
        #: one on its own node checks that it reads that version (identity.inputs.object_store_versions)
        self.object_versions: dict[str, list[Any]] = {}
        #: storage options of object-store inputs (data_files, downloads) by scheme: `storage_options` serve the
        #: cache root's scheme, or every scheme when the root is local (download.inputs.options_for)
        self.input_storage_options: dict[str, dict[str, Any]] | None = self.root.input_options(storage_options)
        self._info_cache: DatasetInfo | None = None
        #: check each split's rows against info.num_examples (prepare sets it from verification_mode)
        self.verify_rows = True

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> DatasetBuilder:
        """The builder instance, as `cls(...)` gives for most builders; the front door calls this because a
        catalog class (stable_datasets.catalog) called directly loads its data instead, as upstream's do."""
        return type.__call__(cls, *args, **kwargs)

    # -- identity ------------------------------------------------------------------------
    @classmethod
    def builder_name(cls) -> str:
        if cls.name:
            return cls.name
        if cls._script_path:
            return Path(cls._script_path).stem
        return _snake_case(cls.__name__.removesuffix("Builder") or cls.__name__)

    @classmethod
    def builder_source(cls) -> str:
        """Which builder this is, beyond its name (two scripts may both be called `shapes`): the script's
        resolved path, else `module:qualname`. Recorded in `_metadata.json` so `ls`/`prune`/`rm` find it."""
        return cls._script_path or f"{cls.__module__}:{cls.__qualname__}"

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

    def columnar_examples(self) -> bool:
        """True when `_generate_examples` yields Arrow record batches in the features' schema instead of
        (key, example) pairs (loaders of tabular files): they skip the per-row encoder."""
        return False

    def _fingerprint_extra(self) -> dict[str, Any]:
        """Hook for subclasses with more inputs (e.g. a tokenizer identity)."""
        return {}

    # -- fingerprint and directories -----------------------------------------------------
    def layout_name(self, storage_format: str) -> str:
        """The layout a storage format maps to; a Video(storage="frames") column implies video frames."""
        return layout_for(self.features, storage_format)

    def layout_options(self, storage_format: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The write options of `storage_format`'s layout: its defaults, the builder's batch size, `overrides`."""
        return self._options_for(self.layout_name(storage_format), storage_format, overrides)

    def _options_for(self, layout_name: str, storage_format: str, overrides: dict[str, Any] | None) -> dict[str, Any]:
        layout = layout_module(layout_name)
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
        """Everything the cache's fingerprint covers; it names the layout and its options as resolved here,
        once (`prepare` reads them back from this dict rather than resolving them again)."""
        layout = self.layout_name(storage_format)
        return {
            "builder": self.builder_name(),
            "source_sha256": hash_text(self.source_text()),
            "config_name": self.config.name,
            "config": self._config_identity(),
            "version": str(self.version),
            "features": self.features.to_dict(),
            "storage_format": storage_format,
            "layout": layout,
            "layout_options": self._options_for(layout, storage_format, layout_options),
            "cache_format_version": CACHE_FORMAT_VERSION,
            "extra": to_jsonable(self._fingerprint_extra(), "fingerprint extra"),
            "input_files": self.input_files_identity(),
        }

    def _config_identity(self) -> dict[str, Any]:
        """The config as the fingerprint hashes it: `data_files`/`data_dir` made absolute, so the same files named
        from another folder (or absolutely, as `ls` and `prune` name them when they ask the builder again) give
        the same fingerprint; their content enters through `input_files`."""
        config = to_jsonable(self.config, "config")
        for key in ("data_files", "data_dir"):
            if isinstance(config, dict) and config.get(key):
                config[key] = absolute_paths(config[key])
        return config

    def input_files_identity(self) -> dict[str, Any] | None:
        """The identity of the files `data_files`/`data_dir` name (see identity/inputs.py). The local
        files' entries are kept: `check_inputs_unchanged` compares them again after the build read them."""
        entries = input_entries(self.config, self.cache_root, self.builder_name(), self._input_files_by_split,
                                self.input_storage_options)
        self._inputs_read = local_entries(entries)
        self.object_versions = object_store_versions(entries)
        return identity_of(self.config, entries)

    def _resolved_data_files(self) -> dict[str, list[str]] | None:
        """Hook: the resolved `data_files` when the builder has them already (else they are resolved)."""
        return None

    def _input_files_by_split(self) -> dict[str, list[str]]:
        """`data_files` resolved to files by split, for their identity: the builder's own resolution when it has
        one, else resolved now."""
        resolved = self._resolved_data_files()
        if resolved is None:
            resolved = normalize_data_files(self.config.data_files, self.builder_name(),
                                            input_options=self.input_storage_options)
        return resolved

    def check_split_rows(self, split: str, num_rows: int) -> None:
        """A split whose row count differs from `info.num_examples` is an error naming both (HF's basic check),
        before anything is published; verification_mode="no_checks" skips it (a small stand-in file)."""
        expected = (self.info.num_examples or {}).get(split)
        if expected is not None and num_rows != expected and self.verify_rows:
            raise SplitRowsError(f"builder '{self.builder_name()}' (config {self.config.name!r}) split {split!r}: "
                                 f"expected {expected} rows, got {num_rows}; nothing was published (the source "
                                 "files differ from the official ones? verification_mode='no_checks' accepts them)")

    def check_inputs_unchanged(self) -> None:
        """Raise when a local input file changed since the fingerprint identified it (written to while the build
        read it): the rows would be a mix of versions, published under the fingerprint of the first."""
        before = self._inputs_read
        if before is None:
            return
        after = input_entries(self.config, self.cache_root, self.builder_name(), self._input_files_by_split,
                              self.input_storage_options, local_only=True)
        change = changed_input(before, after)
        if change is not None:
            raise InputChangedError(f"builder '{self.builder_name()}': {change} while the build read it; nothing "
                                    "was published. Run again once the file is no longer being written")

    def fingerprint(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None) -> str:
        return fingerprint(self.fingerprint_inputs(storage_format, layout_options))

    def resolve(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None) -> ResolvedPlan:
        """Layout, options, fingerprint inputs and fingerprint directory, computed once (the inputs stat
        every input file) for `prepare` to hand to everything below it."""
        inputs = self.fingerprint_inputs(storage_format, layout_options)
        fp = fingerprint(inputs)
        return ResolvedPlan(storage_format=storage_format, layout=inputs["layout"], options=inputs["layout_options"],
                            inputs=inputs, fingerprint=fp, directory=self._dir_for(fp))

    def cache_dir(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None) -> Path:
        """The fingerprint directory; each split is a published folder inside it."""
        return self._dir_for(self.fingerprint(storage_format, layout_options))

    def _dir_for(self, fp: str) -> Path:
        return fingerprint_dir(self.cache_root, self.builder_name(), self.config.name, str(self.version), fp)

    # -- building ------------------------------------------------------------------------
    def split_names(self, storage_format: str = "arrow", layout_options: dict[str, Any] | None = None,
                    dl_manager: DownloadManager | None = None, *, directory: Path | None = None) -> list[str]:
        """Split names, from the record of an earlier build when there is one. `directory` is the
        fingerprint folder when the caller has resolved it (else it is found again from the inputs)."""
        directory = directory or self.cache_dir(storage_format, layout_options)
        recorded = recorded_split_names(self.root, directory)
        if recorded is not None:
            return recorded
        return [g.name for g in self._generators(storage_format, layout_options, dl_manager, directory)]

    def _generators(self, storage_format: str, layout_options: dict[str, Any] | None,
                    dl_manager: DownloadManager | None, directory: Path | None = None) -> list[SplitGenerator]:
        """The split generators; their names are recorded in `directory` (the fingerprint folder,
        found again from the inputs unless the caller, who just fingerprinted them, passes it)."""
        generators = list(self._split_generators(dl_manager or self._download_manager()))
        names = [g.name for g in generators]
        if len(set(names)) != len(names):
            raise StableDatasetsError(f"builder '{self.builder_name()}' returned duplicate split names {names}")
        record_split_names(self.root, directory or self.cache_dir(storage_format, layout_options), names)
        return generators

    def local_input(self, path: str) -> str:
        """A data file on this node's disk: an object-store URL (`s3://`, `gs://`), or an `http(s)://` one the
        fingerprint identified by its validators, is copied into this node's inputs folder, and must still be the
        version this builder's fingerprint identified (else InputChangedError); any other path is returned as it
        is. Builders keep such URLs in their jobs and call this where a part reads the file, so parts that run on
        machines sharing no disk (engine="ray") each read their own copy."""
        if is_object_url(path):
            return str(fetch_object(path, options_for(path, self.input_storage_options),
                                    self.object_versions.get(path))[0])
        if path in self.object_versions:  # http(s), with validators
            return str(fetch_http_input(path, self.object_versions[path]))
        return path

    def _download_manager(self, download_mode: str = "reuse_dataset_if_exists",
                          verification_mode: str = "basic_checks") -> DownloadManager:
        return DownloadManager(self.download_dir or downloads_dir(self.cache_root),
                               force_download=download_mode == "force_redownload",
                               verify_checksums=verification_mode != "no_checks",
                               input_options=self.input_storage_options)

    def is_prepared(self, split: str, storage_format: str = "arrow",
                    layout_options: dict[str, Any] | None = None) -> bool:
        resolved = self.resolve(storage_format, layout_options)
        return self._published(resolved.directory / split_folder_name(split), resolved.fingerprint)

    def _published(self, directory: Path, expected_fingerprint: str) -> bool:
        """A valid cache of `expected_fingerprint` is published for `directory` (on the builder's root)."""
        return self.root.is_published(directory, expected_fingerprint)

    def prepare(self, splits: str | Iterable[str] | None = None, storage_format: str = "arrow", *,
                download_mode: str = "reuse_dataset_if_exists", verification_mode: str = "basic_checks",
                layout_options: dict[str, Any] | None = None, lock_timeout: float | None = None,
                soft_lock: bool | None = None, num_proc: int | None = None, engine: str = "process",
                ray_address: str | None = None, cache_limit: str | int | None = None) -> dict[str, Path | str]:
        """Make sure each split has a valid published cache; return split -> cache directory.

        `cache_limit` (else $STABLE_DATASETS_CACHE_LIMIT; see cache.limit) bounds a local root: after a
        publish past it, the least recently used caches no process has open are evicted.

        With an object-store root (`self.root`, roots.CacheRoot) the values are the splits' URLs (str): each
        split is built locally, then published by storage.remote_cache.

        A split is built in up to `num_proc` parts (its gen_kwargs' lists divided in order), in
        forked processes (`engine="process"`) or as Ray tasks (`engine="ray"`, on the cluster
        `ray_address` or $RAY_ADDRESS names, else a local one); the rows are the same either way.

        A cache root that cannot take the cache (a file, a read-only filesystem, another user's folder) is one
        CacheError naming it and what to do (cache.paths.root_errors).
        """
        return self.prepare_splits(splits, BuildOptions(
            storage_format=storage_format, download_mode=download_mode, verification_mode=verification_mode,
            layout_options=layout_options, lock_timeout=lock_timeout, soft_lock=soft_lock, num_proc=num_proc,
            engine=engine, ray_address=ray_address, cache_limit=cache_limit))

    def prepare_splits(self, splits: str | Iterable[str] | None, options: BuildOptions) -> dict[str, Path | str]:
        """`prepare` with its options as one value (what `load_dataset` hands down, made and checked once)."""
        with root_errors(self.cache_root):
            return self._prepare(splits, options)

    def _prepare(self, splits: str | Iterable[str] | None, given: BuildOptions) -> dict[str, Path | str]:
        storage_format = given.storage_format
        self.verify_rows = given.verification_mode != "no_checks"
        runner = JobRunner(engine=given.engine, num_proc=given.num_proc, ray_address=given.ray_address)
        resolved = self.resolve(storage_format, given.layout_overrides())  # once: it stats every input file
        options, fp, base = resolved.options, resolved.fingerprint, resolved.directory
        force = given.force
        dl_manager = self._download_manager(given.download_mode, given.verification_mode)
        generators: dict[str, SplitGenerator] | None = None

        def all_generators() -> dict[str, SplitGenerator]:
            nonlocal generators
            if generators is None:
                generators = {g.name: g for g in self._generators(storage_format, options, dl_manager, base)}
            return generators

        if splits is None:
            recorded = recorded_split_names(self.root, base)
            wanted = recorded if recorded is not None else list(all_generators())  # listed once, then built
        else:
            wanted = [splits] if isinstance(splits, str) else list(splits)
        cached: dict[str, bool] = {}
        if splits is not None and len(wanted) > 1:
            # A typo in 'train+tset' fails before 'train' is built.
            cached = {s: not force and self._published(base / split_folder_name(s), fp) for s in wanted}
            unknown = [s for s in wanted if not cached[s] and s not in all_generators()]
            if unknown:
                raise UnknownSplitError(f"builder '{self.builder_name()}' has no split {unknown[0]!r}; "
                                        f"splits are {sorted(all_generators())}")
        result: dict[str, Path | str] = {}
        for split in wanted:
            directory = base / split_folder_name(split)
            if cached.get(split):
                result[split] = self.root.address(directory)
                continue

            def write_for(target: Path, split: str = split) -> tuple[WritePlan, ExampleSource]:
                if split not in all_generators():
                    raise UnknownSplitError(f"builder '{self.builder_name()}' has no split {split!r}; "
                                            f"splits are {sorted(all_generators())}")
                plan = self._write_plan(split, target, storage_format, options, fp, resolved.inputs,
                                        cache_limit=given.cache_limit, layout=resolved.layout)
                if force:  # a forced rebuild trusts nothing an earlier build made, its parts included
                    plan = dataclasses.replace(plan, reuse_parts=False)
                return plan, BuilderSource(self, all_generators()[split])

            result[split] = self.root.publish(directory, fp, write_for, runner, force=force,
                                              lock_timeout=given.lock_timeout, soft_lock=given.soft_lock)
        return result

    def _write_plan(self, split: str, directory: Path, storage_format: str, options: dict[str, Any],
                    fp: str, inputs: dict[str, Any], cache_limit: str | int | None = None,
                    evict: bool = True, layout: str | None = None) -> WritePlan:
        """The write plan of one split, from values `prepare` resolved once (`layout` among them; None
        resolves it from `storage_format`)."""
        # Path-stored videos register media files as they encode, so a part restarts instead of resuming.
        return WritePlan(
            target=directory, layout=layout or self.layout_name(storage_format), options=options, fingerprint=fp,
            fingerprint_inputs=inputs, builder_name=self.builder_name(), config_name=self.config.name,
            version=str(self.version), split=split, info=self.info.to_dict(), features=self.features,
            builder_source=self.builder_source(), resumable=not has_path_videos(self.features),
            media_root=directory.parent, made_by=self.made_by(inputs), cache_limit=cache_limit, evict=evict,
            part_basis=_part_basis(inputs) if evict else "")

    def _part_identity(self, job: Any) -> Any | None:
        """Hook: the input identity of one job (see ExampleSource.part_identity); None (always built) unless the
        builder names `INCREMENTAL_FILES`: then those files by resolved path, size and mtime, with the job's other
        gen_kwargs. Generic file loaders name their files as the fingerprint identified them."""
        files = job.get(self.INCREMENTAL_FILES) if self.INCREMENTAL_FILES and isinstance(job, dict) else None
        if not isinstance(files, list):
            return None
        entries = []
        for path in files:
            try:
                info = os.stat(path)
            except (OSError, TypeError, ValueError):
                return None
            entries.append([os.path.realpath(path), info.st_size, info.st_mtime_ns])
        return {"files": entries, "other": {k: v for k, v in job.items() if k != self.INCREMENTAL_FILES}}

    #: True for builders whose parts a later build can reuse (`_part_identity`); on object-store roots the build
    #: is always whole, and says so
    INCREMENTAL_PARTS: ClassVar[bool] = False

    def made_by(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """What `_metadata.json` records as having made this builder's caches (see builder.provenance)."""
        config = self.config
        given = {"data_files": to_jsonable(getattr(config, "data_files", None), "data_files"),
                 "data_dir": to_jsonable(getattr(config, "data_dir", None), "data_dir")}
        script = getattr(type(self), "_script_path", None)
        if script:
            given["script"] = os.fspath(script)
        return builder_made_by(self.made_by_kind, self.builder_name(), self.builder_source(), inputs,
                               self.resolved_data_files(), given)

    #: "builder" for a dataset's own builder, "loader" for the generic file loaders
    made_by_kind: ClassVar[str] = "builder"

    def resolved_data_files(self) -> dict[str, list[str]] | None:
        """split -> the files `data_files` names after globbing; None when the config names none."""
        data_files = getattr(self.config, "data_files", None)
        if not data_files:
            return None
        try:
            return normalize_data_files(data_files, self.builder_name(), input_options=self.input_storage_options)
        except Exception:  # the build reports a bad spec; the record only lacks the list
            return None

    #: the name of a split's gen_kwargs list of local input files whose parts a later build may reuse (opt-in):
    #: the split is then built in groups of those files (builder.file_groups; the other lists of the same length
    #: cut alike), and a rebuild links the parts whose files (path, size, mtime) and other gen_kwargs did not
    #: change from the previous cache (write.reuse). The rows of one file must depend on it alone, example keys
    #: must be unique across files (as with num_proc), and the files come from `data_files`/`data_dir` (their
    #: identity in `_fingerprint_extra` would make every part new).
    INCREMENTAL_FILES: ClassVar[str | None] = None
    #: input bytes per part, on average, when a split's files are grouped (builder.file_groups): a part is what a
    #: later build reuses or builds again after an edit, and at least one shard file
    PART_TARGET_BYTES: ClassVar[int] = TARGET_BYTES

    def _plan_split(self, generator: SplitGenerator, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        """Hook: a split's jobs, one per part; by default its gen_kwargs' lists divided in order (in file groups
        for a builder that names `INCREMENTAL_FILES`).

        Override it for a global step before the parts (packing needs every length): do per-job
        work in parallel with `run(fn, calls)` (files go in `workdir`, which every worker sees),
        combine the results, and return the jobs for `_generate_examples` together with `extra`
        (for `_metadata.json`) and `files` (published with the split). Keep no state on `self`:
        parts may run in other processes or on other machines.
        """
        gen_kwargs = generator.gen_kwargs
        files = gen_kwargs.get(self.INCREMENTAL_FILES) if self.INCREMENTAL_FILES else None
        groups = incremental_groups(files, num_jobs, self.PART_TARGET_BYTES) if isinstance(files, list) else None
        if groups:
            lists = {k: v for k, v in gen_kwargs.items() if isinstance(v, list) and len(v) == len(files)}
            return SplitJobs([{**gen_kwargs, **{k: v[lo:hi] for k, v in lists.items()}} for lo, hi in groups])
        return SplitJobs(split_gen_kwargs(gen_kwargs, num_jobs))

    # -- reading -------------------------------------------------------------------------
    def as_dataset(self, split: str, storage_format: str = "arrow", **prepare_kwargs: Any) -> StableDataset:
        """Prepare one split (if needed) and open it."""

        return self.open_split(self.prepare(split, storage_format, **prepare_kwargs)[split])

    def open_split(self, address: Path | str, **read_options: Any) -> StableDataset:
        """The dataset of a split `prepare` published at `address` (on this builder's root)."""
        return dataset_of(*self.root.open(address, read_options))

    def __repr__(self) -> str:
        fields = {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config)}
        return f"{type(self).__name__}(name={self.builder_name()!r}, config={fields})"


def _part_basis(inputs: dict[str, Any]) -> str:
    """What every part's rows depend on besides their own input files (write.reuse): all the fingerprint covers
    but the input files' identity."""
    return fingerprint({"part_basis": {k: v for k, v in inputs.items() if k != "input_files"}})


@dataclasses.dataclass(frozen=True)
class ResolvedPlan:
    """What `prepare` resolves once per call and hands down: nothing below recomputes it."""

    storage_format: str
    layout: str  # a module name under stable_datasets.layouts
    options: dict[str, Any]  # the layout's write options, checked
    inputs: dict[str, Any]  # the fingerprint inputs (they stat every input file)
    fingerprint: str
    directory: Path  # the fingerprint folder; each split is published inside it


class BuilderSource(ExampleSource):
    """A builder's split as the write path's source: jobs from `_plan_split`, examples from
    `_generate_examples`. Pickled whole into Ray tasks (the builder's script goes by value)."""

    def __init__(self, builder: DatasetBuilder, generator: SplitGenerator):
        self.builder, self.generator = builder, generator
        self.columnar = builder.columnar_examples()
        self.keyed = not self.columnar  # record batches carry no example keys
        self.incremental = builder.INCREMENTAL_PARTS or bool(builder.INCREMENTAL_FILES)

    def plan_jobs(self, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        return self.builder._plan_split(self.generator, num_jobs, run, workdir)

    def examples(self, job: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
        return self.builder._generate_examples(**job)

    def part_identity(self, job: Any) -> Any | None:
        return self.builder._part_identity(job)

    def check_before_publish(self, num_rows: int) -> None:
        self.builder.check_inputs_unchanged()
        self.builder.check_split_rows(self.generator.name, num_rows)

    def describe(self) -> str:
        return f"{self.builder.builder_name()} {self.generator.name}"

    def code_modules(self) -> list[ModuleType]:
        modules = user_modules(type(self.builder))
        return modules + [m for m in local_modules(type(self.builder)) if m not in modules]


class GeneratorBasedBuilder(DatasetBuilder):
    """A builder whose examples come from `_generate_examples` (the usual kind)."""
