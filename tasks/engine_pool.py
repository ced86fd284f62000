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
"""

from __future__ import annotations

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

Item = TypeVar("Item")
Result = TypeVar("Result")

#: Imported once by the fork server, so that each worker starts with the engine loaded.
PRELOAD = ["stormwatch.tasks.audit_job"]


class EngineMode(StrEnum):
    PROCESSES = "processes"
    THREADS = "threads"
    INLINE = "inline"  # the calling thread, one job after another


@dataclass(frozen=True)
class EngineSettings:
    """How jobs run: ``mode`` and ``workers`` (processes or threads, at least 1; ``None``: one per core)."""

    mode: EngineMode = EngineMode.PROCESSES
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"engine workers must be at least 1, got {self.workers}")

    @property
    def parallelism(self) -> int:
        if self.mode is EngineMode.INLINE:
            return 1
        return self.workers or os.cpu_count() or 1


class WorkerDied(RuntimeError):
    """The process running a job ended without a result (killed by a signal, or exited)."""


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


def run_alone(context: Any, call: Callable[..., Result], *args: Any) -> Result:
    """``call(*args)`` in a process of its own; :class:`WorkerDied` when that process dies first."""
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_send_result, args=(send, call, args, dict(os.environ)), daemon=True)
    process.start()
    send.close()
    try:
        ok, value = receive.recv()
    except EOFError:
        process.join()
        raise WorkerDied(f"the worker process diagnosing this job {describe_exit(process.exitcode)}") from None
    finally:
        receive.close()
    process.join()
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


class EnginePool(Generic[Item, Result]):
    """Runs ``call(item, *args)`` for many items on the settings' workers, results in item order.

    ``call`` must not raise for an item (it returns the item's failure as its result, as
    :func:`~stormwatch.tasks.audit_job.run_job` does); ``on_death(item, error)`` gives the
    result of an item whose process died twice. Thread-safe: batches share one pool.
    """

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._executor: Executor | None = None
        self._slots = threading.BoundedSemaphore(settings.parallelism)
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)

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
        future.add_done_callback(lambda _: self._slots.release())
        return executor, future

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
        wait([future for _, future in submitted])
        results: list[Result | None] = []
        suspects: list[int] = []
        for index, (executor, future) in enumerate(submitted):
            if isinstance(future.exception(), BrokenProcessPool):
                self._replace(executor)
                suspects.append(index)
                results.append(None)
            else:
                results.append(future.result())  # `call` returns an item's failure; anything raised is a bug
        for index in suspects:  # their process died, maybe because of another job: each alone now
            try:
                results[index] = run_alone(self._context, call, items[index], *args)
            except WorkerDied as died:
                results[index] = on_death(items[index], died)
        return results  # type: ignore[return-value]  # every None was replaced above

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


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
