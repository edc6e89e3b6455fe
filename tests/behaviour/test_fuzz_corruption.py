"""Random byte corruptions of every layout and of interleaved tars, each read in a forked child:
zero crashes (a child killed by a signal) and zero hangs. A small version of
tests/stress/fuzz_corruption.py, which runs thousands of cases for benchmarks/RESULTS.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).parents[1] / "stress" / "fuzz_corruption.py"
KINDS = ["arrow", "parquet", "lance", "video frames", "tar", "tar (PAX)", "tar.gz"]


def test_corrupt_files_raise_and_never_crash_or_hang():
    out = subprocess.run([sys.executable, str(RUNNER), "--cases", "25", "--seed", "7", "--timeout", "60", "--json"],
                         capture_output=True, text=True, timeout=900)
    assert out.stdout, out.stderr
    results = json.loads(out.stdout.strip().splitlines()[-1])["results"]
    assert sorted(results) == sorted(KINDS)
    for kind, result in results.items():
        assert result["tried"] == 25, kind
        assert (kind, result["crash"], result["hang"]) == (kind, 0, 0), result["examples"]
        assert sum(result[o] for o in ("ok", "our error", "other exception")) == 25
    # every kind had corruptions that were detected, not only damage in bytes nobody reads
    assert all(r["our error"] + r["other exception"] > 0 for r in results.values()), results
    assert out.returncode == 0, out.stderr
