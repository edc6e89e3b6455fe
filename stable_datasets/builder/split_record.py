"""The split record: the split names a build found, kept in its fingerprint folder (`.splits.json`), so a later
`load_dataset(split=None)` or `split_names()` lists them without running the builder's `_split_generators`
(which may download). On an object-store root the record is shared on the store too (roots: `write_note`), so
another node learns the splits without the builder's inputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stable_datasets.cache.paths import SPLITS_FILE
from stable_datasets.roots import CacheRoot


def recorded_split_names(root: CacheRoot, directory: Path) -> list[str] | None:
    """The split names an earlier build recorded in the fingerprint folder `directory`, if any."""
    text = root.read_note(directory / SPLITS_FILE)
    return None if text is None else json.loads(text)


def record_split_names(root: CacheRoot, directory: Path, names: list[str]) -> None:
    """Record `names` in `directory` (made when missing), atomically: a reader sees the old record or the new."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SPLITS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(names))
    os.replace(tmp, directory / SPLITS_FILE)
    root.write_note(directory / SPLITS_FILE, json.dumps(names))
