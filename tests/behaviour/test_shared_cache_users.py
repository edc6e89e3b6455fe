"""Two real users sharing a setgid, group-writable cache (docs/shared-cache-on-a-cluster.md).

Runs as root only: it creates the users `sds_alice` and `sds_bob` in the group `sds_share`.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import traceback
from pathlib import Path

import pytest

from stable_datasets.cache.builds import current_build
from tests.conftest import TOY_BUILDER

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="creates two users: needs root")

GROUP, ALICE, BOB = "sds_share", "sds_alice", "sds_bob"
SMALL_SHARDS = {"max_shard_size": 16 << 10, "batch_rows": 50}


def _ensure_account(kind: str, name: str, *args: str) -> None:
    lookup = grp.getgrnam if kind == "group" else pwd.getpwnam
    try:
        lookup(name)
        return
    except KeyError:
        pass
    done = subprocess.run([f"{kind}add", *args, name], capture_output=True, text=True)
    if done.returncode not in (0, 9):  # 9: created meanwhile by a concurrent test run
        pytest.skip(f"cannot create {kind} {name}: {done.stderr.strip()}")


@pytest.fixture
def shared_cache():
    """A cache folder set up as the cluster page says: group-owned, setgid, group-writable."""
    _ensure_account("group", GROUP)
    for user in (ALICE, BOB):
        _ensure_account("user", user, "--no-create-home", "--gid", GROUP, "--shell", "/bin/sh")
    folder = Path(tempfile.mkdtemp(prefix="sds-shared-"))
    os.chmod(folder, 0o777)  # the children write their reports here
    cache = folder / "cache"
    cache.mkdir()
    os.chown(cache, 0, grp.getgrnam(GROUP).gr_gid)
    os.chmod(cache, 0o2775)
    script = folder / "toy.py"
    script.write_text(TOY_BUILDER)
    os.chmod(script, 0o644)
    yield cache, script
    shutil.rmtree(folder, ignore_errors=True)


def _build_as(user: str, cache: Path, script: Path, env: dict[str, str]) -> tuple[int, str]:
    """Build in a forked child that becomes `user` (umask 002); (exit status or -signal, what it printed).

    A fork, not a new interpreter: the interpreter may live where other users cannot read (a home folder).
    """
    import stable_datasets as sds

    account = pwd.getpwnam(user)
    report = cache.parent / f"report-{user}-{os.getpid()}.txt"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.setgroups([account.pw_gid])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            os.umask(0o002)
            os.environ.update({"HOME": str(cache.parent), "STABLE_DATASETS_CACHE_DIR": str(cache), **env})
            ds = sds.load_dataset(str(script), split="train", rows=2000, layout_options=SMALL_SHARDS)
            assert ds["id"][:3] == [0, 1, 2] and len(ds) == 2000
            report.write_text(str(ds.cache_dirs[0]))
            status = 0
        except BaseException:
            with contextlib.suppress(OSError):
                report.write_text(traceback.format_exc())
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code, report.read_text() if report.exists() else ""


def test_another_users_resume_publishes_and_keeps_the_setgid_bit(shared_cache):
    cache, script = shared_cache
    alice, bob = pwd.getpwnam(ALICE).pw_uid, pwd.getpwnam(BOB).pw_uid
    code, out = _build_as(ALICE, cache, script, {"TOY_KILL_AT": "1500"})
    assert code == -9, out
    staging = next(cache.rglob(".staging-train"))
    part = staging / ".part-00000"  # a one-process build is one part
    assert (part / "shard-00000.arrow").stat().st_uid == alice and (part / "_journal.jsonl").exists()

    code, out = _build_as(BOB, cache, script, {})
    assert code == 0, out
    build = Path(out)
    assert current_build(build.parent / "train") == build
    assert (build / "shard-00000.arrow").stat().st_uid == alice  # alice's journaled shard, reused as it was
    assert (build / "_metadata.json").stat().st_uid == bob
    info = build.stat()
    assert info.st_mode & stat.S_ISGID, oct(info.st_mode)  # published split folders keep the setgid bit
    assert info.st_gid == grp.getgrnam(GROUP).gr_gid
    for path in build.iterdir():
        assert path.stat().st_mode & stat.S_IRGRP, path  # the group can read everything


@pytest.mark.parametrize("storage_format", ["arrow", "parquet"])
def test_a_shard_the_loading_user_may_not_read_is_named_as_such_not_as_corrupt(shared_cache, storage_format):
    """A cache file another user wrote without group read (before the group-readable rule, or by hand). Before:
    'corrupt Arrow shard (PermissionError: ...)' and the advice to rebuild, which that user cannot do; for
    Parquet 'ValueError: ... is not a readable Parquet file (12856 bytes): [Errno 13] ...'."""
    import stable_datasets as sds

    cache, script = shared_cache
    options = {**SMALL_SHARDS, "row_group_rows": 50} if storage_format == "parquet" else SMALL_SHARDS
    ds = sds.load_dataset(str(script), split="train", cache_dir=str(cache), layout_options=options, rows=2000,
                          storage_format=storage_format)
    hidden = ds.cache_dirs[0] / ds.cache_metadata[0].shards[1].path
    os.chmod(hidden, 0o600)
    account = pwd.getpwnam(BOB)
    report = cache.parent / "report-unreadable.txt"
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setgroups([account.pw_gid])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            mine = sds.load_dataset(str(script), split="train", cache_dir=str(cache), layout_options=options,
                                    rows=2000, storage_format=storage_format)
            try:
                mine["id"]
                report.write_text("read it")
            except Exception as exc:
                report.write_text(f"{type(exc).__name__}: {exc}")
            status = 0
        except BaseException:
            with contextlib.suppress(OSError):
                report.write_text(traceback.format_exc())
        finally:
            os._exit(status)
    os.waitpid(pid, 0)
    kind = {"arrow": "CacheError:", "parquet": "PermissionError: [Errno 13]"}[storage_format]
    assert report.read_text() == (f"{kind} {hidden}: this user may not read it (Permission denied); its owner can "
                                  "make it group-readable (see docs/shared-cache-on-a-cluster.md)")
