"""The lease on a real S3 endpoint (moto): a holder that stalled past its lease never takes it back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from stable_datasets.storage.lease import Lease
from stable_datasets.storage.resolve import open_store
from stable_datasets.urls import ObjectURL

pytestmark = pytest.mark.timeout(120)

HOLD = """
import sys, time
from stable_datasets.storage.lease import Lease
from stable_datasets.storage.resolve import open_store
from stable_datasets.urls import ObjectURL
lease = Lease(open_store(ObjectURL.parse(sys.argv[1])), sys.argv[2], timeout=30)
lease.acquire()
print(lease.token, flush=True)
time.sleep(60)
"""


def _token(env, key: str) -> str | None:
    try:
        return json.loads(env.read(key))["token"]
    except Exception:
        return None


def test_a_holder_that_wakes_after_a_takeover_stops_renewing_and_the_lease_stays_with_the_new_holder(
        s3_env, monkeypatch):
    """A (a real process) holds the lease, is SIGSTOPped past its expiry; B takes it over; A is resumed and its
    renewals fire: the lease keeps naming B (and B's attempt), and A says it lost the lease."""
    monkeypatch.setenv("STABLE_DATASETS_LEASE_SECONDS", "1")
    prefix, key = "cache/toy/split", "cache/toy/split/_lease.json"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, f"s3://{s3_env.bucket}", prefix],
                              env={**os.environ, "STABLE_DATASETS_LEASE_SECONDS": "1"}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        first = holder.stdout.readline().strip()
        assert first and _token(s3_env, key) == first, holder.stderr.read() if holder.poll() is not None else ""
        holder.send_signal(signal.SIGSTOP)
        time.sleep(1.3)  # past its expiry, nobody renews it
        taker = Lease(open_store(ObjectURL.parse(f"s3://{s3_env.bucket}")), prefix, timeout=10)
        taker.acquire()
        assert _token(s3_env, key) == taker.token
        holder.send_signal(signal.SIGCONT)
        for _ in range(15):  # 1.5 s: A's renewal fires every third of a second once it resumes
            assert _token(s3_env, key) == taker.token, "the stalled holder rewrote the lease"
            time.sleep(0.1)
        assert json.loads(s3_env.read(key))["attempt"] == taker.attempt
        assert not taker.lost
        taker.release()
        assert key not in s3_env.objects(prefix)
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
    err = holder.communicate()[1]
    assert "lost the lease s3://" in err and "while stalled" in err, err


def test_two_builders_taking_over_one_stale_lease_one_wins(s3_env, monkeypatch):
    """Both read the same stale version; the takeover replaces that version only, so the second put fails."""
    monkeypatch.setenv("STABLE_DATASETS_LEASE_SECONDS", "1")
    store = open_store(ObjectURL.parse(f"s3://{s3_env.bucket}"))
    key = "cache/p/_lease.json"
    s3_env.write(key, json.dumps({"host": "elsewhere", "pid": 1, "attempt": "0", "token": "old",
                                  "expires": time.time() - 5}).encode())
    _, tag = store.get_tagged(key)
    assert store.put_if_match(key, b'{"token": "first"}', tag)
    assert not store.put_if_match(key, b'{"token": "second"}', tag)  # the version it read is gone
    assert json.loads(s3_env.read(key)) == {"token": "first"}
    assert not store.put_if_match("cache/p/absent.json", b"{}", tag)
