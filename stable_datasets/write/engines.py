"""Running a function over a list of calls: in this process, in forked processes, or as Ray tasks.

Forked children inherit the function and its arguments, so builders defined in a notebook or
with `exec` need no pickling; only results travel back (small typed objects). Ray tasks get
their function by value for modules a worker cannot import (builder scripts, user code).
Results come back in the order of the calls; the first failure stops the others.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import pickle
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from loguru import logger

from stable_datasets.env import default_environment, env_text
from stable_datasets.errors import StableDatasetsError, WorkerDiedError
from stable_datasets.identity.code import is_user_module
from stable_datasets.version import __version__
from stable_datasets.write.seeding import reseed_after_fork

ENGINES = ("process", "ray")
RAY_INSTALL_HINT = "engine='ray' needs Ray: pip install 'stable-datasets[ray]' (or pip install 'ray[data]')"


def check_engine(engine: str, num_proc: int | None) -> None:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if num_proc is not None and (isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1):
        raise ValueError(f"num_proc must be a positive int or None, got {num_proc!r}")


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ImportError(RAY_INSTALL_HINT) from None
    return ray


@dataclass
class JobRunner:
    """How parallel work runs: `engine` ("process" or "ray"), at most `num_proc` at once."""

    engine: str = "process"
    num_proc: int | None = None
    ray_address: str | None = None
    ray_max_retries: int = 2  # a Ray task whose worker dies is retried this many times
    modules: list[ModuleType] = field(default_factory=list)  # sent by value to Ray workers
    #: a work folder Ray tasks share through the store (write.remote_parts.SharedWorkdir): pulled before each
    #: task and pushed after it, then pulled by the driver; None: tasks share the driver's disk
    shared: Any = None

    def __post_init__(self) -> None:
        check_engine(self.engine, self.num_proc)

    @property
    def parallelism(self) -> int:
        """How many jobs to divide work into."""
        if self.num_proc is not None:
            return self.num_proc
        return ray_cpus(self.ray_address) if self.engine == "ray" else 1

    def __call__(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], desc: str = "jobs",
                 mirrored: bool = True) -> list[Any]:
        """`fn(*call)` for every call, results in the order of the calls. `mirrored=False`: Ray tasks do not
        pull and push the shared work folder (jobs that neither read nor write it, such as the key check's)."""
        if not calls:
            return []
        if self.engine == "ray":
            if self.shared is None or not mirrored:
                return run_ray(fn, calls, self, desc)
            named = [(f"{desc} {i} of {len(calls)}", *args) for i, args in enumerate(calls)]
            results = run_ray(self.shared.around(fn), named, self, desc)
            self.shared.pull()
            return results
        if len(calls) == 1 or (self.num_proc or 1) <= 1:
            return [fn(*args) for args in calls]
        return run_forked(fn, calls, self.num_proc or 1, desc)


# -- forked processes ------------------------------------------------------------------------
def _private_progress_lock() -> None:
    """tqdm's lock holds a semaphore shared with the parent across fork: a part killed while
    holding it (OOM, SIGKILL) would leave the parent waiting for it forever. Parts use their own."""
    import tqdm
    import tqdm.auto

    lock = threading.RLock()
    tqdm.tqdm.set_lock(lock)
    tqdm.auto.tqdm.set_lock(lock)


def _child(fn: Callable[..., Any], args: tuple[Any, ...], conn: multiprocessing.connection.Connection) -> None:
    _private_progress_lock()
    reseed_after_fork()  # else every part draws the parent's numpy/torch random numbers
    try:
        result: tuple[Any, ...] = ("ok", fn(*args))
    except BaseException as exc:  # reported to the parent, which raises it
        result = ("error", exc, "".join(traceback.format_exception(exc)))
    try:
        message = pickle.dumps(result)
        pickle.loads(message)  # an exception whose class cannot be rebuilt would fail in the parent
    except Exception:  # send the text instead
        message = pickle.dumps(("error", None, result[2] if result[0] == "error" else traceback.format_exc()))
    conn.send_bytes(message)
    conn.close()


def run_forked(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], num_proc: int,
               desc: str = "jobs") -> list[Any]:
    """Run `fn(*call)` for every call in forked children, at most `num_proc` at a time."""
    context = multiprocessing.get_context("fork")
    results: list[Any] = [None] * len(calls)
    waiting = list(range(len(calls)))
    running: dict[Any, tuple[int, Any]] = {}  # parent end of the pipe -> (call index, process)
    died: list[str] = []  # workers that died: the others finish, so the next build can reuse their parts
    try:
        while waiting or running:
            while waiting and not died and len(running) < num_proc:
                index = waiting.pop(0)
                receive, send = context.Pipe(duplex=False)
                # not a daemon: a part may start its own pool (video frames encode in worker processes)
                process = context.Process(target=_child, args=(fn, calls[index], send), name=f"{desc}-{index}")
                process.start()
                send.close()
                running[receive] = (index, process)
            for conn in multiprocessing.connection.wait(list(running)):
                index, process = running.pop(conn)
                try:
                    message = pickle.loads(conn.recv_bytes())
                except EOFError:
                    process.join()
                    died.append(f"{desc} {index} of {len(calls)}: its worker process died "
                                f"({_exit_reason(process.exitcode)})")
                    continue
                finally:
                    conn.close()
                process.join()
                if message[0] == "ok":
                    results[index] = message[1]
                    continue
                _, exc, text = message
                if isinstance(exc, BaseException) and not isinstance(exc, SystemExit):  # would end the user's program
                    raise exc
                raise StableDatasetsError(f"{desc} {index} of {len(calls)} failed in its worker:\n{text}")
        if died:
            raise WorkerDiedError("; ".join(died))
    finally:
        for conn, (_, process) in running.items():
            with contextlib.suppress(OSError):
                process.terminate()
            process.join()
            conn.close()
    return results


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


