"""`data_files` of builders that read the user's files: a path, a glob, a list, or split -> those."""

from __future__ import annotations

import fnmatch
import glob
import os
from pathlib import Path
from typing import Any

from stable_datasets.download.inputs import expand_object_pattern, options_for


def _has_magic(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def glob_pattern(text: str, input_options: dict[str, dict[str, Any]] | None = None) -> list[str] | None:
    """The sorted matches of `text` when it is a glob pattern (has *, ? or [), else None. A path
    that exists is not a pattern: `scores [v1].csv` names that file, as the user typed it.
    `input_options`: storage options of object-store URLs by scheme (download.inputs.options_for)."""
    if not _has_magic(text) or ("://" not in text and os.path.lexists(text)):
        return None
    if "://" in text and not text.startswith(("file://", "http://", "https://")):
        # s3://bucket/train-*.csv: the objects listed under its fixed prefix
        return expand_object_pattern(text, options_for(text, input_options))
    folder, name = os.path.split(text)
    if _has_magic(folder) or "**" in name:
        # files only, and '**' crosses folders (zero or more), as Hugging Face resolves data_files
        return sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
    # One folder, a pattern for the names: what glob.glob returns, with one scandir and one regex
    # instead of a path join and a match call per entry (a third of a 10,000-file warm load).
    try:
        with os.scandir(folder or ".") as entries:
            names = [e.name for e in entries if e.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    if not name.startswith("."):
        names = [n for n in names if not n.startswith(".")]
    prefix = os.path.join(folder, "") if folder else ""
    return sorted(prefix + n for n in fnmatch.filter(names, name))


def normalize_data_files(data_files: Any, builder: str, default_split: str = "train",
                         input_options: dict[str, dict[str, Any]] | None = None) -> dict[str, list[str]]:
    """{split: [paths]} with globs expanded; a missing or empty pattern is an error naming it."""
    if not data_files:
        raise ValueError(f"the '{builder}' builder needs data_files= (a path, a glob, a list, or a dict of "
                         "split -> paths)")
    if not isinstance(data_files, dict):
        data_files = {default_split: data_files}
    out: dict[str, list[str]] = {}
    for split, spec in data_files.items():
        specs = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
        paths: list[str] = []
        for item in specs:
            text = str(item)
            matched = glob_pattern(text, input_options)
            if matched is None:
                if "://" not in text and not os.path.exists(text):
                    raise FileNotFoundError(f"data file {text} does not exist (split '{split}')")
                if "://" not in text and os.path.isdir(text):
                    raise ValueError(f"data file {text} (split '{split}') is a folder: pass data_dir= or a "
                                     f"glob such as {os.path.join(text, '**')!r}")
                paths.append(str(Path(text)) if "://" not in text else text)
            elif not matched:
                raise FileNotFoundError(f"data_files pattern {text!r} of split '{split}' matches no file")
            else:
                paths.extend(matched)
        out[str(split)] = paths
    return out
