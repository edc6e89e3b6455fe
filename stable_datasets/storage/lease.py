"""A lease object: the object-store stand-in for the build lock (cache.lock).

`<split>/_lease.json` is created with a conditional put, so one builder holds it; it names
its holder (host, pid), the attempt it builds and when it expires. The holder renews it every
third of `STABLE_DATASETS_LEASE_SECONDS` (default 300) while it builds, and deletes it when
done. Another builder waits while the lease is live, and takes it over once it has expired
or its holder, on this same host, is gone. The lease only keeps builders from doing the same
work twice: correctness rests on the conditional put of `_metadata.json` (storage.publish),
so a builder that stalls past its lease can lose the race to publish, never corrupt a cache.

Every write of the lease after its creation is conditional on the version read (`put_if_match`):
a takeover replaces exactly the stale lease it saw, and a renewal only a lease that still
carries the holder's token. A holder that stalled past its lease (SIGSTOP, a long GC pause)
and wakes to find another builder's token stops renewing (`lost`): the lease keeps naming the
attempt being built, which is what `prune` spares.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from loguru import logger

from stable_datasets.cache.lock import default_timeout
from stable_datasets.cache.processes import process_alive
from stable_datasets.env import env_number
from stable_datasets.errors import LockTimeoutError
from stable_datasets.storage.store import ObjectStore

LEASE_FILE = "_lease.json"
DEFAULT_SECONDS = 300.0


def lease_seconds() -> float:
    return env_number("STABLE_DATASETS_LEASE_SECONDS", DEFAULT_SECONDS, float, lambda s: 1 <= s < float("inf"),
                      "must be a number of seconds >= 1")


def new_attempt_id() -> str:
    """Sorts by time (microseconds), then 32 random bits."""
    return f"{time.time_ns() // 1000:013x}{os.urandom(4).hex()}"


def lease_is_stale(record: dict[str, Any] | None, now: float | None = None) -> bool:
    """Expired, unreadable, or held by a process of this host that no longer runs."""
    if not isinstance(record, dict):
        return True
    now = time.time() if now is None else now
    try:
        if float(record["expires"]) < now:
            return True
        host, pid = record["host"], int(record["pid"])
    except (KeyError, TypeError, ValueError):
        return True
    return host == socket.gethostname() and not process_alive(pid)


def _parse(data: bytes) -> dict[str, Any]:
    """A lease record; {} (stale) when it is not one."""
    try:
        record = json.loads(data)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


class Lease:
    """Hold `<prefix>/_lease.json` for the body of a `with` block (see the module docstring)."""

    def __init__(self, store: ObjectStore, prefix: str, *, timeout: float | None = None):
        self.store, self.key = store, f"{prefix}/{LEASE_FILE}"
        self.timeout = default_timeout() if timeout is None else timeout
        self.seconds = lease_seconds()
        self.attempt = new_attempt_id()
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost = False  # another builder took the lease over while we stalled: we no longer renew it

    def _record(self) -> bytes:
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "attempt": self.attempt,
                           "token": self.token, "expires": time.time() + self.seconds}).encode()

    def read(self) -> dict[str, Any] | None:
        data = self.store.get(self.key)
        return None if data is None else _parse(data)

    def acquire(self) -> None:
        started, wait, announced = time.monotonic(), 0.05, False
        while True:
            if self.store.put_if_absent(self.key, self._record()):
                break
            current = self.store.get_tagged(self.key)
            if current is None:
                continue  # released between our put and our read
            holder = _parse(current[0])
            if lease_is_stale(holder):
                # replace exactly the stale version we read: of two builders taking it over, one wins
                if self.store.put_if_match(self.key, self._record(), current[1]):
                    logger.info("taking over the stale lease {} (was {})", self.store.url(self.key), holder)
                    break
                continue
            holder = holder or {}
            if time.monotonic() - started > self.timeout:
                raise LockTimeoutError(f"timed out after {self.timeout:.0f}s waiting for the lease "
                                       f"{self.store.url(self.key)} (held by pid {holder.get('pid')} on "
                                       f"{holder.get('host')}, expires in "
                                       f"{float(holder.get('expires', 0)) - time.time():.0f}s)")
            if not announced:
                logger.info("waiting for the lease {} (held by pid {} on {})", self.store.url(self.key),
                            holder.get("pid"), holder.get("host"))
                announced = True
            time.sleep(wait)
            wait = min(wait * 2, 2.0)
        self._renewer = threading.Thread(target=self._renew, name="lease renewal", daemon=True)
        self._renewer.start()

    def renew(self) -> bool:
        """Extend the lease if it is still ours (a conditional put of the version read); False once it is not."""
        current = self.store.get_tagged(self.key)
        holder = _parse(current[0]) if current is not None else None
        if not holder or holder.get("token") != self.token:
            return False
        return self.store.put_if_match(self.key, self._record(), current[1])  # type: ignore[index]

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                if not self.renew():
                    self.lost = True
                    logger.warning("lost the lease {} while stalled (another builder holds it now): not renewing "
                                   "it; this build publishes only if nobody else has", self.store.url(self.key))
                    return
            except Exception as exc:  # the final conditional put still keeps the cache whole
                logger.warning("could not renew the lease {}: {}", self.store.url(self.key), exc)

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        try:
            holder = self.read()
            if holder and holder.get("token") == self.token:
                self.store.delete([self.key])
        except Exception as exc:  # it expires on its own
            logger.warning("could not release the lease {}: {}", self.store.url(self.key), exc)

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