# -- Ray -------------------------------------------------------------------------------------
#: Ray Data's usage collector asks a Prometheus server (localhost:9090 unless $RAY_PROMETHEUS_HOST) for counters
#: after every execution and logs a traceback for each refused query; a build or `to_ray()` runs none. Off unless
#: the user set the variable (then theirs is kept).
RAY_DATA_USAGE_SWITCH = ("RAY_DATA_USAGE_DISABLED", "1")


def quiet_ray_data_usage() -> None:
    """Turn Ray Data's usage queries off in this process (before Ray starts, so a local cluster inherits it)."""
    default_environment(*RAY_DATA_USAGE_SWITCH)


def ensure_ray(address: str | None = None) -> ModuleType:
    """Ray, connected: to `address` (or $RAY_ADDRESS) when given, else a local cluster."""
    quiet_ray_data_usage()
    ray = import_ray()
    if not ray.is_initialized():
        named = address or env_text("RAY_ADDRESS")
        source = "ray_address" if address else "$RAY_ADDRESS"
        logger.info("starting Ray ({})", named or "a local cluster")
        if named:
            _check_reachable(named, source)
        try:
            ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=True,
                     configure_logging=False)
        except ConnectionError as exc:
            raise StableDatasetsError(f"cannot reach the Ray cluster at {named} ({source}): {exc}") from None
    elif address and address != "auto":
        current = ray.get_runtime_context().gcs_address
        if address.removeprefix("ray://") != current:
            logger.warning("ray_address={} is not used: this process is connected to the Ray cluster at {} "
                           "already; call ray.shutdown() first to build on another", address, current)
    return ray


def _check_reachable(address: str, source: str) -> None:
    """Fail at once on an address nobody answers: Ray itself keeps retrying a GCS address for minutes."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return  # "auto", "local", or a form Ray judges itself
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as exc:
        raise StableDatasetsError(
            f"cannot reach the Ray cluster at {address} ({source}): {exc.strerror or exc}; give the head node's "
            "address (host:6379 by default, or ray://host:10001 for Ray Client) of a cluster that runs") from None


def ray_node_id() -> str:
    """The Ray node this process runs on ("" outside Ray): a part records where it was written."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())


def ray_cpus(address: str | None = None) -> int:
    ray = ensure_ray(address)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


@contextlib.contextmanager
def _sent_by_value(modules: Sequence[ModuleType]) -> Iterator[None]:
    from ray import cloudpickle

    registered = []
    for module in modules:
        if module.__name__ in sys.modules and module.__name__ != "__main__":
            with contextlib.suppress(ValueError):  # already registered
                cloudpickle.register_pickle_by_value(module)
                registered.append(module)
    try:
        yield
    finally:
        for module in registered:
            with contextlib.suppress(ValueError):
                cloudpickle.unregister_pickle_by_value(module)


