"""Where the engine's CPU-bound work runs: worker processes, threads, or the calling thread.

Diagnosing a job is mostly Python holding the GIL (session bookkeeping, the model,
the HTML), so by default jobs run in worker processes, one per core; ``threads``
and ``inline`` (the calling thread: a Dask worker is a process already) are the
alternatives, compared in ``bench/fleet_bench.py``.

A process pool is shared by every batch of an audit in one process (see
:func:`shared_pool`) and fed at most ``workers`` jobs at a time, so a worker that
dies (killed for memory, a crash in native code) takes down at most that many
jobs in flight. Those are then run again, each alone in a fresh process: the job
that kills its process again is recorded as failed, with the signal or exit code;
the others complete. Workers start from a fork server that has already imported
the engine, so a replacement costs a fork, not an interpreter start.

A job that runs longer than ``job_timeout_s`` (``--job-timeout``, default
:data:`DEFAULT_JOB_TIMEOUT_S`: a read that never returns, an NFS stall, a FIFO) is killed:
the pool's worker processes are killed (a process pool cannot kill one worker), the job gives
:class:`JobTimedOut` ("timed out after 900 s") and the jobs that were in flight beside it run
again, each alone in a fresh process under the same timeout. A thread cannot be killed: in
``threads`` mode a job past its timeout is recorded the same way and its thread abandoned (the
process may wait for it at exit); in ``inline`` mode (Dask) no job is timed out here.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from enum import StrEnum
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

from stormwatch.tasks.heartbeat import PROGRESS

Item = TypeVar("Item")
Result = TypeVar("Result")

#: Imported once by the fork server, so that each worker starts with the engine loaded.
PRELOAD = ["stormwatch.tasks.audit_job"]
#: Seconds a job may run before it is killed (``--job-timeout``).
DEFAULT_JOB_TIMEOUT_S = 900.0
#: Seconds between looks at jobs that timed out in threads (which never finish by themselves).
_POLL_S = 1.0
log = logging.getLogger(__name__)


class EngineMode(StrEnum):
    PROCESSES = "processes"
    THREADS = "threads"
    INLINE = "inline"  # the calling thread, one job after another


@dataclass(frozen=True)
class EngineSettings:
    """How jobs run: ``mode`` and ``workers`` (processes or threads, at least 1; ``None``: one per core);
    ``job_timeout_s``: seconds a job may run before it is killed (positive; ``None``: never)."""

    mode: EngineMode = EngineMode.PROCESSES
    workers: int | None = None
    job_timeout_s: float | None = DEFAULT_JOB_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"engine workers must be at least 1, got {self.workers}")
        if self.job_timeout_s is not None and not self.job_timeout_s > 0:
            raise ValueError(f"the job timeout must be a positive number of seconds, got {self.job_timeout_s}")

    @property
    def parallelism(self) -> int:
        if self.mode is EngineMode.INLINE:
            return 1
        return self.workers or os.cpu_count() or 1


class WorkerDied(RuntimeError):
    """The process running a job ended without a result (killed by a signal, or exited)."""


class JobTimedOut(WorkerDied):
    """The job ran past its timeout and was killed (or, in a thread, abandoned); the message is the
    job's error as recorded: ``timed out after <N> s``."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.timeout_s = timeout_s


def kill_workers(executor: Executor) -> None:
    """Kill the worker processes of a process pool (SIGKILL: a process blocked opening a FIFO or
    reading a stalled mount ignores nothing else reliably); the pool is then broken and its pending
    futures fail with BrokenProcessPool. ``_processes`` is the pool's own map of its workers (private,
    the same since Python 3.8: the pool offers no way to stop a single job)."""
    processes = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        process.kill()


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "ended without an exit status"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (out of memory?)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {exitcode}"


def adopt_environment(environ: dict[str, str]) -> None:
    """Make this worker's environment ``environ`` (the pool creator's, when the pool started):
    the fork server's own dates from its first use, and credentials may have changed since."""
    os.environ.clear()
    os.environ.update(environ)


def _send_result(
    conn: Connection, call: Callable[..., Any], args: tuple[Any, ...], environ: dict[str, str]
) -> None:
    adopt_environment(environ)
    try:
        conn.send((True, call(*args)))
    except Exception as exc:  # sent back and raised in the parent, as a pool would
        conn.send((False, exc))
    finally:
        conn.close()


def run_alone(context: Any, call: Callable[..., Result], *args: Any, timeout_s: float | None = None) -> Result:
    """``call(*args)`` in a process of its own; :class:`WorkerDied` when that process dies first,
    :class:`JobTimedOut` (the process killed) when it runs longer than ``timeout_s`` seconds."""
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_send_result, args=(send, call, args, dict(os.environ)), daemon=True)
    process.start()
    PROGRESS.beat()
    send.close()
    try:
        if timeout_s is not None and not receive.poll(timeout_s):
            process.kill()
            process.join()
            raise JobTimedOut(timeout_s)
        ok, value = receive.recv()
    except EOFError:
        process.join()
        raise WorkerDied(f"the worker process diagnosing this job {describe_exit(process.exitcode)}") from None
    finally:
        receive.close()
    process.join()
    PROGRESS.beat()
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


