"""`save_to_disk` / `load_from_disk`, as Hugging Face users know them: a view (`select`, `shuffle`,
`filter`, a split of `train_test_split`) written out as a standalone folder of its own rows.

A saved dataset is a folder holding `dataset.json` and the rows as a published cache in `data`
(the write path's build folder and its relative link, both inside the folder, so the folder may
be moved or copied whole). A saved `DatasetDict` holds `dataset_dict.json` and one saved dataset
per split. Saving again over a saved folder replaces it atomically; any other non-empty folder is
refused. Nothing here reads the source again once the rows are written. The output format
(`set_format` / `with_format`: type, columns, `output_all_columns`, torch's `dtype=`, video decoding) is
saved with the rows and restored by `load_from_disk`, as Hugging Face does; a `with_transform` function
is not (it is code, not data: set it again after loading).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stable_datasets.cache.paths import split_folder_name
from stable_datasets.dataset.columns import ColumnsSource
from stable_datasets.dataset.combine import with_split_name
from stable_datasets.dataset.formatting import format_from_json, format_to_json
from stable_datasets.dataset.in_memory import COLUMNAR_BATCH_ROWS
from stable_datasets.errors import CacheError
from stable_datasets.identity.fingerprint import CACHE_FORMAT_VERSION
from stable_datasets.layouts import arrow_shards
from stable_datasets.write import WritePlan, write_split

if TYPE_CHECKING:
    from stable_datasets.dataset.dataset_dict import DatasetDict  # local: dataset_dict imports this module
    from stable_datasets.dataset.stable_dataset import StableDataset

DATASET_FILE = "dataset.json"
DATASET_DICT_FILE = "dataset_dict.json"
DATA_FOLDER = "data"
FORMAT = "stable-datasets saved dataset"


def _claim_folder(path: Path, marker: str) -> None:
    """`path` may be written: missing, empty, or an earlier save of the same kind."""
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"save_to_disk: {path} exists and is not a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / marker).is_file():
        raise FileExistsError(f"save_to_disk: {path} is a folder that holds other files (no {marker}); "
                              "save into a new or empty folder")
    path.mkdir(parents=True, exist_ok=True)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=2))
    os.replace(partial, path)


def save_dataset(ds: StableDataset, path: str | os.PathLike) -> Path:
    """Write the rows `ds` serves, in its order, into the folder `path`; returns the folder."""

    folder = Path(path).expanduser().absolute()
    _claim_folder(folder, DATASET_FILE)
    base = ds.cache_metadata[0] if ds.cache_metadata else None
    inputs = {"saved_from": ds.fingerprint, "rows": len(ds), "cache_format_version": CACHE_FORMAT_VERSION}
    plan = WritePlan(target=folder / DATA_FOLDER, layout=arrow_shards.NAME,
                     options={**arrow_shards.DEFAULT_OPTIONS, "batch_rows": COLUMNAR_BATCH_ROWS},
                     fingerprint=ds.fingerprint, fingerprint_inputs=inputs,
                     builder_name=base.builder_name if base else "saved", config_name=base.config_name if base else "",
                     version=base.version if base else "", split=ds.split or "train", info=ds.info.to_dict(),
                     features=ds.features, evict=False,
                     made_by={"kind": "saved", "source": [str(d) for d in ds.cache_dirs],
                              "source_fingerprint": ds.fingerprint, "rows": len(ds)})
    write_split(plan, ColumnsSource(ds, lambda table: {}, ds.features, "save_to_disk"))
    _write_json(folder / DATASET_FILE, {"format": FORMAT, "split": ds.split, "num_rows": len(ds),
                                        "output_format": format_to_json(ds._format)})
    return folder


def save_dataset_dict(datasets: DatasetDict, path: str | os.PathLike) -> Path:
    """Each split into its own saved folder under `path`, listed in `dataset_dict.json`."""
    folder = Path(path).expanduser().absolute()
    _claim_folder(folder, DATASET_DICT_FILE)
    for name, ds in datasets.items():
        save_dataset(ds, folder / split_folder_name(name))
    _write_json(folder / DATASET_DICT_FILE, {"format": FORMAT, "splits": list(datasets),
                                             "folders": {n: split_folder_name(n) for n in datasets}})
    return folder


def load_from_disk(path: str | os.PathLike) -> StableDataset | DatasetDict:
    """A folder `save_to_disk` wrote: a `StableDataset`, or a `DatasetDict` for a saved dict."""
    from stable_datasets.dataset.dataset_dict import DatasetDict  # local: dataset_dict imports this module
    from stable_datasets.dataset.open import open_cache  # local: a cycle through StableDataset

    folder = Path(path).expanduser().absolute()
    if (folder / DATASET_DICT_FILE).is_file():
        listing = _read_json(folder / DATASET_DICT_FILE)
        return DatasetDict({name: _open_saved(folder / listing["folders"][name], open_cache)
                            for name in listing["splits"]})
    if (folder / DATASET_FILE).is_file():
        return _open_saved(folder, open_cache)
    raise CacheError(f"load_from_disk: {folder} is not a folder that save_to_disk wrote (no {DATASET_FILE} or "
                     f"{DATASET_DICT_FILE}); a cache folder opens with sds.open_cache, a Hugging Face save with "
                     "sds.load_dataset")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CacheError(f"load_from_disk: {path} cannot be read ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CacheError(f"load_from_disk: {path} was not written by save_to_disk")
    return data


def _open_saved(folder: Path, open_cache: Any) -> StableDataset:
    listing = _read_json(folder / DATASET_FILE)
    ds = with_split_name(open_cache(folder / DATA_FOLDER), listing.get("split"))
    if "output_format" not in listing:  # saved before formats were saved
        return ds
    fmt = format_from_json(listing["output_format"])
    if fmt.video_decode is not None:
        ds = ds.with_video_decode(fmt.video_decode)
    return ds.with_format(fmt.type, fmt.columns, fmt.decode, fmt.output_all_columns,
                          **({"dtype": fmt.torch_dtype} if fmt.torch_dtype is not None else {}))
