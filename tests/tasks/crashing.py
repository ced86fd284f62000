"""Job functions for the engine pool's tests, importable by its worker processes."""

from __future__ import annotations

import os
import signal


def square_or_die(item: int, die_on: int) -> int:
    """``item ** 2``; the process running it kills itself when ``item`` is ``die_on``."""
    if item == die_on:
        os.kill(os.getpid(), signal.SIGKILL)
    return item * item


def pid_of_worker(item: int) -> int:
    return os.getpid()


def exit_midway(item: int) -> int:
    os._exit(3)


def read_size(path: str) -> int:
    """The bytes read from ``path``: opening a FIFO nobody writes to blocks forever."""
    with open(path, "rb") as stream:
        return len(stream.read())
