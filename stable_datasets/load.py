"""The front door: `load_dataset`, `load_builder`, `open_cache`."""

from __future__ import annotations

import os
from typing import Any, overload

from stable_datasets.builder.builder import DatasetBuilder
from stable_datasets.builder.options import BuildOptions
from stable_datasets.dataset.combine import with_split_name
from stable_datasets.dataset.dataset_dict import DatasetDict
from stable_datasets.dataset.open import dataset_of, open_cache, open_stream
from stable_datasets.dataset.splits import SplitSlice, parse_split
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.dataset.transforms import concatenate_datasets
from stable_datasets.errors import BuilderNotFoundError
from stable_datasets.hf_arguments import hub_hint, take_hub_arguments
from stable_datasets.registry import resolve_builder

__all__ = ["load_builder", "load_dataset", "open_cache"]

#: generic loaders whose data files `streaming=True` reads where they lie, without building a cache
FILE_STREAM_LOADERS = ("csv", "json", "parquet", "arrow", "text", "webdataset")


def load_builder(path: str | os.PathLike | type[DatasetBuilder], name: str | None = None, *,
                 cache_dir: str | os.PathLike | None = None, storage_options: dict[str, Any] | None = None,
                 **config_kwargs: Any) -> DatasetBuilder:
    """A builder instance from a registered name or generic loader ("csv", "json", ...), a script path,
    a folder holding a script, or a folder of data files (its loader inferred from the files).

    `cache_dir` may be an object-store URL (`s3://bucket/prefix`); `storage_options` then give its
    endpoint and credentials where the environment does not (docs/object-storage-and-streaming.md).
    """
    cls, options = resolve_builder(path)
    data_dir = config_kwargs.get("data_dir")
    if "data_dir" in options and data_dir is not None and not os.path.isabs(os.fspath(data_dir)):
        # a data_dir given with a folder of data files is inside it, and its files choose the loader (as in HF)
        cls, options = resolve_builder(os.path.join(options["data_dir"], os.fspath(data_dir)))
        config_kwargs = {k: v for k, v in config_kwargs.items() if k != "data_dir"}
    if storage_options is not None:
        options = {**options, "storage_options": storage_options}
    return cls.create(name, cache_dir=cache_dir, **{**options, **config_kwargs})


@overload
def load_dataset(path: str | os.PathLike | type[DatasetBuilder], split: str, *, name: str | None = None,
                 storage_format: str = "arrow", cache_dir: str | os.PathLike | None = None,
                 download_mode: str = "reuse_dataset_if_exists", verification_mode: str = "basic_checks",
                 num_proc: int | None = None, engine: str = "process", ray_address: str | None = None,
                 layout_options: dict[str, Any] | None = None, storage_options: dict[str, Any] | None = None,
                 streaming: bool = False, cache_limit: str | int | None = None,
                 **config_kwargs: Any) -> StableDataset: ...


@overload
def load_dataset(path: str | os.PathLike | type[DatasetBuilder], split: None = None, *, name: str | None = None,
                 storage_format: str = "arrow", cache_dir: str | os.PathLike | None = None,
                 download_mode: str = "reuse_dataset_if_exists", verification_mode: str = "basic_checks",
                 num_proc: int | None = None, engine: str = "process", ray_address: str | None = None,
                 layout_options: dict[str, Any] | None = None, storage_options: dict[str, Any] | None = None,
                 streaming: bool = False, cache_limit: str | int | None = None,
                 **config_kwargs: Any) -> DatasetDict: ...


