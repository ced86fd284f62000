"""This process's sign of progress: when a job last started or finished, for the lease's renewal.

The audit lease is renewed only while the audit makes progress (:meth:`Lease.kept_alive
<stormwatch.tasks.storage.lease.Lease.kept_alive>`): a hung audit must lose its lease, so that
the next one can run. The engine pool beats whenever it hands a job to a worker or gets a job's
result back, the audit flow at each of its steps. One clock per process (the pool and the lease's
renewal thread live in the flow's process; jobs run on Dask workers beat in those workers'
processes, so there the flow beats once per finished batch).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """When progress was last seen, on a monotonic clock in seconds; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_s = clock()

    def beat(self) -> None:
        """Progress now (a job started or finished, a step of the audit began)."""
        with self._lock:
            self._last_s = self._clock()

    def idle_s(self) -> float:
        """Seconds since the last beat (0 or more)."""
        with self._lock:
            return max(0.0, self._clock() - self._last_s)


#: This process's heartbeat: the engine pool and the audit flow beat it, the lease's renewal reads it.
PROGRESS = Heartbeat()


def beat() -> None:
    """Progress now, on this process's heartbeat (:data:`PROGRESS`)."""
    PROGRESS.beat()


def idle_s() -> float:
    """Seconds since this process's last progress (:data:`PROGRESS`). A function, not the object,
    in flow code: a flow's function is pickled by value for Dask, with the globals it names, and a
    heartbeat holds a lock."""
    return PROGRESS.idle_s()