def run_ray(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], runner: JobRunner,
            desc: str = "jobs") -> list[Any]:
    """Run the calls as Ray tasks (one CPU each). A task whose worker dies is retried; after the
    retries it fails the run, once the other tasks finish (their parts are kept for the next build).
    An exception raised by a task stops the others at once and is raised as itself."""
    ray = ensure_ray(runner.ray_address)
    with _sent_by_value(runner.modules):
        task = ray.remote(num_cpus=1, max_retries=runner.ray_max_retries, retry_exceptions=False)(fn)
        refs = [task.remote(*args) for args in calls]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(calls)
    died: list[str] = []
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    results[index[ref]] = ray.get(ref)
                except _worker_died(ray) as exc:
                    died.append(f"{desc} {index[ref]} of {len(calls)}: its Ray worker died and the task failed "
                                f"after {runner.ray_max_retries} retries ({type(exc).__name__})")
                except (ray.exceptions.RayTaskError, ray.exceptions.UnserializableException) as exc:
                    failure = _task_failure(ray, exc, f"{desc} {index[ref]} of {len(calls)}")
                    if failure is None:
                        raise  # the task's own error (Ray's error is an instance of its class too: ExampleError...)
                    raise failure from None
    except BaseException:  # a task's error (raised as its own class: ExampleError, ...), or Ctrl-C in the driver
        _stop(ray, pending)
        raise
    if died:
        raise WorkerDiedError("; ".join(died))
    return results


def ray_single_node(ray: ModuleType) -> str | None:
    """This process's Ray node when it is the only node of the cluster with CPUs (its tasks can then read this
    process's disk, if they are pinned to it), else None (a Ray Client driver is on no node of the cluster)."""
    if ray.util.client.ray.is_connected():
        return None
    here = str(ray.get_runtime_context().get_node_id())
    cpus = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}
    return here if cpus == {here} else None


def _streamed(fn: Callable[..., Iterator[Any]], *args: Any) -> Iterator[Any]:
    """A Ray task of `stream_ray`: the node it runs on, then the items of `fn(*args)`."""
    yield ray_node_id()
    yield from fn(*args)


_END = object()


def stream_ray(fn: Callable[..., Iterator[Any]], calls: Sequence[tuple[Any, ...]], runner: JobRunner,
               desc: str = "jobs", node: str | None = None) -> Iterator[tuple[int, str, Any]]:
    """`fn(*call)`, a generator, for every call as a Ray task (one CPU each; on Ray node `node` only when given)
    whose items travel back through Ray's object store one at a time: yields (call index, the node it ran on,
    item), every item of call 0 first, then of call 1, ...; the caller holds one item at a time however large
    the calls' results, and the tasks need no disk the caller can read. A task's exception stops the others and
    is raised as itself (noticed within a second of it, whichever call is being read); a task whose worker died
    after the retries, WorkerDiedError naming the call and its node."""
    ray = ensure_ray(runner.ray_address)
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": runner.ray_max_retries, "retry_exceptions": False}
    if node is not None:
        options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node, False)
    with _sent_by_value(runner.modules):
        task = ray.remote(**options)(_streamed)
        streams = [task.remote(fn, *args) for args in calls]
    reader = _StreamReader(ray, streams, runner, desc)
    try:
        for index in range(len(streams)):
            reader.nodes[index] = str(reader.next(index))
            while (item := reader.next(index)) is not _END:
                yield index, reader.nodes[index], item
                reader.check_others(index)
    except BaseException:  # a task's error, the caller stopping early, or Ctrl-C
        _stop(ray, streams, [s.completed() for s in streams])
        raise