class EnginePool(Generic[Item, Result]):
    """Runs ``call(item, *args)`` for many items on the settings' workers, results in item order.

    ``call`` must not raise for an item (it returns the item's failure as its result, as
    :func:`~stormwatch.tasks.audit_job.run_job` does); ``on_death(item, error)`` gives the
    result of an item whose process died twice, or that ran past the timeout (:class:`JobTimedOut`).
    Thread-safe: batches share one pool.
    """

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._executor: Executor | None = None
        self._slots = threading.BoundedSemaphore(settings.parallelism)
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)
        self._expired: set[Future[Any]] = set()  # futures past the timeout, until map collects them
        self._abandoned = False  # a thread past its timeout was left running

    def _current(self) -> Executor:
        with self._lock:
            if self._executor is None:
                if self.settings.mode is EngineMode.PROCESSES:
                    self._executor = ProcessPoolExecutor(self.settings.parallelism, mp_context=self._context,
                                                         initializer=adopt_environment, initargs=(dict(os.environ),))
                else:
                    self._executor = ThreadPoolExecutor(self.settings.parallelism, thread_name_prefix="engine")
            return self._executor

    def _replace(self, broken: Executor) -> None:
        with self._lock:
            if self._executor is broken:
                self._executor = None
        broken.shutdown(wait=False, cancel_futures=True)

    def _submit(
        self, call: Callable[..., Result], item: Item, args: tuple[Any, ...]
    ) -> tuple[Executor, Future[Result]]:
        self._slots.acquire()  # at most `parallelism` in flight: a dying worker takes few jobs with it
        executor = self._current()
        try:
            future = executor.submit(call, item, *args)
        except BrokenProcessPool:
            self._slots.release()
            self._replace(executor)
            executor = self._current()
            self._slots.acquire()
            future = executor.submit(call, item, *args)
        PROGRESS.beat()
        release = _Once(self._slots.release)

        def finished(_: Future[Result]) -> None:
            release()
            PROGRESS.beat()

        future.add_done_callback(finished)
        self._watch(executor, future, release)
        return executor, future

    def _watch(self, executor: Executor, future: Future[Any], release: Callable[[], None]) -> None:
        """Expire ``future`` after the job timeout unless it is done by then (its slot is given back:
        a thread that never returns must not starve the pool)."""
        timeout_s = self.settings.job_timeout_s
        if timeout_s is None:
            return

        def expire() -> None:
            if future.done():
                return
            with self._lock:
                self._expired.add(future)
            log.warning("a job ran past its timeout of %g s: %s", timeout_s,
                        "killing the worker processes" if isinstance(executor, ProcessPoolExecutor)
                        else "its thread is abandoned")
            if isinstance(executor, ProcessPoolExecutor):
                kill_workers(executor)
                return
            self._abandoned = True
            with self._lock:  # later jobs go to fresh threads, not behind the stuck one
                if self._executor is executor:
                    self._executor = None
            executor.shutdown(wait=False)
            release()

        timer = threading.Timer(timeout_s, expire)
        timer.daemon = True
        timer.start()
        future.add_done_callback(lambda _: timer.cancel())

    def _take_expired(self, future: Future[Any]) -> bool:
        with self._lock:
            if future in self._expired:
                self._expired.discard(future)
                return True
            return False

    def _wait(self, futures: Sequence[Future[Any]]) -> None:
        """Until each future is done or expired (an expired thread's future never is)."""
        pending = set(futures)
        while pending:
            wait(pending, timeout=_POLL_S)
            with self._lock:
                pending = {future for future in pending if not future.done() and future not in self._expired}

    def map(
        self,
        call: Callable[..., Result],
        items: Sequence[Item],
        *args: Any,
        on_death: Callable[[Item, WorkerDied], Result],
    ) -> list[Result]:
        if self.settings.mode is EngineMode.INLINE:
            return [call(item, *args) for item in items]
        submitted = [self._submit(call, item, args) for item in items]
        self._wait([future for _, future in submitted])
        results: list[Result | None] = []
        suspects: list[int] = []
        for index, (executor, future) in enumerate(submitted):
            if self._take_expired(future):
                if isinstance(executor, ProcessPoolExecutor):
                    self._replace(executor)
                results.append(on_death(items[index], JobTimedOut(self.settings.job_timeout_s or 0.0)))
            elif isinstance(future.exception(), BrokenProcessPool):
                self._replace(executor)
                suspects.append(index)
                results.append(None)
            else:
                results.append(future.result())  # `call` returns an item's failure; anything raised is a bug
        for index in suspects:  # their process died, maybe because of another job: each alone now
            try:
                results[index] = run_alone(self._context, call, items[index], *args,
                                           timeout_s=self.settings.job_timeout_s)
            except WorkerDied as died:
                results[index] = on_death(items[index], died)
        return results  # type: ignore[return-value]  # every None was replaced above

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:  # an abandoned thread never ends: do not wait for it
            executor.shutdown(wait=not self._abandoned, cancel_futures=True)


class _Once:
    """Calls ``action`` the first time only (a slot is given back once, by expiry or completion)."""

    def __init__(self, action: Callable[[], object]) -> None:
        self._action = action
        self._lock = threading.Lock()
        self._done = False

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._action()


def prestart(settings: EngineSettings) -> None:
    """Start the fork server now, so that it imports the engine while the caller imports the
    rest (Prefect, on the other core): the first batch then finds its workers ready."""
    if settings.mode is EngineMode.PROCESSES:
        multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
        forkserver.ensure_running()


_SHARED: dict[EngineSettings, EnginePool[Any, Any]] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(settings: EngineSettings) -> EnginePool[Any, Any]:
    """This process's pool for ``settings`` (created on first use; :func:`close_shared_pools` ends them)."""
    with _SHARED_LOCK:
        pool = _SHARED.get(settings)
        if pool is None:
            pool = _SHARED[settings] = EnginePool(settings)
        return pool


def close_shared_pools() -> None:
    with _SHARED_LOCK:
        pools = list(_SHARED.values())
        _SHARED.clear()
    for pool in pools:
        pool.close()
