"""The engine pool: real worker processes, and a worker killed midway costs only its own job."""

from __future__ import annotations

import os

import pytest

from stormwatch.tasks.engine_pool import EngineMode, EnginePool, EngineSettings, WorkerDied, describe_exit
from tests.tasks.crashing import exit_midway, pid_of_worker, square_or_die


def died(item: int, error: WorkerDied) -> int:
    return -1


@pytest.mark.parametrize("mode", list(EngineMode))
def test_results_come_back_in_item_order(mode: EngineMode) -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=mode, workers=2))
    try:
        assert pool.map(square_or_die, list(range(12)), -1, on_death=died) == [n * n for n in range(12)]
    finally:
        pool.close()


def test_processes_mode_runs_in_other_processes() -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=2))
    try:
        pids = set(pool.map(pid_of_worker, list(range(8)), on_death=died))
    finally:
        pool.close()
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_a_job_that_kills_its_worker_fails_alone_and_the_pool_goes_on() -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=2))
    deaths: list[tuple[int, str]] = []

    def record(item: int, error: WorkerDied) -> int:
        deaths.append((item, str(error)))
        return -1

    try:
        results = pool.map(square_or_die, list(range(10)), 4, on_death=record)
        again = pool.map(square_or_die, [2, 3], -1, on_death=record)  # a fresh pool replaced the broken one
    finally:
        pool.close()
    assert results == [n * n if n != 4 else -1 for n in range(10)]
    assert deaths == [(4, "the worker process diagnosing this job was killed by SIGKILL (out of memory?)")]
    assert again == [4, 9]


def test_a_worker_that_exits_is_described_by_its_code() -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=1))
    messages: list[str] = []
    try:
        pool.map(exit_midway, [1], on_death=lambda item, error: messages.append(str(error)) or 0)
    finally:
        pool.close()
    assert messages == ["the worker process diagnosing this job exited with code 3"]


def test_describe_exit() -> None:
    assert describe_exit(-15) == "was killed by SIGTERM"
    assert describe_exit(None) == "ended without an exit status"


def test_settings_refuse_zero_workers() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EngineSettings(workers=0)
    assert EngineSettings(mode=EngineMode.INLINE, workers=8).parallelism == 1
