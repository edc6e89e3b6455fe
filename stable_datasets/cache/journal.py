"""The shard journal that lets a killed build resume instead of starting over.

Each line records one finished shard (closed, hashed, fsynced) and how many examples the
build had written when it finished. A build that finds a staging directory with a journal
keeps the shards whose size and checksum still match, deletes everything else (the shard
that was being written when the process died), and continues after the last kept row.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from stable_datasets.cache.metadata import ShardInfo

JOURNAL_FILE = "_journal.jsonl"


class ShardJournal:
    def __init__(self, directory: Path):
        self.directory = directory
        self.path = directory / JOURNAL_FILE
        #: per kept shard, what its writer recorded beside it (e.g. a Lance fragment), after `recover`
        self.notes: list[dict] = []

    def append(self, shard: ShardInfo, rows_done: int, note: dict | None = None) -> None:
        line = json.dumps({"path": shard.path, "num_rows": shard.num_rows, "num_bytes": shard.num_bytes,
                           "sha256": shard.sha256, "rows_done": rows_done, "note": note})
        # not fsynced: `recover` re-hashes every shard a line names, so a line lost or torn by a power
        # cut only means that shard is written again (an fsync here cost one journal commit per shard)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def recover(self) -> tuple[list[ShardInfo], int]:
        """Shards that survived intact and the rows they hold; every other file is removed."""
        kept: list[ShardInfo] = []
        self.notes = []
        rows_done = 0
        lines = self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:  # torn last line
                break
            shard = ShardInfo.from_dict(entry)
            if shard.problem(self.directory) is not None:
                break
            kept.append(shard)
            self.notes.append(entry.get("note") or {})
            rows_done = int(entry["rows_done"])
        keep = {s.path for s in kept}
        for root, dirs, files in os.walk(self.directory, topdown=False):
            for name in files:
                path = Path(root) / name
                if path.relative_to(self.directory).as_posix() not in keep and path != self.path:
                    path.unlink()
            for name in dirs:
                with contextlib.suppress(OSError):  # only empty folders go
                    (Path(root) / name).rmdir()
        self.path.write_text("".join(line + "\n" for line in lines[:len(kept)]), encoding="utf-8")
        return kept, rows_done
