"""Generic loaders: `load_dataset("csv" | "json" | "parquet" | "arrow" | "text" | "imagefolder" |
"videofolder" | "webdataset", data_files=...)`, and a folder of data files whose loader is
inferred (`load_dataset("path/to/folder")`). Each is a builder (see loaders/base.py)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from stable_datasets.loaders.columns import LoaderError

#: loader name -> "module:class", imported on first use
PACKAGED_LOADERS = {
    "csv": "csv_files:CsvLoader",
    "json": "json_files:JsonLoader",
    "parquet": "parquet_files:ParquetLoader",
    "arrow": "arrow_files:ArrowLoader",
    "text": "text_files:TextLoader",
    "imagefolder": "media_folders:ImageFolderLoader",
    "videofolder": "media_folders:VideoFolderLoader",
    "webdataset": "webdataset_files:WebDatasetLoader",
    "megatron_indexed": "megatron_files:MegatronIndexedLoader",
}


def loader_class(name: str) -> type:
    """The builder class of a packaged loader."""
    module, cls = PACKAGED_LOADERS[name].split(":")
    return getattr(importlib.import_module(f"stable_datasets.loaders.{module}"), cls)


def folder_loader(path: str | os.PathLike) -> tuple[type, dict[str, Any]]:
    """(loader class, config options) for a folder of data files: the loader of its most common
    file kind, reading the folder as its data_dir; a folder written by Hugging Face's
    `save_to_disk` is read as the Arrow files its state.json files list, split as it was saved."""
    from stable_datasets.loaders.folders import (  # local: it imports the media readers and pyarrow.parquet (~0.3 s)
        infer_folder_format,
        saved_by_hugging_face,
    )

    saved = saved_by_hugging_face(Path(path))
    if saved is not None:
        return loader_class("arrow"), {"data_files": saved}
    name, options = infer_folder_format(path)
    return loader_class(name), {"data_dir": str(Path(path)), **options}


__all__ = ["PACKAGED_LOADERS", "LoaderError", "folder_loader", "loader_class"]
