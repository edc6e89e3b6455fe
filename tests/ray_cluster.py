"""A real multi-node Ray cluster on this machine whose nodes share no disk, for tests.

The head node (no CPUs: every task runs on a worker node) runs beside the test process; each
worker node runs `ray start --address` inside its own mount and PID namespace (`unshare -m -p -f`)
where the driver's folders are private, empty tmpfs mounts: pytest's temporary folders (every
tmp_path, so the driver's cache and local cache folders), the cluster's folder, /tmp/ray,
/dev/shm and ~/.cache do not exist there, as on separate machines; the node's TMPDIR is its own.
The rest of /tmp stays visible, so a checkout and virtualenv that live under /tmp (a CI clone)
still run the nodes. All nodes reach the S3 server on 127.0.0.1 (the network is shared).

Every process of the cluster, and the driver while it is up, uses Ray's token authentication with
one token: a process keeps the mode and token it loaded first, and an earlier local `ray.init()`
in the same process turned token mode on (a driver and a cluster in different modes fail with
"owner died" as soon as a task needs an object the driver put).

Teardown kills only the processes started here: each node's process tree (the worker nodes'
PID namespaces end with their first process). `ray stop` is never run: it stops every Ray
process of the machine by name, other users' clusters too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

RAY = str(Path(sys.executable).with_name("ray"))
#: node deaths are noticed in about a second and a half (Ray's default is about 15 s)
FAST_HEALTH_CHECKS = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "500",
                      "RAY_health_check_timeout_ms": "500", "RAY_health_check_failure_threshold": "3"}
AUTH_MODE, AUTH_TOKEN = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"
#: folders every worker node sees as empty, private tmpfs mounts (with the cluster's own folder)
PRIVATE = ("/tmp/ray", "/dev/shm", str(Path.home() / ".cache"))


def _pytest_temp_root() -> str:
    """Where pytest makes every tmp_path (`<tmp>/pytest-of-<user>`): the driver's folders."""
    import getpass

    return str(Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc (no psutil needed)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _kill_tree(process: subprocess.Popen) -> None:
    for pid in reversed(_tree(process.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


@dataclass
class WorkerNode:
    process: subprocess.Popen  # `unshare` (the namespace's first process runs `ray start --block`)
    log: Path

    def raylet_pid(self) -> int | None:
        return next((p for p in _tree(self.process.pid) if _name(p) == "raylet"), None)

    def node_id(self) -> str | None:
        """The Ray node id of this node (its raylet is started with `--node_id=<hex>`), None while none runs."""
        pid = self.raylet_pid()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = fh.read().decode(errors="replace").split("\0")
        except (OSError, TypeError):
            return None
        return next((a.split("=", 1)[1] for a in args if a.startswith("--node_id=")), None)

    def kill_raylet(self) -> None:
        """SIGKILL the node's raylet: to Ray, the node is lost (its workers die with it)."""
        pid = self.raylet_pid()
        assert pid is not None, f"no raylet under {self.process.pid}: {self.log.read_text()[-2000:]}"
        os.kill(pid, signal.SIGKILL)


@dataclass
class RayCluster:
    address: str
    head: subprocess.Popen
    env: dict[str, str]
    folder: Path
    workers: list[WorkerNode] = field(default_factory=list)

    def add_worker(self, env: dict[str, str] | None = None, hide: Sequence[str] = (),
                   resources: dict[str, float] | None = None) -> WorkerNode:
        """A worker node of 1 CPU; `env` overrides the cluster's environment on it, `hide` names folders it sees
        empty (say, the installed package: a node without it), `resources` are custom resources it offers."""
        log = self.folder / f"worker-{len(self.workers)}.log"
        Path("/tmp/ray").mkdir(exist_ok=True)
        private = [p for p in (*PRIVATE, _pytest_temp_root(), str(self.folder), *hide) if Path(p).is_dir()]
        mounts = " && ".join(f"mount -t tmpfs -o size=4g tmpfs {shlex.quote(p)}" for p in private)
        node_tmp = self.folder / "node-tmp"  # inside the node's private mount of the cluster folder
        offered = f" --resources={shlex.quote(json.dumps(resources))}" if resources else ""
        command = (f"{mounts} && mkdir -p {node_tmp} && export TMPDIR={node_tmp} && "
                   f"exec {RAY} start --address={self.address} --num-cpus=1 --node-ip-address=127.0.0.1 "
                   f"--object-store-memory=100000000 --disable-usage-stats --block{offered}")
        with open(log, "wb") as out:
            process = subprocess.Popen(["unshare", "-m", "-p", "-f", "--propagation", "private", "--mount-proc",
                                        "sh", "-c", command], env={**self.env, **(env or {})}, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        node = WorkerNode(process, log)
        self.workers.append(node)
        return node

    def worker_of(self, node_id: str) -> WorkerNode:
        """The worker node whose Ray node id is `node_id` (a task reports the node it runs on)."""
        found = [w for w in self.workers if w.node_id() == node_id]
        assert len(found) == 1, f"no single worker node has the id {node_id}: {[w.node_id() for w in self.workers]}"
        return found[0]

    def alive_workers(self) -> int:
        import ray

        return sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0)

    def wait_for_workers(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() != count:
            if time.monotonic() > deadline:
                logs = "\n".join(w.log.read_text(errors="replace")[-1500:] for w in self.workers)
                raise TimeoutError(f"{count} worker node(s) did not join in {timeout} s:\n{logs}")
            time.sleep(0.2)

    def remove_worker(self, node: WorkerNode) -> None:
        """Stop one worker node (its whole process tree) and wait until Ray counts it gone."""
        self.workers.remove(node)
        _kill_tree(node.process)
        self.wait_for_workers(len(self.workers))

    def stop(self) -> None:
        for node in self.workers:
            _kill_tree(node.process)
        _kill_tree(self.head)


def unshare_refusal() -> str | None:
    """Why private mount namespaces cannot be made here, or None."""
    if shutil.which("unshare") is None:
        return "the unshare command is missing (util-linux)"
    result = subprocess.run(["unshare", "-m", "-p", "-f", "--propagation", "private", "--mount-proc", "sh", "-c",
                             "mount -t tmpfs tmpfs /tmp"], capture_output=True, text=True)
    if result.returncode:
        return f"unshare -m -p is not permitted here ({result.stderr.strip() or result.returncode}); it needs root"
    return None


def _token() -> str:
    from ray._raylet import AuthenticationTokenLoader

    loader = AuthenticationTokenLoader.instance()
    if loader.has_token(ignore_auth_mode=True):
        return str(loader.get_raw_token(ignore_auth_mode=True))
    return uuid.uuid4().hex + uuid.uuid4().hex


def _set_auth(values: dict[str, str | None]) -> None:
    """This process's Ray authentication settings ($RAY_AUTH_MODE, $RAY_AUTH_TOKEN: Ray caches both)."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _start_head(folder: Path, env: dict[str, str]) -> RayCluster | None:
    """The head node, once it says it runs (None if it stopped: its port was taken meanwhile)."""
    port = _free_port()
    log = folder / "head.log"
    with open(log, "wb") as out:
        head = subprocess.Popen([RAY, "start", "--head", "--num-cpus=0", f"--port={port}",
                                 "--node-ip-address=127.0.0.1", f"--temp-dir={folder / 'ray'}",
                                 "--include-dashboard=false", "--disable-usage-stats",
                                 "--object-store-memory=100000000", "--block"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90
    while b"Ray runtime started" not in log.read_bytes():
        if head.poll() is not None or time.monotonic() > deadline:
            _kill_tree(head)
            return None
        time.sleep(0.2)
    return RayCluster(f"127.0.0.1:{port}", head, env, folder)


@contextlib.contextmanager
def ray_cluster(num_workers: int, env: dict[str, str]) -> Iterator[RayCluster]:
    """A head with no CPUs and `num_workers` worker nodes with 1 CPU each, the driver connected to it."""
    import ray

    refusal = unshare_refusal()
    if refusal:
        pytest.skip(f"a multi-node Ray cluster needs private mount namespaces: {refusal}")
    folder = Path(tempfile.mkdtemp(prefix="rmn-", dir="/tmp"))  # short: Ray's socket paths have a length limit
    # Ray turns token authentication on for a local ray.init() (it writes ~/.ray/auth_token) and for a head
    # started where that file exists, and a process keeps the mode and token it first loaded: this cluster
    # uses token authentication with the token this process has (or a new one), told to every node
    saved = {name: os.environ.get(name) for name in (AUTH_MODE, AUTH_TOKEN)}
    token = _token()
    _set_auth({AUTH_MODE: "token", AUTH_TOKEN: token})
    full_env = {**os.environ, **env, **FAST_HEALTH_CHECKS, "RAY_USAGE_STATS_ENABLED": "0", AUTH_MODE: "token",
                AUTH_TOKEN: token}
    full_env.pop("RAY_ADDRESS", None)
    cluster = None
    try:
        for _ in range(3):  # another Ray on this machine may take the free port first: try another
            cluster = _start_head(folder, full_env)
            if cluster is not None:
                break
        if cluster is None:
            raise RuntimeError(f"the Ray head did not start: {(folder / 'head.log').read_text()[-2000:]}")
        for _ in range(num_workers):
            cluster.add_worker()
        ray.init(address=cluster.address, include_dashboard=False, configure_logging=False, log_to_driver=False)
        cluster.wait_for_workers(num_workers)
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
        _set_auth(saved)


#: what a worker node needs to reach the S3 server on 127.0.0.1 with moto's credentials, and nothing of the host's
S3_WORKER_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
                 "AWS_CONFIG_FILE": "/nonexistent"}


@contextlib.contextmanager
def s3_ray_cluster(moto_endpoint: str, num_workers: int = 2) -> Iterator[RayCluster]:
    """`ray_cluster` whose worker nodes reach the moto server at `moto_endpoint`; a local cluster another test
    module started in this process is shut down first (a driver connects to one cluster at a time)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    with ray_cluster(num_workers, {**S3_WORKER_ENV, "AWS_ENDPOINT_URL": moto_endpoint}) as started:
        yield started


def part_nodes(ds) -> list[str]:
    """The Ray node that wrote each part of a dataset's cache (recorded in its metadata)."""
    return ds.cache_metadata[0].extra["part_nodes"]


def import_folders(package: str) -> list[str]:
    """Every folder a worker node (this machine's Python, this environment) could import `package` from: the
    `package` folder of each sys.path entry and of the working folder (Ray puts the driver's on its workers'
    path), and each folder a finder on sys.meta_path would load it from (an editable install's finder maps the
    name to the checkout it was installed from). A node that must lack the package hides them all: hiding only
    the folder this process imported it from left, in a worktree of a checkout whose virtualenv holds the
    editable install, the other checkout's copy importable there (and the node ran every part)."""
    folders = {Path(entry or os.getcwd(), package) for entry in [*sys.path, os.getcwd()] if isinstance(entry, str)}
    for finder in sys.meta_path:
        spec = None
        with contextlib.suppress(Exception):  # a finder that cannot answer for this name has nothing to hide
            spec = finder.find_spec(package, None)
        folders.update(Path(p) for p in getattr(spec, "submodule_search_locations", None) or [])
    return sorted(str(p.resolve()) for p in folders if p.is_dir())


def ran_on_worker_nodes(nodes: list[str], parts: int | None = None) -> bool:
    """Whether every part ran on a worker node of the connected cluster (never on the head, which has no CPUs),
    and there were `parts` of them. Which worker ran which part is Ray's choice: on a busy machine one node can
    take every part, so no test asserts a spread over the nodes (a fresh clone's `make test` under load)."""
    import ray  # local: ray is an optional test dependency, imported by the modules that use this helper

    # dead ones too (they ran parts): Ray may report a dead node's resources as empty, and the head never dies here
    workers = {n["NodeID"] for n in ray.nodes() if n["Resources"].get("CPU", 0) > 0 or not n["Alive"]}
    return bool(nodes) and set(nodes) <= workers and (parts is None or len(nodes) == parts)


@pytest.fixture(scope="module")
def cluster(moto_endpoint: str) -> Iterator[RayCluster]:
    """A Ray cluster of two worker nodes that share no disk, reaching the S3 server: one per test module that asks
    (its tests run in one xdist worker: mark the module `xdist_group("ray")`)."""
    with s3_ray_cluster(moto_endpoint) as started:
        yield started
