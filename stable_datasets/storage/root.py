"""A cache root on an object store, and the local folders that serve it.

A remote root keeps only published caches. What a build or a reader needs on this node lives
under `$STABLE_DATASETS_LOCAL_CACHE_DIR` (default `~/.cache/stable_datasets/object-store`):
`build/<scheme>/<bucket>/<prefix>/` (staging, downloads, the input-hash memo of builds) and
`shards/<scheme>/<bucket>/<key>` (the local shard cache, see storage.shard_cache).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stable_datasets.env import env_text
from stable_datasets.errors import ConfigurationError
from stable_datasets.storage.resolve import open_store, storage_options_from_env
from stable_datasets.storage.store import ObjectStore
from stable_datasets.urls import ObjectURL

DEFAULT_LOCAL_BASE = Path("~/.cache/stable_datasets/object-store")
#: fsspec protocols that read only, or read inside one file: inputs may use them, cache roots cannot
READ_ONLY_SCHEMES = frozenset({"http", "https", "zip", "tar", "libarchive", "github", "git", "data", "reference",
                               "jlab", "jupyter", "simplecache", "filecache",
                               "blockcache", "cached"})


def local_base() -> Path:
    """Absolute, as cache roots are: an open dataset's local copies keep serving after an os.chdir."""
    env = env_text("STABLE_DATASETS_LOCAL_CACHE_DIR")
    return (Path(env).expanduser() if env else DEFAULT_LOCAL_BASE.expanduser()).absolute()


@dataclass
class RemoteRoot:
    """`scheme://bucket/prefix` with its store resolved (and checked once: fail fast)."""

    url: ObjectURL
    store: ObjectStore
    storage_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, url: str | ObjectURL, storage_options: dict[str, Any] | None = None, *,
             check: bool = True) -> RemoteRoot:
        parsed = url if isinstance(url, ObjectURL) else ObjectURL.parse(url)
        if parsed.scheme in READ_ONLY_SCHEMES:
            raise ConfigurationError(f"{parsed.scheme}://{parsed.bucket}: {parsed.scheme}:// cannot hold a cache root "
                                     "(it is read-only, or an archive); use s3://, gs://, az:// (or another writable "
                                     "fsspec protocol) or a local folder")
        if storage_options is None:  # resolved here, so they travel with the root to Ray workers
            storage_options = storage_options_from_env()
        store = open_store(parsed, storage_options)
        if check:
            store.check()
        return cls(parsed, store, dict(storage_options or {}))

    def key(self, *relative: str) -> str:
        return self.url.child(*relative).key

    @property
    def local_dir(self) -> Path:
        """Where builds for this root stage their work on this node."""
        return local_base() / "build" / self.url.scheme / self.url.bucket / self.url.key

    def __str__(self) -> str:
        return str(self.url)

    def __getstate__(self) -> dict[str, Any]:  # builders travel to Ray tasks: the client is set up again there
        return {"url": str(self.url), "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        url = ObjectURL.parse(state["url"])
        self.url, self.storage_options = url, state["storage_options"]
        self.store = open_store(url, self.storage_options)