@dataclass
class _StreamReader:
    """The items of `stream_ray`'s tasks, their errors turned into the run's."""

    ray: ModuleType
    streams: list[Any]
    runner: JobRunner
    desc: str
    nodes: dict[int, str] = field(default_factory=dict)
    checked: float = 0.0

    def next(self, index: int) -> Any:
        try:
            ref = next(self.streams[index])
        except StopIteration:
            return _END
        return self.get(ref, index)

    def get(self, ref: Any, index: int) -> Any:
        ray, name = self.ray, f"{self.desc} {index} of {len(self.streams)}"
        try:
            return ray.get(ref)
        except _worker_died(ray) as exc:  # (OwnerDiedError is an ObjectLostError)
            raise WorkerDiedError(f"{name} (node {self.node(index)}): its Ray worker died and the task failed "
                                  f"after {self.runner.ray_max_retries} retries ({type(exc).__name__})") from None
        except (ray.exceptions.RayTaskError, ray.exceptions.UnserializableException) as exc:
            failure = _task_failure(ray, exc, name)
            if failure is None and isinstance(getattr(exc, "cause", None), Exception):
                failure = exc.cause  # the task's own error, without Ray's frames around it
            if failure is None:
                raise
            raise failure from None

    def node(self, index: int) -> str:
        """The node call `index` ran on (its first item), else "unknown"."""
        if index not in self.nodes:
            try:
                self.nodes[index] = str(self.ray.get(next(self.streams[index]), timeout=10))
            except Exception:
                return "unknown"
        return self.nodes[index]

    def check_others(self, index: int) -> None:
        """At most once a second, raise the error of a later call that failed already."""
        if time.monotonic() - self.checked < 1:
            return
        self.checked = time.monotonic()
        later = {s.completed(): i for i, s in enumerate(self.streams) if i > index}
        if later:
            done, _ = self.ray.wait(list(later), num_returns=len(later), timeout=0, fetch_local=False)
            for ref in done:
                self.get(ref, later[ref])


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def _missing_module(exc: Any) -> str | None:
    """The module a Ray task could not import on its node (the task's function or its arguments need it, or its
    code imports it), else None."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, ModuleNotFoundError) and cause.name:
        return cause.name
    # Ray's own reports: the task's function (RuntimeError "failed to import on the worker") or its arguments
    # (RaySystemError "could not be computed") could not be unpickled there
    if type(cause).__name__ in ("RuntimeError", "RaySystemError"):
        found = _NO_MODULE.search(str(cause))
        return found.group(1) if found else None
    return None


_WORKER = re.compile(r"\(pid=(\d+), ip=([^)\s]+)\)")


def _worker_of(exc: BaseException) -> str:
    """" on <ip> (pid <pid>)" of the Ray worker a task error came from (its message names them), else ""."""
    found = _WORKER.search(str(exc))
    return f" on {found.group(2)} (pid {found.group(1)})" if found else ""


def _install_hint(module: str) -> str:
    if module.split(".")[0] != "stable_datasets":
        return f"install the package that provides {module.split('.')[0]} on every node of the cluster"
    return (f"install stable-datasets ({__version__}, as on the driver) on every node of the cluster: in the nodes' "
            "image or environment, or with ray.init(runtime_env={'pip': [...]}); nothing was published")


def _stop(ray: ModuleType, pending: list[Any], finished: list[Any] | None = None) -> None:
    """Cancel the tasks still pending and wait until they are gone (their `finished` refs, for streamed tasks): a
    task still running could write into a staging folder that the build is about to remove."""
    for other in pending:
        with contextlib.suppress(Exception):
            ray.cancel(other, force=True)
    waited = pending if finished is None else finished
    with contextlib.suppress(Exception):
        ray.wait(waited, num_returns=len(waited), timeout=120)


def _worker_died(ray: ModuleType) -> tuple[type[BaseException], ...]:
    """Ray's exceptions for a task whose worker (or node, or result) was lost after its retries."""
    return ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError


def _task_failure(ray: ModuleType, exc: BaseException, name: str) -> StableDatasetsError | None:
    """The run's error for a Ray task error that Ray could not hand over as the task's own: a module the worker
    cannot import, or an exception whose class cannot be rebuilt here (its trace instead); None for any other."""
    if isinstance(exc, ray.exceptions.UnserializableException):
        return StableDatasetsError(f"{name} failed in its Ray task:\n{getattr(exc, '_original_stack_trace', exc)}")
    missing = _missing_module(exc)
    if missing is not None:
        return StableDatasetsError(f"{name}: its Ray worker{_worker_of(exc)} cannot import {missing}: "
                                   f"{_install_hint(missing)}")
    return None


def user_modules(obj: Any) -> list[ModuleType]:
    """Modules a Ray worker may not be able to import by name: those defining `obj` (a class and its bases,
    or a function) that are the user's code by the fingerprint's own rule (identity.code.is_user_module: builder
    scripts, scripts and the modules beside them; not installed packages, the standard library or this library),
    and the modules beside them (on the same sys.path folder) that they use in turn: `from mypkg import utils`.
    `__main__` is left out: cloudpickle sends it by value itself."""
    names = [k.__module__ for k in obj.__mro__] if isinstance(obj, type) else [getattr(obj, "__module__", None)]
    found: dict[str, ModuleType] = {}
    roots: list[Path] = []  # the sys.path folders the user's modules were imported from
    todo = [(name, True) for name in dict.fromkeys(names)]
    while todo:
        name, defines_obj = todo.pop(0)
        module = sys.modules.get(name or "")
        if module is None or name in found or name == "__main__" or not is_user_module(module):
            continue
        file = getattr(module, "__file__", None)
        if defines_obj and file:
            roots.append(Path(file).resolve().parents[name.count(".") + (Path(file).name == "__init__.py")])
        elif not defines_obj and not (file and any(Path(file).resolve().is_relative_to(r) for r in roots)):
            continue  # user code elsewhere (another project, installed in editable mode): left to the workers
        found[name] = module
        for value in list(vars(module).values()):
            used = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
            if isinstance(used, str) and used not in found:
                todo.append((used, False))
    return list(found.values())
