"""`CatalogBuilder`: the base of the catalog's datasets (stable_datasets.images, .video, .timeseries), with
upstream stable-datasets' call shape.

Calling a catalog class loads its data, as upstream's `BaseDatasetBuilder.__new__` does:

    from stable_datasets.images import CIFAR100
    train = CIFAR100(split="train")              # downloaded, checked, built once, then reused
    both = CIFAR100(storage_format="lance")      # a DatasetDict of every split

It is `load_dataset(CIFAR100, ...)` under upstream's keyword names (`config_name`, `processed_cache_dir`,
`download_dir`), so every cache rule holds: fingerprinted folders, atomic publish, locks, `num_proc`. The
builder instance itself (for `prepare`, the CLI, the registry) comes from `CIFAR100.create(...)`.

A catalog builder states its `SOURCE` (a `DatasetSource`: official URLs, mirrors, sha256 and size of each
file), `_info()` with the features and each split's row count (`num_examples`, checked after every build),
and `_generate_examples(data_path, split)`: by default each asset named like a split is downloaded and passed
to it as `data_path`. Datasets behind a login set `MANUAL_DOWNLOAD` to what to fetch, and read `data_dir`.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from stable_datasets.builder import DatasetBuilder, DatasetInfo, GeneratorBasedBuilder, Split, SplitGenerator
from stable_datasets.catalog.source import DatasetSource, DownloadInfo
from stable_datasets.dataset.dataset_dict import DatasetDict
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.download import DownloadManager
from stable_datasets.errors import ManualDownloadError
from stable_datasets.features import VideoDecodeConfig
from stable_datasets.load import load_dataset
from stable_datasets.registry import CATALOG_PACKAGES

#: upstream's asset names for splits that are spelled otherwise in split strings
_SPLIT_NAMES = {"val": Split.VALIDATION}
#: upstream's `backend_kwargs` that mean something for an upstream Lance reader; ours plans its own reads
_BACKEND_KWARGS = frozenset({"batch_readahead"})


class LoadsWhenCalled(type):
    """Calling a catalog class returns its data (upstream's call shape); `cls.create(...)` gives the builder."""

    def __call__(cls, split: str | None = None, *, config_name: str | None = None,  # type: ignore[override]
                 storage_format: str | None = None, processed_cache_dir: str | os.PathLike | None = None,
                 download_dir: str | os.PathLike | None = None, backend_kwargs: Mapping[str, Any] | None = None,
                 decode_video: VideoDecodeConfig | Mapping[str, Any] | None = None,
                 **kwargs: Any) -> StableDataset | DatasetDict:
        unknown = sorted(set(backend_kwargs or {}) - _BACKEND_KWARGS)
        if unknown:
            raise TypeError(f"{cls.__name__}: unknown backend_kwargs {unknown}; accepted: {sorted(_BACKEND_KWARGS)}")
        if "manual_dir" in kwargs:  # upstream's and TFDS's name for the folder of a manual download
            kwargs["data_dir"] = kwargs.pop("manual_dir")
        name = config_name if config_name is not None else kwargs.pop("name", None)
        if "cache_dir" in kwargs:  # load_dataset's name for upstream's processed_cache_dir
            if processed_cache_dir is not None:
                raise TypeError(f"{cls.__name__}: pass processed_cache_dir= or cache_dir=, not both")
            processed_cache_dir = kwargs.pop("cache_dir")
        loaded = load_dataset(cls, split, name=name, storage_format=storage_format or cls.STORAGE_FORMAT,
                              cache_dir=processed_cache_dir, download_dir=download_dir, **kwargs)
        if decode_video is None:
            return loaded
        config = decode_video if isinstance(decode_video, VideoDecodeConfig) else VideoDecodeConfig(**decode_video)
        if isinstance(loaded, DatasetDict):
            return DatasetDict({s: ds.with_video_decode(config) for s, ds in loaded.items()})
        return loaded.with_video_decode(config)


class CatalogBuilder(GeneratorBasedBuilder, metaclass=LoadsWhenCalled):
    """Base of the catalog's builders (and of a user's own, in upstream's spelling: `BaseDatasetBuilder`)."""

    #: provenance and downloads; override `_source()` instead when they depend on the config
    SOURCE: ClassVar[DatasetSource]
    #: the storage format a plain call builds ("arrow", "lance" or "parquet"); `storage_format=` overrides it
    STORAGE_FORMAT: ClassVar[str] = "arrow"
    #: set for data behind a login: what to download and how to lay it out; the files are read from `data_dir`
    MANUAL_DOWNLOAD: ClassVar[str | None] = None
    #: the extra (pip install 'stable-datasets[<extra>]') whose readers this dataset's files need, if any
    EXTRA: ClassVar[str | None] = None
    #: what the dataset is for, as the catalog page lists it ("image classification", ...)
    TASK: ClassVar[str] = ""
    #: the fingerprint's code is the dataset's own module: its package's `__init__` and sibling datasets are not its
    #: code (adding a dataset to the catalog rebuilds no other); the library it imports is versioned with VERSION
    FINGERPRINT_OWN_MODULE_ONLY: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        parts = cls.__module__.split(".")
        if len(parts) == 3 and parts[0] == "stable_datasets" and parts[1] in CATALOG_PACKAGES and "name" not in \
                vars(cls):
            cls.name = parts[2]  # the module is the name `load_dataset` finds it by
        override = vars(cls).get("_split_generators")
        if override is not None and len(inspect.signature(override).parameters) == 1:
            # upstream's `_split_generators(self)` fetched files itself; give it the download manager as an attribute
            def with_manager(self: CatalogBuilder, dl_manager: DownloadManager, _original: Any = override) -> Any:
                self.dl_manager = dl_manager
                return _original(self)

            cls._split_generators = with_manager  # type: ignore[method-assign]

    def _source(self) -> DatasetSource:
        """This config's source; the class's `SOURCE` unless a subclass computes it."""
        source = getattr(type(self), "SOURCE", None)
        if source is None:
            raise TypeError(f"{type(self).__name__} defines no SOURCE and does not override _source()")
        return source if isinstance(source, DatasetSource) else DatasetSource(**dict(source))

    @property
    def info(self) -> DatasetInfo:
        """`_info()`, with homepage, citation and license taken from the source where `_info()` leaves them out."""
        if self._info_cache is None:
            info, source = self._info(), self._source()
            info.homepage = info.homepage or source.homepage
            info.citation = info.citation or source.citation
            info.license = info.license or source.license
            self._info_cache = info
        return self._info_cache

    def manual_folder(self) -> str:
        """The folder of a manual download (`data_dir=`), or a ManualDownloadError saying what to fetch."""
        folder = self.config.data_dir
        if folder is None or not os.path.isdir(folder):
            where = "no data_dir was given" if folder is None else f"data_dir {folder!r} is not a folder"
            raise ManualDownloadError(f"{self.builder_name()}: {where}. {self.MANUAL_DOWNLOAD} Then pass "
                                      f"data_dir='/path/to/that/folder' (manual_dir= works too).")
        return folder

    def _split_generators(self, dl_manager: DownloadManager) -> list[SplitGenerator]:
        """One split per asset: each file is downloaded (a few at a time, checked) and read by
        `_generate_examples(data_path=..., split=...)`, `split` being the asset's own name."""
        if self.MANUAL_DOWNLOAD is not None:
            raise NotImplementedError(f"{type(self).__name__} reads a manual download: it must implement "
                                      "_split_generators(dl_manager) over self.manual_folder()")
        assets = self._source().remote_files()
        paths = dl_manager.download(assets)
        return [SplitGenerator(_SPLIT_NAMES.get(name, name), {"data_path": paths[name], "split": name})
                for name in assets]


def catalog_classes(module: Any) -> list[type[DatasetBuilder]]:
    """The catalog builders a module defines (not the ones it imports), each once (SSv2 is SomethingSomethingV2)."""
    return list(dict.fromkeys(obj for obj in vars(module).values() if isinstance(obj, type)
                              and issubclass(obj, CatalogBuilder) and obj.__module__ == module.__name__))


__all__ = ["CATALOG_PACKAGES", "CatalogBuilder", "DatasetSource", "DownloadInfo", "LoadsWhenCalled",
           "catalog_classes"]
