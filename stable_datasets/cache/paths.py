"""Where caches live: `<root>/<name>/<config>/<version>/<fingerprint>/<split>`."""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_CACHE_ROOT = Path("~/.cache/stable_datasets")


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache root: an explicit argument, else $STABLE_DATASETS_CACHE_DIR, else the default."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("STABLE_DATASETS_CACHE_DIR")
    return Path(env).expanduser() if env else DEFAULT_CACHE_ROOT.expanduser()


_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def safe_name(name: str) -> str:
    """A path component that cannot escape its folder."""
    cleaned = _UNSAFE.sub("_", name).strip(".")
    return cleaned or "_"


def fingerprint_dir(root: Path, name: str, config: str, version: str, fingerprint: str) -> Path:
    return root / safe_name(name) / safe_name(config) / safe_name(version) / fingerprint


def downloads_dir(root: Path) -> Path:
    return root / "downloads"
