"""sha256 of input files, remembered per (path, size, mtime, ctime, inode) so a file is read once.

The memo is one SQLite file under the cache root (`content_hashes.sqlite`). SQLite's own
locking makes it safe for concurrent processes; a write that loses a race or a database
that cannot be opened (read-only root, a filesystem without locks) only costs a re-hash,
never a wrong answer: a row is used only when path, size, mtime, ctime and inode all match
(ctime too, because it moves on every write and cannot be set back the way mtime can).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from loguru import logger

from stable_datasets.cache.publish import file_sha256

MEMO_FILE = "content_hashes.sqlite"


class ContentHashes:
    """`sha256(path, stat)` with a persistent memo; open one per fingerprint computation."""

    def __init__(self, root: Path | None):
        self._db: sqlite3.Connection | None = None
        if root is None:
            return
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(root / MEMO_FILE, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS hashes (path TEXT PRIMARY KEY, size INTEGER, "
                             "mtime_ns INTEGER, ctime_ns INTEGER, inode INTEGER, sha256 TEXT)")
        except (OSError, sqlite3.Error) as exc:
            logger.debug("content hash memo unavailable under {} ({}); hashing without it", root, exc)
            self._db = None

    def sha256(self, path: str, stat: os.stat_result) -> str:
        return self.sha256_many([(path, stat)])[0]

    def sha256_many(self, files: list[tuple[str, os.stat_result]]) -> list[str]:
        """The hex sha256 of each (path, stat): from the memo when it matches, else read (and remembered)."""
        known = self._lookup([path for path, _ in files])
        digests: list[str] = []
        fresh: list[tuple[str, int, int, int, int, str]] = []
        for path, stat in files:
            key = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
            row = known.get(path)
            if row is not None and row[:4] == key:
                digests.append(row[4])
                continue
            digest = file_sha256(Path(path))
            digests.append(digest)
            if os.stat(path).st_ctime_ns == stat.st_ctime_ns:  # not written while we read it
                fresh.append((path, *key, digest))
        if fresh and self._db is not None:
            try:
                with self._db:  # one transaction for all of them
                    self._db.execute("BEGIN")
                    self._db.executemany("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?, ?, ?)", fresh)
            except sqlite3.Error as exc:
                logger.debug("content hash memo write failed ({}); continuing", exc)
        return digests

    def _lookup(self, paths: list[str]) -> dict[str, tuple]:
        if self._db is None:
            return {}
        found: dict[str, tuple] = {}
        try:
            for lo in range(0, len(paths), 500):
                chunk = paths[lo:lo + 500]
                marks = ",".join("?" * len(chunk))
                for path, *row in self._db.execute(f"SELECT path, size, mtime_ns, ctime_ns, inode, sha256 FROM hashes "
                                                   f"WHERE path IN ({marks})", chunk):
                    found[path] = tuple(row)
        except sqlite3.Error as exc:
            logger.debug("content hash memo read failed ({}); hashing again", exc)
        return found

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> ContentHashes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
