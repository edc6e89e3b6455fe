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
        key = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
        if self._db is not None:
            try:
                row = self._db.execute("SELECT size, mtime_ns, ctime_ns, inode, sha256 FROM hashes "
                                       "WHERE path = ?", (path,)).fetchone()
                if row is not None and tuple(row[:4]) == key:
                    return row[4]
            except sqlite3.Error as exc:
                logger.debug("content hash memo read failed ({}); hashing {}", exc, path)
        digest = file_sha256(Path(path))
        if os.stat(path).st_ctime_ns != stat.st_ctime_ns:  # written while we read it: do not remember
            return digest
        if self._db is not None:
            try:
                self._db.execute("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?, ?, ?)", (path, *key, digest))
            except sqlite3.Error as exc:
                logger.debug("content hash memo write failed ({}); continuing", exc)
        return digest

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> ContentHashes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