def load_dataset(path: str | os.PathLike | type[DatasetBuilder], split: str | None = None, *,
                 name: str | None = None, storage_format: str = "arrow",
                 cache_dir: str | os.PathLike | None = None, download_mode: str = "reuse_dataset_if_exists",
                 verification_mode: str = "basic_checks", num_proc: int | None = None, engine: str = "process",
                 ray_address: str | None = None, layout_options: dict[str, Any] | None = None,
                 storage_options: dict[str, Any] | None = None, streaming: bool = False,
                 cache_limit: str | int | None = None, **config_kwargs: Any) -> StableDataset | DatasetDict:
    """Reuse a valid cache or build one; a `StableDataset` for `split`, a `DatasetDict` for None.

    `split` follows Hugging Face: "train", "train[:10%]", "train[10:20]", "train+test".
    `num_proc` builds a split in that many parts when its gen_kwargs hold lists (e.g. files), in
    forked processes (`engine="process"`) or as Ray tasks (`engine="ray"`, see docs/parallel-builds.md).
    `cache_dir="s3://bucket/prefix"` (or $STABLE_DATASETS_CACHE_DIR) publishes to and reads from an object
    store, with `storage_options` for its endpoint and credentials (docs/object-storage-and-streaming.md).
    `cache_limit` ("200GB", "20%", or $STABLE_DATASETS_CACHE_LIMIT) bounds a local cache root: the least
    recently used caches not in use are evicted after a publish past it (docs/caches-and-fingerprints.md).
    `streaming=True` returns `StableDataset.to_iterable()` of the split (a dict of them for None): an
    iterable read a block at a time, see docs/object-storage-and-streaming.md; for a generic loader's
    data files, a stream of the files themselves, with no cache built (docs/training-streams.md).
    Hugging Face's Hub-only arguments (`keep_in_memory`, `token`, `revision`, ...) are accepted at
    their defaults and otherwise refused in one line (stable_datasets/hf_arguments.py).
    """
    config_kwargs = take_hub_arguments(config_kwargs)
    if "config_name" in config_kwargs:  # the catalog classes' (upstream's) spelling of `name`
        if name is not None:
            raise TypeError("load_dataset: pass the config as name= or config_name=, not both")
        name = config_kwargs.pop("config_name")
    options = BuildOptions(storage_format=storage_format, download_mode=download_mode,  # checked once, here
                           verification_mode=verification_mode, layout_options=layout_options, num_proc=num_proc,
                           engine=engine, ray_address=ray_address, cache_limit=cache_limit)
    parts = None if split is None else parse_split(split)  # once
    try:  # its cache root is resolved once, there
        builder = load_builder(path, name, cache_dir=cache_dir, storage_options=storage_options, **config_kwargs)
    except BuilderNotFoundError as exc:
        hint = hub_hint(path)
        if not hint:
            raise
        raise BuilderNotFoundError(f"{exc}{hint}") from None
    if streaming and (parts is None or len(parts) == 1):
        return _load_streams(builder, split, parts, options)
    if parts is None:
        dirs = builder.prepare_splits(None, options)
        loaded: Any = DatasetDict({s: builder.open_split(d) for s, d in dirs.items()})
    else:
        loaded = _load_split(builder, split, parts, options)  # type: ignore[arg-type]
    if not streaming:
        return loaded
    if isinstance(loaded, DatasetDict):
        return {name: ds.to_iterable() for name, ds in loaded.items()}  # type: ignore[return-value]
    return loaded.to_iterable()


def _load_split(builder: DatasetBuilder, split: str, parts: list[SplitSlice], options: BuildOptions) -> StableDataset:
    """The dataset of a split string: its parts' splits built once each, sliced, concatenated in order."""
    dirs = builder.prepare_splits(list(dict.fromkeys(p.name for p in parts)), options)
    datasets = []
    for part in parts:
        ds = builder.open_split(dirs[part.name])
        if not part.is_whole:
            start, stop = part.bounds(len(ds))
            ds = ds.select(range(start, stop))
        datasets.append(ds)
    return with_split_name(datasets[0] if len(datasets) == 1 else concatenate_datasets(datasets), split)


def _load_streams(builder: DatasetBuilder, split: str | None, parts: list[SplitSlice] | None,
                  options: BuildOptions) -> Any:
    """`streaming=True` for one split or a slice of it: a remote Arrow/Parquet split is read a shard at a time
    (storage.remote_stream; a slice downloads only the shards it covers), anything else is opened and read with
    `to_iterable()`. The data files of a generic loader (csv, json, parquet, arrow, text, webdataset) are streamed
    where they lie, without a cache (loaders.file_stream)."""
    part = None if parts is None else parts[0]
    if builder.name in FILE_STREAM_LOADERS and (streams := _file_streams(builder, split, part)) is not None:
        return streams
    sliced = part is not None and not part.is_whole

    def stream(address: Any) -> Any:
        found = open_stream(builder.root, address, part.bounds if sliced else None)
        if found is not None:
            return found
        opened = builder.open_split(address)
        if sliced:
            opened = with_split_name(opened.select(range(*part.bounds(len(opened)))), split)
        return opened.to_iterable()

    dirs = builder.prepare_splits(None if part is None else [part.name], options)
    if part is None:
        return {s: stream(d) for s, d in dirs.items()}
    return stream(dirs[part.name])


def _file_streams(loader: Any, split: str | None, part: SplitSlice | None) -> Any:
    """Streams of a generic loader's data files, read where they lie (a dict of them for split=None); a shuffle
    permutes units and mixes rows within windows of WINDOW_UNITS of them (each parsed once an epoch)."""
    from stable_datasets.loaders.base import FileLoader  # local: the loaders' readers import ~0.1 s more
    from stable_datasets.loaders.file_stream import WINDOW_UNITS, open_file_backends  # local: as above

    if not isinstance(loader, FileLoader):  # a builder script named like a loader
        return None

    backends = open_file_backends(loader, None if part is None else [part.name])

    def stream(backend: Any) -> Any:
        dataset = dataset_of(backend, backend.metadata)
        if part is not None and not part.is_whole:
            dataset = with_split_name(dataset.select(range(*part.bounds(len(dataset)))), split)
        return dataset.to_iterable(window_shards=WINDOW_UNITS, lanes=True)  # each unit parsed by about one consumer

    if part is None:
        return {name: stream(backend) for name, backend in backends.items()}
    return stream(backends[part.name])
