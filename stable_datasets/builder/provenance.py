"""What made a builder's cache, recorded in its `_metadata.json` ("made_by"), so that `ls` can say
where every cache came from and `prune` can tell which caches a newer one supersedes.

`spec` is what two builds must share to be versions of one dataset: the builder (by source,
not by name), its config with every `data_files`/`data_dir` path made absolute, the storage
format and layout options. The content identity (file sizes, mtimes, the script's source) is
what changes between versions, so it stays out of the spec.
"""

from __future__ import annotations

import os
from typing import Any

#: resolved input files kept per split in `_metadata.json`; beyond it only the count is recorded
MAX_RECORDED_FILES = 1000


def absolute_paths(value: Any) -> Any:
    """`data_files` or `data_dir` as given, with local paths made absolute (URLs as they are)."""
    if isinstance(value, str):
        return value if "://" in value else os.path.abspath(os.path.expanduser(value))
    if isinstance(value, os.PathLike):
        return os.path.abspath(os.fspath(value))
    if isinstance(value, dict):
        return {str(k): absolute_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [absolute_paths(v) for v in value]
    return value


def recorded_files(resolved: dict[str, list[str]] | None) -> dict[str, Any] | None:
    """split -> the resolved files (the first MAX_RECORDED_FILES) and how many there are."""
    if resolved is None:
        return None
    return {split: {"count": len(paths), "files": absolute_paths([os.fspath(p) for p in paths[:MAX_RECORDED_FILES]])}
            for split, paths in resolved.items()}


def builder_made_by(kind: str, name: str, source: str, inputs: dict[str, Any],
                    resolved: dict[str, list[str]] | None, given: dict[str, Any]) -> dict[str, Any]:
    """The `made_by` record of a builder's (or generic loader's) cache.

    `inputs` are the fingerprint inputs, `resolved` the data files after globbing (None when the
    builder reads none), `given` the config's `data_files`/`data_dir` exactly as the user passed them.
    """
    config = dict(inputs.get("config") or {})
    for key in ("data_files", "data_dir"):
        if config.get(key):
            config[key] = absolute_paths(config[key])
    spec = {"builder": name, "source": source, "config_name": inputs.get("config_name", ""), "config": config,
            "storage_format": inputs.get("storage_format"), "layout_options": inputs.get("layout_options")}
    record: dict[str, Any] = {"kind": kind, "builder": name, "source": source, "spec": spec}
    record.update({k: v for k, v in given.items() if v})
    if resolved is not None:
        record["data_files_resolved"] = recorded_files(resolved)
    return record
