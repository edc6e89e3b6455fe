"""Whether a process named by a pid still runs, and since when: what tells a live owner (of a staging
folder, a lease, a pin) from one that died, on this host."""

from __future__ import annotations

import os
from pathlib import Path


def process_start_time(pid: int) -> float | None:
    """When a process started (seconds since the epoch), where /proc tells; None elsewhere."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def process_alive(pid: int) -> bool:
    """True while `pid` runs (also as another user's process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True
