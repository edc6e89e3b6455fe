"""A gs:// root whose credentials lookup hangs fails within the one bounded wait the docs promise (before: gcsfs
asked the metadata server for ~12 s, then the bucket check waited its 20 s: 35 s in all). In a subprocess: the
lookup keeps gcsfs's event loop busy after the error, which later tests in this process must not inherit."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gcsfs") is None, reason="needs gcsfs")

SCRIPT = """
import os, socket, sys, threading
hole = socket.socket()
hole.bind(("127.0.0.1", 0))
hole.listen(64)
held = []
threading.Thread(target=lambda: [held.append(hole.accept()) for _ in range(64)], daemon=True).start()
os.environ["GCE_METADATA_HOST"] = os.environ["GCE_METADATA_IP"] = "127.0.0.1:%d" % hole.getsockname()[1]
import stable_datasets as sds
from stable_datasets.storage import fsspec_store
fsspec_store.CHECK_TIMEOUT = 2.0
closed = socket.socket()
closed.bind(("127.0.0.1", 0))
endpoint = "http://127.0.0.1:%d" % closed.getsockname()[1]
closed.close()
try:
    sds.load_dataset("csv", data_files=sys.argv[1], split="train", cache_dir="gs://bucket-x/c",
                     storage_options={"endpoint_url": endpoint})
except Exception as exc:
    print(type(exc).__name__, exc, flush=True)
os._exit(0)
"""


def test_a_hanging_credentials_lookup_counts_against_the_bounded_wait(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a\n1\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "NO_GCE_CHECK")}
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(table)], capture_output=True, text=True, timeout=120,
                         env={**env, "HOME": str(tmp_path), "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "c")})
    assert run.stdout.startswith(
        "StorageError gs://bucket-x/c: cannot set up the filesystem within 2 s (looking for credentials or the "
        "endpoint); pass them in storage_options (e.g. token= for gcsfs, or set GOOGLE_APPLICATION_CREDENTIALS), or "
        "check the network"), (run.stdout, run.stderr[-2000:])
