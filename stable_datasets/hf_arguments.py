"""Hugging Face `load_dataset` arguments that only make sense for the Hub, said once in one line.

Code moving from `datasets.load_dataset` passes `keep_in_memory=`, `token=`, `revision=`,
`trust_remote_code=`... Passed on, they would reach a builder config and fail as "CsvConfig has
no field(s) ['token']", which says nothing about why. Here each is taken out first: its default
(what such code passes when it means nothing) is accepted, `trust_remote_code` is accepted with
no effect (builder scripts are local files and always run, as they are), and any other value is
refused with what to do instead. A name that is no builder and looks like a Hub dataset gets a
hint to `StableDataset.from_hf`.
"""

from __future__ import annotations

import os
import re
from typing import Any

from loguru import logger

# argument -> (values accepted as meaning nothing here, why another value is refused)
HUB_ONLY: dict[str, tuple[tuple[Any, ...], str]] = {
    "keep_in_memory": ((None, False), "caches here are memory-mapped (the page cache keeps hot rows in memory); "
                                      "for an in-memory copy use ds.to_arrow() or ds.to_pandas()"),
    "token": ((None, False), "it authenticates to the Hugging Face Hub, which this library does not read; give "
                             "credentials for object stores or HTTP in storage_options="),
    "use_auth_token": ((None, False), "it authenticates to the Hugging Face Hub, which this library does not read; "
                                      "give credentials for object stores or HTTP in storage_options="),
    "revision": ((None,), "it pins a Hugging Face Hub repository; builders here are local scripts or data files, "
                          "fingerprinted by their content"),
    "download_config": ((None,), "Hugging Face's download settings are not used here; a builder's downloads go "
                                 "through its DownloadManager"),
    "save_infos": ((False,), "a cache here records its info in its _metadata.json (ds.info)"),
}
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def take_hub_arguments(config_kwargs: dict[str, Any]) -> dict[str, Any]:
    """`config_kwargs` without Hugging Face's Hub-only arguments; a ValueError for one that would matter."""
    rest = dict(config_kwargs)
    if rest.pop("trust_remote_code", None):
        logger.info("load_dataset: trust_remote_code has no effect here: builder scripts are local Python files "
                    "and run as they are")
    for name, (accepted, why) in HUB_ONLY.items():
        if name in rest:
            value = rest.pop(name)
            if not any(value is a or (type(value) is type(a) and value == a) for a in accepted):
                raise ValueError(f"load_dataset: {name}={value!r} is a Hugging Face argument not supported here: {why}")
    return rest


def hub_hint(path: Any) -> str:
    """A hint for a builder name that may be a Hugging Face Hub dataset ("imdb", "owner/name"), else ""."""
    if not isinstance(path, str) or os.path.exists(path) or not _HUB_NAME.fullmatch(path):
        return ""
    return (f"; if {path!r} is a Hugging Face Hub dataset, load it with Hugging Face's datasets and convert it: "
            f"sds.StableDataset.from_hf(datasets.load_dataset({path!r}, split='train'))")
