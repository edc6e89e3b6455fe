"""Column statistics for the viewer, computed once per cache and kept beside the caches.

The pass itself is `StableDataset.describe` (bounded: a sample of at most `sample_size`
rows). The result is kept as JSON in `<root>/.viewer/stats/`, a folder no cache lives in (a
leading dot is never a builder's folder name), named by the cache's fingerprint and split:
a published cache never changes, so its statistics never go stale, and nothing is ever
written inside a cache. A root the viewer cannot write to keeps them in memory instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.dataset.summary import DEFAULT_SAMPLE_SIZE

STATS_FOLDER = Path(".viewer") / "stats"


class StatsStore:
    def __init__(self, root: Path, sample_size: int = DEFAULT_SAMPLE_SIZE):
        self.folder = Path(root) / STATS_FOLDER
        self.sample_size = sample_size
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def path_for(self, fingerprint: str, split: str, directory: Path) -> Path:
        key = hashlib.sha256(json.dumps([fingerprint, split, str(directory)]).encode()).hexdigest()[:24]
        return self.folder / f"{key}-{self.sample_size}.json"

    def stats(self, dataset: StableDataset, fingerprint: str, split: str, directory: Path) -> dict[str, Any]:
        """The cache's statistics: read back when kept, else computed (one thread at a time) and kept."""
        path = self.path_for(fingerprint, split, directory)
        with self._lock:
            if str(path) in self._memory:
                return self._memory[str(path)]
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                pass
            result = dataset.describe(self.sample_size).to_dict()
            self._memory[str(path)] = result
            self._keep(path, result)
            return result

    def _keep(self, path: Path, result: dict[str, Any]) -> None:
        """Write atomically (a reader never sees half a file); a read-only root keeps them in memory."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w") as fh:
                json.dump(result, fh)
            os.replace(tmp, path)
        except OSError:
            pass
